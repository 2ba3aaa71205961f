import ArgumentParser
import CosyncAuth
import Foundation
import PostgresNIO

/// `cosyncauth bench-pk-select`: the ceiling of a one-query read route on this machine: primary-key
/// SELECTs of a user row (bound parameter, random existing ids, every column decoded) from C
/// concurrent tasks, on a PostgresClient built exactly as `serve` builds its own (same URL parsing,
/// same pool size). tools/bench/login.sh prints getUser req/s next to it.
struct BenchPKSelect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-pk-select",
        abstract: "Measure primary-key SELECTs per second of user rows on the server's pool settings (needs users in the database).")

    @OptionGroup var db: DatabaseOptions

    @Option(help: "Seconds to run") var seconds: Double = 10
    @Option(help: "Concurrent tasks (as many as the HTTP benchmark's connections)") var concurrency: Int = 16
    @Option(help: "Seconds of warm-up before measuring (fills the pool)") var warmup: Double = 1

    /// The columns the server's user queries read (UserStore.columns).
    static let columns = """
        id, app_ref, handle, user_name, password_hash, locale, status, login_provider, social_user_id, \
        metadata::text, phone, phone_verified, two_factor_phone, two_factor_google, token_version, last_login, \
        created_at, updated_at, jwt_subject, kept_token_hash
        """

    func run() async throws {
        guard seconds > 0, seconds <= 600, (1...1024).contains(concurrency), warmup >= 0 else {
            throw ValidationError("seconds 0-600, concurrency 1-1024, warmup >= 0")
        }
        try await Failure.guarded {
            let database = try db.database()
            let logger = makeLogger("cosyncauth.bench")
            let pool = try servePoolSize(database)
            let (seconds, concurrency, warmup) = (self.seconds, self.concurrency, self.warmup)
            let (count, elapsed) = try await withDatabase(database, logger: logger, maxConnections: pool) { client in
                var ids: [UUID] = []
                for try await id in try await client.query("SELECT id FROM users LIMIT 100000", logger: logger).decode(UUID.self) {
                    ids.append(id)
                }
                guard !ids.isEmpty else { throw ValidationError("no users in the database: sign some up first") }
                let all = ids
                @Sendable func select() async throws {
                    let id = all.randomElement()!
                    let rows = try await client.query("SELECT \(unescaped: Self.columns) FROM users WHERE id = \(id)", logger: logger)
                    var found = 0
                    for try await row in rows {
                        _ = try row.decode(
                            (UUID, Int64, String, String?, String?, String, String, String, String?, String, String?, Bool, Bool, Bool,
                             Int, Date?, Date, Date, String?, Data?).self)
                        found += 1
                    }
                    guard found == 1 else { throw ValidationError("user \(id) not found") }
                }
                func loop(for duration: Double) async throws -> (Int, Double) {
                    let start = ContinuousClock.now
                    let deadline = start + .milliseconds(Int(duration * 1000))
                    let total = try await withThrowingTaskGroup(of: Int.self) { group in
                        for _ in 0..<concurrency {
                            group.addTask {
                                var count = 0
                                while ContinuousClock.now < deadline {
                                    try await select()
                                    count += 1
                                }
                                return count
                            }
                        }
                        return try await group.reduce(0, +)
                    }
                    return (total, (ContinuousClock.now - start) / .seconds(1))
                }
                if warmup > 0 { _ = try await loop(for: warmup) }
                return try await loop(for: seconds)
            }
            print(String(format: "pk select: %d queries in %.1f s = %.1f queries/s (concurrency %d, pool max %d)",
                         count, elapsed, Double(count) / elapsed, concurrency, pool))
        }
    }
}
