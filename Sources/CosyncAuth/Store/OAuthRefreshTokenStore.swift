import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_refresh_tokens`: the refresh tokens of a grant, by their SHA-256. A rotated token
/// keeps its row (with its successor sealed) until it expires, so a retry inside the grace window
/// answers the same successor and a replay after it is recognised as reuse.
enum OAuthRefreshTokenStore {
    /// Inserts a refresh token of grant `grantRef`: it expires `slidingSeconds` from now, or with the
    /// grant, whichever comes first. Answers its expiry.
    static func insert(
        _ db: PostgresConnection, tokenHash: Data, grantRef: UUID, slidingSeconds: Int, absoluteExpiresAt: Date, logger: Logger
    ) async throws -> Date {
        let rows = try await db.query(
            """
            INSERT INTO oauth_refresh_tokens (token_hash, grant_ref, expires_at)
            VALUES (\(tokenHash), \(grantRef), LEAST(now() + make_interval(secs => \(slidingSeconds)::int), \(absoluteExpiresAt)))
            RETURNING expires_at
            """, logger: logger)
        for try await expires in rows.decode(Date.self) { return expires }
        throw StoreError.noRowReturned
    }

    /// Whose a refresh token is (no lock): the token endpoint locks the user and the session first,
    /// then the token (`lock`), in the order revocations take them.
    static func owner(_ db: PostgresConnection, appRef: Int64, tokenHash: Data, logger: Logger) async throws -> (sessionId: UUID, userId: UUID)? {
        let rows = try await db.query(
            """
            SELECT g.session_id, g.user_id FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_ref
            WHERE t.token_hash = \(tokenHash) AND g.app_ref = \(appRef)
            """, logger: logger)
        for try await (session, user) in rows.decode((UUID, UUID).self) { return (session, user) }
        return nil
    }

    /// A refresh token locked for its use (`FOR UPDATE`), with its grant. Concurrent uses of one token
    /// queue on this lock; each one after the first sees it rotated.
    struct Locked: Sendable {
        let grant: OAuthGrant
        /// Neither the token nor its grant has expired.
        let live: Bool
        let rotated: Bool
        /// Rotated no more than the grace window ago (PostgreSQL's clock).
        let withinGrace: Bool
        let successorSealed: Data?
    }

    static func lock(_ db: PostgresConnection, appRef: Int64, tokenHash: Data, graceSeconds: Int, logger: Logger) async throws -> Locked? {
        let rows = try await db.query(
            """
            SELECT g.id, g.client_ref, g.session_id, g.user_id, g.scope, g.dpop_jkt, g.auth_time, g.amr, g.absolute_expires_at,
                   t.expires_at > now() AND g.absolute_expires_at > now(),
                   t.rotated_at IS NOT NULL,
                   t.rotated_at IS NOT NULL AND t.rotated_at >= clock_timestamp() - make_interval(secs => \(graceSeconds)::int),
                   t.successor_sealed
            FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_ref
            WHERE t.token_hash = \(tokenHash) AND g.app_ref = \(appRef)
            FOR UPDATE OF t
            """, logger: logger)
        for try await c in rows.decode((UUID, UUID, UUID, UUID, String, String?, Date, [String], Date, Bool, Bool, Bool, Data?).self) {
            let grant = OAuthGrant(
                ref: c.0, appRef: appRef, clientRef: c.1, sessionId: c.2, userId: c.3, scope: c.4, dpopJKT: c.5, authTime: c.6, amr: c.7,
                absoluteExpiresAt: c.8)
            return Locked(grant: grant, live: c.9, rotated: c.10, withinGrace: c.11, successorSealed: c.12)
        }
        return nil
    }

    /// Marks a locked token rotated to its successor (whose value is kept sealed for the grace window).
    static func rotate(_ db: PostgresConnection, tokenHash: Data, successorHash: Data, successorSealed: Data, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE oauth_refresh_tokens SET rotated_at = now(), successor_hash = \(successorHash), successor_sealed = \(successorSealed)
            WHERE token_hash = \(tokenHash)
            """, logger: logger)
    }

    /// A refresh token as introspection and revocation see it.
    struct Status: Sendable {
        let grant: OAuthGrant
        let clientId: String
        let issuedAt: Date
        let expiresAt: Date
        /// Not rotated, not expired, its grant live, its session live and its user active.
        let active: Bool
    }

    static func status(_ db: PostgresConnection, appRef: Int64, tokenHash: Data, logger: Logger) async throws -> Status? {
        let rows = try await db.query(
            """
            SELECT g.id, g.client_ref, g.session_id, g.user_id, g.scope, g.dpop_jkt, g.auth_time, g.amr, g.absolute_expires_at,
                   c.client_id, t.created_at, t.expires_at,
                   t.rotated_at IS NULL AND t.expires_at > now() AND g.absolute_expires_at > now()
                   AND EXISTS (SELECT 1 FROM sessions s JOIN users u ON u.id = s.user_id
                               WHERE s.id = g.session_id AND s.expires_at > now() AND u.status = 'active')
            FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_ref JOIN oauth_clients c ON c.id = g.client_ref
            WHERE t.token_hash = \(tokenHash) AND g.app_ref = \(appRef)
            """, logger: logger)
        for try await c in rows.decode((UUID, UUID, UUID, UUID, String, String?, Date, [String], Date, String, Date, Date, Bool).self) {
            let grant = OAuthGrant(
                ref: c.0, appRef: appRef, clientRef: c.1, sessionId: c.2, userId: c.3, scope: c.4, dpopJKT: c.5, authTime: c.6, amr: c.7,
                absoluteExpiresAt: c.8)
            return Status(grant: grant, clientId: c.9, issuedAt: c.10, expiresAt: c.11, active: c.12)
        }
        return nil
    }

    /// Removes refresh tokens that expired more than a day ago (housekeeping: an expired token
    /// refreshes nothing; a replay of one that old is refused as unknown).
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "DELETE FROM oauth_refresh_tokens WHERE expires_at < now() - interval '1 day' RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
