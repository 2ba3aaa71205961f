import Logging
import PostgresNIO

/// SQL that asks the database about itself, no table of ours: the liveness ping and the pool's
/// connections as PostgreSQL sees them (`DatabaseMonitor`, `AppCacheListener`).
enum DatabaseStatusStore {
    /// `SELECT 1`: the connection answers.
    static func ping(_ db: PostgresConnection, logger: Logger) async throws {
        try await db.query("SELECT 1", logger: logger)
    }

    /// This server's connections (those named `applicationName`) by state: active, idle, and idle in
    /// a transaction.
    static func connectionStates(
        _ db: PostgresConnection, applicationName: String, logger: Logger
    ) async throws -> (active: Int, idle: Int, inTransaction: Int)? {
        let rows = try await db.query(
            """
            SELECT count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE state = 'idle'),
                   count(*) FILTER (WHERE state LIKE 'idle in transaction%')
            FROM pg_stat_activity WHERE application_name = \(applicationName)
            """, logger: logger)
        for try await (active, idle, inTransaction) in rows.decode((Int, Int, Int).self) { return (active, idle, inTransaction) }
        return nil
    }
}
