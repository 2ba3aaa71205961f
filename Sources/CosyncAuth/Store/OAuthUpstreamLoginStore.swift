import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_upstream_logins`: sign-ins through an upstream provider on their way (state, nonce,
/// PKCE verifier), each taken once.
enum OAuthUpstreamLoginStore {
    struct Row: Sendable {
        let providerRef: UUID
        let browserHash: Data
        let requestRef: String
        let nonce: String
        let codeVerifier: String
    }

    static func insert(
        _ db: PostgresConnection, stateHash: Data, appRef: Int64, providerRef: UUID, browserHash: Data, requestRef: String, nonce: String,
        codeVerifier: String, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO oauth_upstream_logins (state_hash, app_ref, provider_ref, browser_hash, request_ref, nonce, code_verifier, expires_at)
            VALUES (\(stateHash), \(appRef), \(providerRef), \(browserHash), \(requestRef), \(nonce), \(codeVerifier),
                    now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// Takes the sign-in of `stateHash` in one statement: it is deleted, and answered only when it had
    /// not expired. A second callback with the same state finds nothing.
    static func take(_ db: PostgresConnection, stateHash: Data, appRef: Int64, logger: Logger) async throws -> Row? {
        let rows = try await db.query(
            """
            DELETE FROM oauth_upstream_logins WHERE state_hash = \(stateHash) AND app_ref = \(appRef)
            RETURNING provider_ref, browser_hash, request_ref, nonce, code_verifier, expires_at > now()
            """, logger: logger)
        for try await c in rows.decode((UUID, Data, String, String, String, Bool).self) {
            return c.5 ? Row(providerRef: c.0, browserHash: c.1, requestRef: c.2, nonce: c.3, codeVerifier: c.4) : nil
        }
        return nil
    }

    /// Housekeeping: sign-ins nobody finished.
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query("DELETE FROM oauth_upstream_logins WHERE expires_at < now() RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
