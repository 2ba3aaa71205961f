import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_codes`: single-use authorization codes, by their SHA-256.
enum OAuthCodeStore {
    static func insert(_ db: PostgresConnection, codeHash: Data, _ c: AuthorizationCode, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO oauth_codes (code_hash, app_ref, client_ref, session_id, user_id, redirect_uri, scope, nonce, code_challenge,
                dpop_jkt, auth_time, amr, expires_at)
            VALUES (\(codeHash), \(c.appRef), \(c.clientRef), \(c.sessionId), \(c.userId), \(c.redirectURI), \(c.scope), \(c.nonce),
                \(c.codeChallenge), \(c.dpopJKT), \(c.authTime), \(c.amr),
                now() + make_interval(secs => \(AuthorizationCode.lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// What presenting a code found.
    enum Redemption: Sendable {
        /// The code was live and is now spent: the caller exchanges it (in the same transaction).
        case redeemed(AuthorizationCode)
        /// The code was spent before: `grantRef` is what its first exchange gave (to revoke), if any.
        case reused(grantRef: UUID?, sessionId: UUID)
        /// No such code for this app, or it expired.
        case unknown
    }

    /// Spends the code `codeHash` of `appRef` (one statement: exactly one caller redeems a code).
    static func redeem(_ db: PostgresConnection, appRef: Int64, codeHash: Data, logger: Logger) async throws -> Redemption {
        let rows = try await db.query(
            """
            WITH spent AS (
                UPDATE oauth_codes SET used_at = now()
                WHERE code_hash = \(codeHash) AND app_ref = \(appRef) AND used_at IS NULL AND expires_at > now()
                RETURNING client_ref, session_id, user_id, redirect_uri, scope, nonce, code_challenge, dpop_jkt, auth_time, amr)
            SELECT true, client_ref, session_id, user_id, redirect_uri, scope, nonce, code_challenge, dpop_jkt, auth_time, amr, NULL::uuid
            FROM spent
            UNION ALL
            SELECT false, client_ref, session_id, user_id, redirect_uri, scope, nonce, code_challenge, dpop_jkt, auth_time, amr, grant_ref
            FROM oauth_codes WHERE code_hash = \(codeHash) AND app_ref = \(appRef) AND used_at IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM spent)
            """, logger: logger)
        for try await row in rows.decode(
            (Bool, UUID, UUID, UUID, String, String, String?, String, String?, Date, [String], UUID?).self)
        {
            if !row.0 { return .reused(grantRef: row.11, sessionId: row.2) }
            return .redeemed(AuthorizationCode(
                appRef: appRef, clientRef: row.1, sessionId: row.2, userId: row.3, redirectURI: row.4, scope: row.5, nonce: row.6,
                codeChallenge: row.7, dpopJKT: row.8, authTime: row.9, amr: row.10))
        }
        return .unknown
    }

    /// Records the grant a redeemed code gave, so a second presentation can revoke it.
    static func attachGrant(_ db: PostgresConnection, codeHash: Data, grantRef: UUID, logger: Logger) async throws {
        try await db.query("UPDATE oauth_codes SET grant_ref = \(grantRef) WHERE code_hash = \(codeHash)", logger: logger)
    }

    /// Drops codes 10 minutes after they expired (housekeeping); spent codes stay until then, so a
    /// replay is still recognised as one. Answers how many went.
    static func deleteExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "DELETE FROM oauth_codes WHERE expires_at < now() - interval '10 minutes' RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
