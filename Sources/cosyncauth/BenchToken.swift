import ArgumentParser
import CosyncAuth
import Crypto
import Foundation
import _CryptoExtras

/// `cosyncauth bench-token`: user-JWT issuance per second through the server's own `TokenIssuer`
/// (RS256 with the app's signing key, held parsed by kid once the app cache knows the kid: the path a
/// login takes) next to the raw RSA-2048 PKCS#1 v1.5 SHA-256 sign ceiling of this machine, both with
/// the same number of workers (one per core by default). It creates one app in the database named by
/// DATABASE_URL (migrating it first, as `serve` does) and runs the app-cache listener, as `serve` does,
/// so the issuer's key cache is live.
struct BenchToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-token", abstract: "Measure RS256 user-JWT issuance per second next to raw RSA-2048 signatures.")

    @OptionGroup var db: DatabaseOptions
    @OptionGroup var secrets: SecretOptions

    @Option(help: "Seconds per measurement") var seconds: Double = 5
    @Option(help: "Workers (default: one per core)") var workers: Int = ProcessInfo.processInfo.activeProcessorCount

    func run() async throws {
        guard seconds > 0, seconds <= 600, (1...256).contains(workers) else { throw ValidationError("seconds 0-600, workers 1-256") }
        try await Failure.guarded {
            let database = try db.database()
            let migrator = try db.migrator()
            let configuration = ServerConfiguration(
                database: database, operatorToken: Environment.value("COSYNC_OPERATOR_TOKEN"), secretBox: try secrets.box(),
                publicURL: "http://localhost:8080")
            let logger = makeLogger("cosyncauth.bench")
            let (seconds, workers) = (self.seconds, self.workers)
            let lines = try await withDatabase(database, logger: logger, maxConnections: 4) { client in
                let (services, _) = try await CosyncServices.prepare(
                    configuration: configuration, client: client, migrator: migrator, logger: logger)
                return try await withThrowingTaskGroup(of: [String]?.self) { group in
                    // The listener turns the app cache on, as in `serve`; without it every issuance reads the key.
                    group.addTask {
                        try await services.appCacheListener().run()
                        return nil
                    }
                    group.addTask {
                        try await Self.measure(services: services, seconds: seconds, workers: workers)
                    }
                    defer { group.cancelAll() }
                    while let result = try await group.next() {
                        if let lines = result { return lines }
                    }
                    throw ValidationError("benchmark ended without a result")
                }
            }
            for line in lines { print(line) }
        }
    }

    static func measure(services: CosyncServices, seconds: Double, workers: Int) async throws -> [String] {
        let waitStart = ContinuousClock.now
        while !services.apps.cache.isLive {
            guard ContinuousClock.now - waitStart < .seconds(10) else { throw ValidationError("the app cache listener did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let created = try await services.apps.create(
            ["name": .string("bench-token \(Secrets.hexIdentifier().prefix(8))"), "signupFlow": .string("none")], actor: "bench")
        let ref = try await services.apps.row(appId: created.app.appId).ref
        let tokens = services.flows.tokens
        // Claims of a typical login's user JWT (see Metadata.userJWTClaims): e-mail, audience, subject, times.
        let now = Int(Date().timeIntervalSince1970)
        let claims: [String: JSONValue] = [
            "email": .string("someone.with.a.name@example.com"), "aud": .string("none"),
            "sub": .string("someone.with.a.name@example.com"), "iat": .int(now), "exp": .int(now + 24 * 3600),
        ]
        // One issuance loads and caches the key (and the kid in the app cache), as a server's first login does.
        let sample = try await tokens.userJWT(claims: claims, appRef: ref)
        let signingInput = Data(sample.split(separator: ".").prefix(2).joined(separator: ".").utf8)

        let rawKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let ceiling = try await rate(seconds: seconds, workers: workers) {
            for _ in 0..<8 { _ = try rawKey.signature(for: signingInput, padding: .insecurePKCS1v1_5) }
            return 8
        }
        let issued = try await rate(seconds: seconds, workers: workers) {
            for _ in 0..<8 { _ = try await tokens.userJWT(claims: claims, appRef: ref) }
            return 8
        }
        try? await services.apps.delete(appId: created.app.appId, actor: "bench")
        return [
            String(format: "raw RSA-2048 sign (ceiling):  %9.1f signatures/s (%d workers, %d-byte signing input)", ceiling, workers, signingInput.count),
            String(format: "user JWT issuance (RS256):    %9.1f tokens/s = %.2f of the ceiling", issued, issued / ceiling),
        ]
    }

    /// Operations per second of `body` (which returns how many it did) on `workers` tasks for `seconds`.
    static func rate(seconds: Double, workers: Int, _ body: @escaping @Sendable () async throws -> Int) async throws -> Double {
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int(seconds * 1000))
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var count = 0
                    while ContinuousClock.now < deadline { count += try await body() }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        return Double(total) / ((ContinuousClock.now - start) / .seconds(1))
    }
}
