import Foundation
import Logging
import PostgresNIO

/// SQL of `app_key_pool` (sql/0032), and only here: key pairs generated ahead for new apps
/// (`KeyPool.swift`). A key rotation still generates its key (rare, and often after a compromise).
enum KeyPoolStore {
    struct PooledKey {
        let kid: String
        let publicKeyPEM: String
        let privateKeySealed: Data
    }

    /// Takes one key out of the pool (the oldest), or nil when it is empty. In the caller's transaction:
    /// a rollback puts it back. SKIP LOCKED: concurrent creations take different keys without waiting.
    static func take(_ db: PostgresConnection, logger: Logger) async throws -> PooledKey? {
        let rows = try await db.query(
            """
            DELETE FROM app_key_pool
            WHERE id = (SELECT id FROM app_key_pool ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING kid, public_key_pem, private_key_sealed
            """, logger: logger)
        for try await (kid, pem, sealed) in rows.decode((String, String, Data).self) {
            return PooledKey(kid: kid, publicKeyPEM: pem, privateKeySealed: sealed)
        }
        return nil
    }

    static func count(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int FROM app_key_pool", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    static func insert(_ db: PostgresConnection, kid: String, publicKeyPEM: String, privateKeySealed: Data, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO app_key_pool (kid, public_key_pem, private_key_sealed) VALUES (\(kid), \(publicKeyPEM), \(privateKeySealed))
            ON CONFLICT (kid) DO NOTHING
            """, logger: logger)
    }
}
