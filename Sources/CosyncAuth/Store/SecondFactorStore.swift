import Foundation
import Logging
import PostgresNIO

/// SQL for login challenges, phone verification, TOTP secrets, social accounts and the SMS cap.
enum SecondFactorStore {
    // MARK: login challenges

    struct Challenge: Sendable {
        let id: UUID
        let userId: UUID
        let factor: String
        let codeSealed: Data?
        let attempts: Int
        let expired: Bool
        let used: Bool
    }

    static func insertChallenge(
        _ db: PostgresConnection, id: UUID, appRef: Int64, userId: UUID, factor: String, codeSealed: Data?, lifetimeSeconds: Int,
        logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO login_challenges (id, app_ref, user_id, factor, code_sealed, expires_at)
            VALUES (\(id), \(appRef), \(userId), \(factor), \(codeSealed), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
        // Old challenges are of no use once expired.
        try await db.query("DELETE FROM login_challenges WHERE user_id = \(userId) AND expires_at < now() - interval '1 day'", logger: logger)
    }

    /// The challenge, locked for the rest of the transaction.
    static func lockChallenge(_ db: PostgresConnection, id: UUID, appRef: Int64, logger: Logger) async throws -> Challenge? {
        let rows = try await db.query(
            """
            SELECT id, user_id, factor, code_sealed, attempts, expires_at <= now(), used_at IS NOT NULL
            FROM login_challenges WHERE id = \(id) AND app_ref = \(appRef) FOR UPDATE
            """, logger: logger)
        for try await row in rows {
            let c = try row.decode((UUID, UUID, String, Data?, Int, Bool, Bool).self)
            return Challenge(id: c.0, userId: c.1, factor: c.2, codeSealed: c.3, attempts: c.4, expired: c.5, used: c.6)
        }
        return nil
    }

    static func countFailedChallenge(_ db: PostgresConnection, id: UUID, logger: Logger) async throws {
        try await db.query("UPDATE login_challenges SET attempts = attempts + 1 WHERE id = \(id)", logger: logger)
    }

    static func markChallengeUsed(_ db: PostgresConnection, id: UUID, logger: Logger) async throws {
        try await db.query("UPDATE login_challenges SET used_at = now(), code_sealed = NULL WHERE id = \(id)", logger: logger)
    }

    // MARK: TOTP

    /// The sealed TOTP secret and the last accepted step of a user, locked.
    static func lockTOTP(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> (sealed: Data?, lastStep: Int64)? {
        let rows = try await db.query(
            "SELECT totp_secret_sealed, totp_last_step FROM users WHERE id = \(userId) FOR UPDATE", logger: logger)
        for try await row in rows {
            let c = try row.decode((Data?, Int64).self)
            return (c.0, c.1)
        }
        return nil
    }

    /// Records an accepted step; false when a concurrent login already used this or a later step.
    static func acceptTOTPStep(_ db: PostgresConnection, userId: UUID, step: Int64, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "UPDATE users SET totp_last_step = \(step) WHERE id = \(userId) AND totp_last_step < \(step) RETURNING id", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func setTOTP(_ db: PostgresConnection, userId: UUID, sealed: Data, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE users SET totp_secret_sealed = \(sealed), totp_last_step = 0, two_factor_google = true, updated_at = now()
            WHERE id = \(userId)
            """, logger: logger)
    }

    static func setTwoFactor(_ db: PostgresConnection, userId: UUID, phone: Bool? = nil, google: Bool? = nil, logger: Logger) async throws {
        if let phone {
            try await db.query("UPDATE users SET two_factor_phone = \(phone), updated_at = now() WHERE id = \(userId)", logger: logger)
        }
        if let google {
            try await db.query("UPDATE users SET two_factor_google = \(google), updated_at = now() WHERE id = \(userId)", logger: logger)
        }
    }

    // MARK: phone

    /// True when another user of the app has this phone verified.
    static func phoneVerifiedByOther(_ db: PostgresConnection, appRef: Int64, phone: String, userId: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "SELECT 1 FROM users WHERE app_ref = \(appRef) AND phone = \(phone) AND phone_verified AND id <> \(userId) LIMIT 1",
            logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func setPendingPhone(_ db: PostgresConnection, userId: UUID, phone: String, codeSealed: Data, lifetimeSeconds: Int, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE users SET phone = \(phone), phone_verified = false, phone_code_sealed = \(codeSealed), phone_code_attempts = 0,
                phone_code_expires = now() + make_interval(secs => \(lifetimeSeconds)::int), updated_at = now()
            WHERE id = \(userId)
            """, logger: logger)
    }

    struct PhoneCode: Sendable {
        let phone: String?
        let sealed: Data?
        let attempts: Int
        let expired: Bool
    }

    static func lockPhoneCode(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> PhoneCode? {
        let rows = try await db.query(
            """
            SELECT phone, phone_code_sealed, phone_code_attempts, coalesce(phone_code_expires <= now(), true)
            FROM users WHERE id = \(userId) FOR UPDATE
            """, logger: logger)
        for try await row in rows {
            let c = try row.decode((String?, Data?, Int, Bool).self)
            return PhoneCode(phone: c.0, sealed: c.1, attempts: c.2, expired: c.3)
        }
        return nil
    }

    static func countFailedPhoneCode(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("UPDATE users SET phone_code_attempts = phone_code_attempts + 1 WHERE id = \(userId)", logger: logger)
    }

    static func markPhoneVerified(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE users SET phone_verified = true, phone_code_sealed = NULL, phone_code_expires = NULL, phone_code_attempts = 0,
                updated_at = now()
            WHERE id = \(userId)
            """, logger: logger)
    }

    // MARK: SMS cap

    /// SMS queued to one number of the app in the last hour. Takes a transaction-scoped lock on the
    /// (app, number) pair first, so concurrent requests for one number count one after the other.
    static func recentSMS(_ db: PostgresConnection, appRef: Int64, to: String, logger: Logger) async throws -> Int {
        try await db.query("SELECT pg_advisory_xact_lock(\(Int32(truncatingIfNeeded: appRef)), hashtext(\(to)))", logger: logger)
        let rows = try await db.query(
            """
            SELECT count(*)::int FROM messages
            WHERE app_ref = \(appRef) AND channel = 'sms' AND recipient = \(to) AND created_at > now() - interval '1 hour'
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    /// Counts one SMS against today's (UTC) cap of the app; false when the cap is reached.
    static func takeSMSQuota(_ db: PostgresConnection, appRef: Int64, dailyLimit: Int, logger: Logger) async throws -> Bool {
        guard dailyLimit > 0 else { return false }
        let rows = try await db.query(
            """
            INSERT INTO sms_daily_usage AS u (app_ref, day, queued) VALUES (\(appRef), (now() AT TIME ZONE 'UTC')::date, 1)
            ON CONFLICT (app_ref, day) DO UPDATE SET queued = u.queued + 1 WHERE u.queued < \(dailyLimit)
            RETURNING queued
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    // MARK: social accounts

    /// The user holding the provider account (`linked`), else the user whose handle is the provider's
    /// verified e-mail (not linked).
    static func socialMatch(
        _ db: PostgresConnection, appRef: Int64, provider: SocialProvider, email: String?, subject: String, logger: Logger
    ) async throws -> (user: User, linked: Bool)? {
        if let user = try await IdentityStore.user(db, appRef: appRef, kind: IdentityKind(provider), subject: subject, logger: logger) {
            return (user, true)
        }
        guard let email, !email.isEmpty else { return nil }
        return try await UserStore.user(db, appRef: appRef, handle: email, logger: logger).map { ($0, false) }
    }

    static func insertSocialUser(
        _ db: PostgresConnection, appRef: Int64, handle: String, provider: String, subject: String, locale: String,
        metadata: [String: JSONValue]?, logger: Logger
    ) async throws -> User {
        let text = try metadata.map { try UserStore.metadataText($0) } ?? "{}"
        let rows = try await db.query(
            """
            INSERT INTO users (app_ref, handle, password_hash, locale, metadata, login_provider)
            VALUES (\(appRef), \(handle), NULL, \(locale), \(text)::jsonb, \(provider))
            RETURNING \(unescaped: UserStore.columns)
            """, logger: logger)
        guard let user = try await UserStore.decode(rows).first else { throw StoreError.noRowReturned }
        try await IdentityStore.insert(
            db, appRef: appRef, userId: user.id, kind: provider == "apple" ? .apple : .google, subject: subject, email: handle, logger: logger)
        return user
    }
}
