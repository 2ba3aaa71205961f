import Foundation
import Logging
import PostgresNIO

/// SQL of the end-user flows: user lookups, pending signups and invites, reset codes and login
/// throttling. Every query is scoped by the app (`app_ref`).
public enum EndUserStore {
    // MARK: users

    /// The user whose handle or user name is `identifier` (lower-cased).
    static func user(_ db: PostgresConnection, appRef: Int64, handleOrUserName identifier: String, forUpdate: Bool = false, logger: Logger) async throws -> User? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await db.query(
            """
            SELECT \(unescaped: UserStore.columns) FROM users
            WHERE app_ref = \(appRef) AND (lower(handle) = \(identifier) OR lower(user_name) = \(identifier))
            ORDER BY (lower(handle) = \(identifier)) DESC LIMIT 1\(unescaped: lock)
            """, logger: logger)
        return try await UserStore.decode(rows).first
    }

    static func user(_ db: PostgresConnection, appRef: Int64, handle: String, exact: Bool = false, forUpdate: Bool = false, logger: Logger) async throws -> User? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let condition = exact ? "handle = $2" : "lower(handle) = lower($2)"
        var binds = PostgresBindings()
        binds.append(appRef)
        binds.append(handle)
        let rows = try await db.query(
            PostgresQuery(unsafeSQL: "SELECT \(UserStore.columns) FROM users WHERE app_ref = $1 AND \(condition)\(lock)", binds: binds),
            logger: logger)
        return try await UserStore.decode(rows).first
    }

    static func touchLastLogin(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("UPDATE users SET last_login = now() WHERE id = \(userId)", logger: logger)
    }

    /// Sets the password and ends the user's sessions: all of them, or all but `keep` (a
    /// changePassword keeps the caller's). The token version moves on, which ends the session-less
    /// tokens too, except the one whose hash is `keepTokenHash` (the caller's, when it has no session).
    /// Returns the ended sessions.
    @discardableResult
    static func setPassword(
        _ db: PostgresConnection, userId: UUID, hash: String, disableSecondFactor: Bool, keepSession: UUID? = nil,
        keepTokenHash: Data? = nil, logger: Logger
    ) async throws -> [UUID] {
        if disableSecondFactor {
            try await db.query(
                """
                UPDATE users SET password_hash = \(hash), token_version = token_version + 1, kept_token_hash = \(keepTokenHash),
                    two_factor_phone = false, two_factor_google = false, totp_secret_sealed = NULL, totp_last_step = 0, updated_at = now()
                WHERE id = \(userId)
                """, logger: logger)
            try await db.query("DELETE FROM login_challenges WHERE user_id = \(userId)", logger: logger)
        } else {
            try await db.query(
                """
                UPDATE users SET password_hash = \(hash), token_version = token_version + 1, kept_token_hash = \(keepTokenHash),
                    updated_at = now()
                WHERE id = \(userId)
                """, logger: logger)
        }
        return try await SessionStore.deleteAll(db, userId: userId, except: keepSession, logger: logger)
    }

    /// Replaces a legacy raw-MD5 hash with bcrypt after a successful login (no token revocation).
    static func upgradePasswordHash(_ db: PostgresConnection, userId: UUID, from old: String, to new: String, logger: Logger) async throws {
        try await db.query(
            "UPDATE users SET password_hash = \(new) WHERE id = \(userId) AND password_hash = \(old)", logger: logger)
    }

    static func setMetadata(_ db: PostgresConnection, userId: UUID, metadata: [String: JSONValue], logger: Logger) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query("UPDATE users SET metadata = \(text)::jsonb, updated_at = now() WHERE id = \(userId)", logger: logger)
    }

    static func setLocale(_ db: PostgresConnection, userId: UUID, locale: String, logger: Logger) async throws {
        try await db.query("UPDATE users SET locale = \(locale), updated_at = now() WHERE id = \(userId)", logger: logger)
    }

    /// Sets the user name once; false when the user already had one.
    static func setUserName(_ db: PostgresConnection, userId: UUID, userName: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "UPDATE users SET user_name = \(userName), updated_at = now() WHERE id = \(userId) AND user_name IS NULL RETURNING id",
            logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// True when `name` is a user name or a handle in the app.
    static func identifierTaken(_ db: PostgresConnection, appRef: Int64, name: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            SELECT 1 FROM users WHERE app_ref = \(appRef) AND (lower(user_name) = \(name) OR lower(handle) = \(name)) LIMIT 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func deleteUser(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM users WHERE id = \(userId)", logger: logger)
    }

    // MARK: signups and invites

    struct Pending: Sendable {
        let id: UUID
        let handle: String
        let passwordHash: String?
        let codeSealed: Data?
        let attempts: Int
        let metadata: [String: JSONValue]
        let locale: String
        let status: String
        let expiresAt: Date
        let senderHandle: String?
        let senderUserId: String?
    }

    /// The pending signup or invite of a handle (a handle has at most one pending signup); locked for
    /// the rest of the transaction unless `lock` is false.
    static func pending(
        _ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, lock: Bool = true, logger: Logger
    ) async throws -> Pending? {
        try await pendingRows(db, kind, appRef: appRef, handle: handle, lock: lock, logger: logger).first
    }

    /// Every pending row of a handle, oldest first, or only the invite of one sender (a handle has at
    /// most one pending invite per sender, enduser-api.md §5.8 step 7); locked unless `lock` is false.
    static func pendingRows(
        _ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, sender: String? = nil, lock: Bool = true,
        logger: Logger
    ) async throws -> [Pending] {
        let senders = kind == .invites ? "sender_handle, sender_user_id" : "NULL::text, NULL::text"
        let password = kind == .signups ? "password_hash" : "NULL::text"
        let senderFilter = kind == .invites && sender != nil ? " AND lower(sender_handle) = lower($3)" : ""
        var binds = PostgresBindings()
        binds.append(appRef)
        binds.append(handle)
        if !senderFilter.isEmpty { binds.append(sender ?? "") }
        let rows = try await db.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT id, handle, \(password), code_sealed, code_attempts, metadata::text, locale, status, expires_at, \(senders)
                    FROM \(kind.rawValue)
                    WHERE app_ref = $1 AND lower(handle) = $2 AND status = 'pending'\(senderFilter)
                    ORDER BY created_at, id\(lock ? " FOR UPDATE" : "")
                    """, binds: binds), logger: logger)
        var found: [Pending] = []
        for try await c in rows.decode((UUID, String, String?, Data?, Int, String, String, String, Date, String?, String?).self) {
            let metadata = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(c.5.utf8))) ?? [:]
            found.append(Pending(
                id: c.0, handle: c.1, passwordHash: c.2, codeSealed: c.3, attempts: c.4, metadata: metadata, locale: c.6,
                status: c.7, expiresAt: c.8, senderHandle: c.9, senderUserId: c.10))
        }
        return found
    }

    static func hasVerified(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "SELECT 1 FROM \(unescaped: kind.rawValue) WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'verified' LIMIT 1",
            logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func insertSignup(
        _ db: PostgresConnection, id: UUID, appRef: Int64, handle: String, passwordHash: String, codeSealed: Data,
        metadata: [String: JSONValue], locale: String, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query(
            """
            INSERT INTO signups (id, app_ref, handle, password_hash, code_sealed, metadata, locale, expires_at)
            VALUES (\(id), \(appRef), \(handle), \(passwordHash), \(codeSealed), \(text)::jsonb, \(locale),
                    now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    static func insertInvite(
        _ db: PostgresConnection, id: UUID, appRef: Int64, handle: String, senderHandle: String, senderUserId: String, codeSealed: Data,
        metadata: [String: JSONValue], locale: String, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query(
            """
            INSERT INTO invites (id, app_ref, handle, sender_handle, sender_user_id, code_sealed, metadata, locale, expires_at)
            VALUES (\(id), \(appRef), \(handle), \(senderHandle), \(senderUserId), \(codeSealed), \(text)::jsonb, \(locale),
                    now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// Closes a dead pending signup or invite (too many wrong guesses, or expired) before a new one
    /// takes its place.
    static func markExpired(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET status = 'expired', code_sealed = NULL, updated_at = now() WHERE id = \(id)",
            logger: logger)
    }

    static func countFailedCode(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET code_attempts = code_attempts + 1, updated_at = now() WHERE id = \(id)",
            logger: logger)
    }

    /// A wrong guess at a handle's invite codes counts against every pending invite of the handle.
    static func countFailedInviteCode(_ db: PostgresConnection, appRef: Int64, handle: String, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE invites SET code_attempts = code_attempts + 1, updated_at = now()
            WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'pending'
            """, logger: logger)
    }

    /// Closes the other pending invites of a handle once one of them was accepted.
    static func closeOtherInvites(_ db: PostgresConnection, appRef: Int64, handle: String, keep id: UUID, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE invites SET status = 'expired', code_sealed = NULL, updated_at = now()
            WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'pending' AND id <> \(id)
            """, logger: logger)
    }

    static func markVerified(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET status = 'verified', code_sealed = NULL, updated_at = now() WHERE id = \(id)",
            logger: logger)
    }

    // MARK: reset codes

    struct ResetCode: Sendable {
        let id: UUID
        let userId: UUID
        let codeSealed: Data
        let attempts: Int
    }

    /// Inserts a reset code and drops the user's older ones: only the newest code is live, since
    /// several live codes would multiply the odds of each guess.
    static func insertResetCode(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, identifier: String, codeSealed: Data, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            WITH fresh AS (
                INSERT INTO reset_codes (app_ref, user_id, identifier, code_sealed, expires_at)
                VALUES (\(appRef), \(userId), \(identifier), \(codeSealed), now() + make_interval(secs => \(lifetimeSeconds)::int))
                RETURNING id)
            DELETE FROM reset_codes WHERE user_id = \(userId) AND id NOT IN (SELECT id FROM fresh)
            """, logger: logger)
    }

    /// The unexpired codes of an identifier, locked (all belong to one user: codes are made for the
    /// account the identifier named).
    static func liveResetCodes(_ db: PostgresConnection, appRef: Int64, identifier: String, logger: Logger) async throws -> [ResetCode] {
        let rows = try await db.query(
            """
            SELECT id, user_id, code_sealed, attempts FROM reset_codes
            WHERE app_ref = \(appRef) AND identifier = \(identifier) AND expires_at > now()
            ORDER BY created_at
            FOR UPDATE
            """, logger: logger)
        var codes: [ResetCode] = []
        for try await (id, userId, sealed, attempts) in rows.decode((UUID, UUID, Data, Int).self) {
            codes.append(ResetCode(id: id, userId: userId, codeSealed: sealed, attempts: attempts))
        }
        return codes
    }

    static func deleteResetCodes(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM reset_codes WHERE user_id = \(userId)", logger: logger)
    }
}
