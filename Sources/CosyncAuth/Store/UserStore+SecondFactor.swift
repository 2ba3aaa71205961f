import Foundation
import Logging
import PostgresNIO

/// The second-factor and social columns of `users`: TOTP secret, phone and its code, provider accounts.
extension UserStore {
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

    // MARK: social accounts

    /// Takes the one link by verified e-mail an account may make (README "Linking rule"): an imported
    /// CosyncJWT account created with `provider` whose provider subject was never recorded, that has no
    /// identity of the provider and has not spent the link yet. True when this call took it (the flag
    /// is set in the same statement, so two logins cannot both take it).
    static func takeSocialEmailLink(_ db: PostgresConnection, appRef: Int64, userId: UUID, provider: SocialProvider, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE users u SET social_email_link_spent = true
            WHERE u.id = \(userId) AND u.app_ref = \(appRef) AND u.login_provider = \(provider.rawValue) AND u.legacy_id IS NOT NULL
              AND NOT u.social_email_link_spent
              AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id AND i.kind = \(provider.rawValue))
            RETURNING u.id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Closes the link by e-mail for good (an admin linked or detached a provider account).
    static func spendSocialEmailLink(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("UPDATE users SET social_email_link_spent = true WHERE id = \(userId)", logger: logger)
    }

    /// Inserts the user of a social signup; its provider identity is the caller's to insert next.
    static func insertSocialUser(
        _ db: PostgresConnection, appRef: Int64, handle: String, provider: String, locale: String,
        metadata: [String: JSONValue]?, logger: Logger
    ) async throws -> User {
        let text = try metadata.map { try metadataText($0) } ?? "{}"
        let rows = try await db.query(
            """
            INSERT INTO users (app_ref, handle, password_hash, locale, metadata, login_provider)
            VALUES (\(appRef), \(handle), NULL, \(locale), \(text)::jsonb, \(provider))
            RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let user = try await decode(rows).first else { throw StoreError.noRowReturned }
        return user
    }
}
