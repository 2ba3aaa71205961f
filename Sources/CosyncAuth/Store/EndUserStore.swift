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

    static func setPassword(_ db: PostgresConnection, userId: UUID, hash: String, disableSecondFactor: Bool, logger: Logger) async throws {
        if disableSecondFactor {
            try await db.query(
                """
                UPDATE users SET password_hash = \(hash), token_version = token_version + 1, two_factor_phone = false,
                    two_factor_google = false, totp_secret_sealed = NULL, totp_last_step = 0, updated_at = now()
                WHERE id = \(userId)
                """, logger: logger)
            try await db.query("DELETE FROM login_challenges WHERE user_id = \(userId)", logger: logger)
        } else {
            try await db.query(
                "UPDATE users SET password_hash = \(hash), token_version = token_version + 1, updated_at = now() WHERE id = \(userId)",
                logger: logger)
        }
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

    static func pending(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, logger: Logger) async throws -> Pending? {
        let senders = kind == .invites ? "sender_handle, sender_user_id" : "NULL::text, NULL::text"
        let password = kind == .signups ? "password_hash" : "NULL::text"
        let rows = try await db.query(
            """
            SELECT id, handle, \(unescaped: password), code_sealed, code_attempts, metadata::text, locale, status, expires_at, \(unescaped: senders)
            FROM \(unescaped: kind.rawValue)
            WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'pending'
            FOR UPDATE
            """, logger: logger)
        for try await c in rows.decode((UUID, String, String?, Data?, Int, String, String, String, Date, String?, String?).self) {
            let metadata = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(c.5.utf8))) ?? [:]
            return Pending(
                id: c.0, handle: c.1, passwordHash: c.2, codeSealed: c.3, attempts: c.4, metadata: metadata, locale: c.6,
                status: c.7, expiresAt: c.8, senderHandle: c.9, senderUserId: c.10)
        }
        return nil
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

    /// Re-signup while pending: new password and metadata, same code, the window restarts.
    static func refreshSignup(
        _ db: PostgresConnection, id: UUID, passwordHash: String, metadata: [String: JSONValue], locale: String,
        lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query(
            """
            UPDATE signups SET password_hash = \(passwordHash), metadata = \(text)::jsonb, locale = \(locale),
                code_attempts = 0, expires_at = now() + make_interval(secs => \(lifetimeSeconds)::int), updated_at = now()
            WHERE id = \(id)
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

    static func refreshInvite(
        _ db: PostgresConnection, id: UUID, senderHandle: String, senderUserId: String, metadata: [String: JSONValue],
        lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query(
            """
            UPDATE invites SET sender_handle = \(senderHandle), sender_user_id = \(senderUserId), metadata = \(text)::jsonb,
                code_attempts = 0, expires_at = now() + make_interval(secs => \(lifetimeSeconds)::int), updated_at = now()
            WHERE id = \(id)
            """, logger: logger)
    }

    static func countFailedCode(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET code_attempts = code_attempts + 1, updated_at = now() WHERE id = \(id)",
            logger: logger)
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

    static func insertResetCode(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, identifier: String, codeSealed: Data, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO reset_codes (app_ref, user_id, identifier, code_sealed, expires_at)
            VALUES (\(appRef), \(userId), \(identifier), \(codeSealed), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
        // At most 5 live codes per user: the oldest go.
        try await db.query(
            """
            DELETE FROM reset_codes WHERE user_id = \(userId) AND id NOT IN (
                SELECT id FROM reset_codes WHERE user_id = \(userId) ORDER BY created_at DESC LIMIT 5)
            """, logger: logger)
    }

    static func liveResetCodes(_ db: PostgresConnection, appRef: Int64, identifier: String, maxAttempts: Int, logger: Logger) async throws -> [ResetCode] {
        let rows = try await db.query(
            """
            SELECT id, user_id, code_sealed, attempts FROM reset_codes
            WHERE app_ref = \(appRef) AND identifier = \(identifier) AND expires_at > now() AND attempts < \(maxAttempts)
            FOR UPDATE
            """, logger: logger)
        var codes: [ResetCode] = []
        for try await (id, userId, sealed, attempts) in rows.decode((UUID, UUID, Data, Int).self) {
            codes.append(ResetCode(id: id, userId: userId, codeSealed: sealed, attempts: attempts))
        }
        return codes
    }

    static func countFailedResetCodes(_ db: PostgresConnection, ids: [UUID], logger: Logger) async throws {
        for id in ids {
            try await db.query("UPDATE reset_codes SET attempts = attempts + 1 WHERE id = \(id)", logger: logger)
        }
    }

    static func deleteResetCodes(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM reset_codes WHERE user_id = \(userId)", logger: logger)
    }

    // MARK: login throttling

    /// True when any of the subjects is locked now.
    static func isLocked(_ db: PostgresConnection, appRef: Int64, subjects: [String], logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            SELECT 1 FROM login_throttle WHERE app_ref = \(appRef) AND subject = ANY(\(subjects)) AND locked_until > now() LIMIT 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Counts one failure. Counters older than `windowSeconds` start again; from `threshold` failures
    /// on, the subject is locked for 30 s, doubling per further failure, at most `maxLockSeconds`.
    static func recordFailure(
        _ db: PostgresConnection, appRef: Int64, subject: String, threshold: Int, windowSeconds: Int, maxLockSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO login_throttle AS t (app_ref, subject, failures, locked_until, updated_at)
            VALUES (\(appRef), \(subject), 1,
                    CASE WHEN 1 >= \(threshold) THEN now() + make_interval(secs => 30) END, now())
            ON CONFLICT (app_ref, subject) DO UPDATE SET
                failures = CASE WHEN t.updated_at < now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE t.failures + 1 END,
                locked_until = CASE
                    WHEN (CASE WHEN t.updated_at < now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE t.failures + 1 END) >= \(threshold)
                    THEN now() + make_interval(secs => LEAST(\(maxLockSeconds)::int,
                        30 * power(2, LEAST(20, (CASE WHEN t.updated_at < now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE t.failures + 1 END) - \(threshold)))::int))
                    ELSE NULL END,
                updated_at = now()
            """, logger: logger)
    }

    static func clearFailures(_ db: PostgresConnection, appRef: Int64, subject: String, logger: Logger) async throws {
        try await db.query("DELETE FROM login_throttle WHERE app_ref = \(appRef) AND subject = \(subject)", logger: logger)
    }
}
