import Logging
import PostgresNIO

/// SQL of `server_settings` (deployment-wide key/value pairs, such as the operator token's hash),
/// and only here.
enum ServerSettingsStore {
    static func value(_ db: PostgresConnection, key: String, logger: Logger) async throws -> String? {
        let rows = try await db.query("SELECT value FROM server_settings WHERE key = \(key)", logger: logger)
        for try await value in rows.decode(String.self) { return value }
        return nil
    }

    /// Stores `value` unless the key has one already (another node may have stored it first).
    static func insertIfAbsent(_ db: PostgresConnection, key: String, value: String, logger: Logger) async throws {
        try await db.query(
            "INSERT INTO server_settings (key, value) VALUES (\(key), \(value)) ON CONFLICT (key) DO NOTHING",
            logger: logger)
    }

    /// Stores `value`, replacing the key's value if it had one.
    static func set(_ db: PostgresConnection, key: String, value: String, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO server_settings (key, value) VALUES (\(key), \(value))
            ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
            """, logger: logger)
    }
}
