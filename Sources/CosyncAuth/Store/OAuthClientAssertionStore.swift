import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_client_assertions`: the `jti` of every client assertion (private_key_jwt) accepted,
/// until the assertion expires, so that each is used once on any number of nodes.
enum OAuthClientAssertionStore {
    /// Records the assertion `jti` of the client `clientRef`, valid until `expiresAt`. True when it was
    /// not seen before (or only as an assertion that has since expired); false for a replay. One
    /// statement: of two nodes recording the same `jti` at once, exactly one gets true.
    static func record(_ db: PostgresConnection, clientRef: UUID, jti: String, expiresAt: Date, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            INSERT INTO oauth_client_assertions AS a (client_ref, jti, expires_at) VALUES (\(clientRef), \(jti), \(expiresAt))
            ON CONFLICT (client_ref, jti) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE a.expires_at <= now()
            RETURNING true
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Deletes the assertions that have expired; how many went.
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH gone AS (DELETE FROM oauth_client_assertions WHERE expires_at <= now() RETURNING 1)
            SELECT count(*)::int FROM gone
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
