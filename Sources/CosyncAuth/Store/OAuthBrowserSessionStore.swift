import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_browser_sessions`: a browser signed in on the hosted login page, by its cookie's
/// SHA-256, and the session it opened. The row goes with its session (`ON DELETE CASCADE`): every
/// revocation of the session ends the browser's single sign-on too.
enum OAuthBrowserSessionStore {
    static func insert(_ db: PostgresConnection, tokenHash: Data, appRef: Int64, sessionId: UUID, logger: Logger) async throws {
        try await db.query(
            "INSERT INTO oauth_browser_sessions (token_hash, app_ref, session_id) VALUES (\(tokenHash), \(appRef), \(sessionId))",
            logger: logger)
    }

    /// The session (and its user) of the browser whose cookie hashes to `tokenHash`, while that session
    /// is unexpired.
    static func find(_ db: PostgresConnection, tokenHash: Data, appRef: Int64, logger: Logger) async throws -> (sessionId: UUID, userId: UUID)? {
        let rows = try await db.query(
            """
            SELECT b.session_id, s.user_id FROM oauth_browser_sessions b JOIN sessions s ON s.id = b.session_id
            WHERE b.token_hash = \(tokenHash) AND b.app_ref = \(appRef) AND s.app_ref = \(appRef) AND s.expires_at > now()
            """, logger: logger)
        for try await (session, user) in rows.decode((UUID, UUID).self) { return (session, user) }
        return nil
    }

    /// Forgets one browser (its cookie is cleared; the session may live on in its apps).
    static func delete(_ db: PostgresConnection, tokenHash: Data, logger: Logger) async throws {
        try await db.query("DELETE FROM oauth_browser_sessions WHERE token_hash = \(tokenHash)", logger: logger)
    }
}
