import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_assertion_jtis`: the JWT-bearer assertions accepted, so each is accepted once on
/// every node.
enum OAuthAssertionJTIStore {
    /// Records the assertion `jti` of `issuer` in one statement; false when it was already recorded (a
    /// replay, here or on another node). The row lives until `expiresAt`.
    static func take(_ db: PostgresConnection, appRef: Int64, issuer: String, jti: String, expiresAt: Date, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            INSERT INTO oauth_assertion_jtis (app_ref, issuer, jti, expires_at) VALUES (\(appRef), \(issuer), \(jti), \(expiresAt))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Housekeeping: removes the rows of assertions that can no longer be accepted anyway.
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query("DELETE FROM oauth_assertion_jtis WHERE expires_at < now() RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
