import ArgumentParser
import CosyncAuth
import Foundation
import PostgresNIO

/// `cosyncauth bench-seed-apps`: inserts N apps quickly for benchmarks, through the store layer the
/// admin API uses (app row, app token signed by the server key and sealed, signing key sealed per app),
/// but with ONE pre-generated RSA key pair shared by all of them: the admin API generates an RSA-2048
/// key per app, which takes minutes for 10,000 apps on a small machine. No audit rows. Writes the app
/// tokens, one per line, to `--out`. For benchmark databases only.
struct BenchSeedApps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-seed-apps",
        abstract: "Insert N benchmark apps sharing one signing key pair (fast seeding) and write their app tokens to a file.")

    @OptionGroup var db: DatabaseOptions
    @OptionGroup var secrets: SecretOptions

    @Option(help: "Apps to create") var count: Int = 10_000
    @Option(help: "File to write the app tokens to, one per line") var out: String
    @Option(help: "App settings as a JSON object, as the admin API takes them") var settings: String = #"{"signupFlow":"none","maxLoginAttempts":1000}"#
    @Option(help: "Concurrent inserting tasks") var workers: Int = 8
    @Option(help: "Name prefix of the apps") var prefix: String = "bench-seed"

    func run() async throws {
        guard (1...1_000_000).contains(count), (1...64).contains(workers) else { throw ValidationError("count 1-1000000, workers 1-64") }
        guard let input = try? JSONDecoder().decode(JSONValue.self, from: Data(settings.utf8)).objectValue else {
            throw ValidationError("--settings must be a JSON object")
        }
        let state: AppState
        do {
            state = try AppState(name: "bench").applying(input)
        } catch {
            throw ValidationError("--settings: \(error)")
        }
        try await Failure.guarded {
            let database = try db.database()
            let migrator = try db.migrator()
            let box = try secrets.box()
            let configuration = ServerConfiguration(
                database: database, operatorToken: Environment.value("COSYNC_OPERATOR_TOKEN"), secretBox: box, publicURL: "http://localhost:8080")
            let logger = makeLogger("cosyncauth.bench")
            let (count, workers, prefix) = (self.count, self.workers, self.prefix)
            let start = ContinuousClock.now
            let key = try RSAKeyMaterial.generate()
            let tokens = try await withDatabase(database, logger: logger, maxConnections: workers + 1) { client in
                let (services, _) = try await CosyncServices.prepare(
                    configuration: configuration, client: client, migrator: migrator, logger: logger)
                let serverKeys = services.serverKeys
                @Sendable func insert(_ index: Int) async throws -> String {
                    let appId = Secrets.hexIdentifier()
                    let appToken = try await serverKeys.sign(AppTokenClaims(appId: appId))
                    let tokenSealed = try box.seal(appToken, purpose: .appToken(appId: appId))
                    let privateSealed = try box.seal(key.privateKeyPEM, purpose: .appKey(kid: key.kid))
                    try await client.transaction(logger: logger) { db in
                        let row = try await AppStore.insertApp(
                            db, appId: appId, name: "\(prefix) \(index)", status: state.status.rawValue, settings: state.settings,
                            appSecretHash: Secrets.sha256(Secrets.token(prefix: "cas_")), credentialsSealed: nil, logger: logger)
                        try await AppStore.insertAppToken(
                            db, ref: row.ref, tokenHash: Secrets.sha256(appToken), tokenSealed: tokenSealed, origin: "issued", logger: logger)
                        try await AppStore.insertAppKey(
                            db, ref: row.ref, kid: key.kid, publicKeyPEM: key.publicKeyPEM, privateKeySealed: privateSealed, logger: logger)
                    }
                    return appToken
                }
                return try await withThrowingTaskGroup(of: [String].self) { group in
                    for worker in 0..<workers {
                        group.addTask {
                            var made: [String] = []
                            for index in stride(from: worker, to: count, by: workers) { made.append(try await insert(index)) }
                            return made
                        }
                    }
                    return try await group.reduce(into: [String]()) { $0 += $1 }
                }
            }
            try Data((tokens.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: out))
            let elapsed = (ContinuousClock.now - start) / .seconds(1)
            print(String(format: "seeded %d apps in %.1f s = %.0f apps/s", tokens.count, elapsed, Double(tokens.count) / elapsed)
                + " (one shared key pair; tokens in \(out))")
        }
    }
}
