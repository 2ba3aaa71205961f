import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_grants`: what one client holds on one session (a refresh-token family). Deleting a
/// grant ends its refresh tokens (`ON DELETE CASCADE`) and the access tokens issued from it (a
/// resource check looks for the grant); ending the session ends its grants.
enum OAuthGrantStore {
    /// Inserts a grant that lives `absoluteSeconds` from now, and answers it.
    static func insert(
        _ db: PostgresConnection, appRef: Int64, clientRef: UUID, sessionId: UUID, userId: UUID, scope: String, dpopJKT: String?,
        authTime: Date, amr: [String], absoluteSeconds: Int, logger: Logger
    ) async throws -> OAuthGrant {
        let rows = try await db.query(
            """
            INSERT INTO oauth_grants (app_ref, client_ref, session_id, user_id, scope, dpop_jkt, auth_time, amr, absolute_expires_at)
            VALUES (\(appRef), \(clientRef), \(sessionId), \(userId), \(scope), \(dpopJKT), \(authTime), \(amr),
                now() + make_interval(secs => \(absoluteSeconds)::int))
            RETURNING id, absolute_expires_at
            """, logger: logger)
        for try await (id, expires) in rows.decode((UUID, Date).self) {
            return OAuthGrant(
                ref: id, appRef: appRef, clientRef: clientRef, sessionId: sessionId, userId: userId, scope: scope, dpopJKT: dpopJKT,
                authTime: authTime, amr: amr, absoluteExpiresAt: expires)
        }
        throw StoreError.noRowReturned
    }

    /// Whose an authorization code is (a read of `oauth_codes`, which `OAuthCodeStore` writes; no
    /// lock): the code exchange locks the user and the session before it redeems the code, in the
    /// order revocations take them (they reach the code through the session's cascade).
    static func codeOwner(_ db: PostgresConnection, appRef: Int64, codeHash: Data, logger: Logger) async throws -> (sessionId: UUID, userId: UUID)? {
        let rows = try await db.query(
            "SELECT session_id, user_id FROM oauth_codes WHERE code_hash = \(codeHash) AND app_ref = \(appRef)", logger: logger)
        for try await (session, user) in rows.decode((UUID, UUID).self) { return (session, user) }
        return nil
    }

    /// Ends grant `ref` of the app (and its refresh tokens); false when there was none.
    @discardableResult
    static func delete(_ db: PostgresConnection, appRef: Int64, ref: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query("DELETE FROM oauth_grants WHERE id = \(ref) AND app_ref = \(appRef) RETURNING id", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Ends what client `clientRef` holds on session `sessionId` (one client has one grant on a
    /// session: a new authorization or exchange replaces the old family). Answers how many ended.
    @discardableResult
    static func deleteHeld(_ db: PostgresConnection, clientRef: UUID, sessionId: UUID, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "DELETE FROM oauth_grants WHERE client_ref = \(clientRef) AND session_id = \(sessionId) RETURNING id", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }

    /// The user behind an access token at a resource (userinfo, introspection), in one read: the
    /// session must be live and belong to the app and the user, the user active, and the client named
    /// by `clientId` must still hold the very grant `grantId` the token was issued under (revoking the
    /// grant ends its access tokens, also after the client opened a new grant on the session).
    static func liveUser(
        _ db: PostgresConnection, appRef: Int64, sessionId: UUID, userId: UUID, clientId: String, grantId: UUID, logger: Logger
    ) async throws -> User? {
        let rows = try await db.query(
            """
            SELECT \(unescaped: UserStore.qualifiedColumns("u"))
            FROM sessions s JOIN users u ON u.id = s.user_id
            WHERE s.id = \(sessionId) AND s.app_ref = \(appRef) AND s.user_id = \(userId) AND s.expires_at > now()
              AND u.status = 'active'
              AND EXISTS (
                SELECT 1 FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_ref
                WHERE g.id = \(grantId) AND g.session_id = s.id AND c.client_id = \(clientId) AND c.app_ref = \(appRef))
            """, logger: logger)
        for try await row in rows { return try UserStore.user(from: row) }
        return nil
    }

    /// Removes grants whose absolute lifetime ended more than a day ago (housekeeping: such a grant
    /// refreshes nothing, and its access tokens expired long before).
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "DELETE FROM oauth_grants WHERE absolute_expires_at < now() - interval '1 day' RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
