import Foundation
import Logging
import PostgresNIO

/// One stored passkey (a row of `passkeys`).
public struct Passkey: Sendable, Equatable {
    public let id: UUID
    public let identityId: UUID
    public let userId: UUID
    public let credentialId: [UInt8]
    public let publicKeyCOSE: [UInt8]
    public let algorithm: Int
    public let signCount: Int64
    public let aaguid: [UInt8]
    public let format: String
    public let attestationVerified: Bool
    public let transports: [String]
    public let backupEligible: Bool
    public let backupState: Bool
    public let uvInitialized: Bool
    public let cloneSuspected: Bool
    public let name: String
    public let platform: String
    public let createdAt: Date
    public let updatedAt: Date
    public let lastUsedAt: Date?
}

/// A credential verified by a registration ceremony, not stored yet.
public struct NewPasskey: Sendable {
    public var credentialId: [UInt8]
    public var publicKeyCOSE: [UInt8]
    public var algorithm: Int
    public var signCount: Int64
    public var aaguid: [UInt8]
    public var format: String
    public var attestationVerified: Bool
    public var transports: [String]
    public var backupEligible: Bool
    public var backupState: Bool
    public var uvInitialized: Bool
    public var platform: String
}

/// The AppKey extras of a user (`appkey_profiles`).
public struct AppKeyProfile: Sendable, Equatable {
    public var displayName: String
    public var firstName: String?
    public var lastName: String?
    public var isAnonymous: Bool
    public var requireAddPasskey: Bool
}

/// A pending AppKey signup (`appkey_signups`).
public struct AppKeySignup: Sendable {
    public let id: UUID
    public let handle: String
    public let userId: UUID
    public let displayName: String
    public let firstName: String?
    public let lastName: String?
    public let locale: String
    public let passkey: NewPasskey
    public let codeSealed: Data
    public let attempts: Int
    public let expired: Bool
}

/// SQL of passkeys, AppKey profiles, passkey resets and pending AppKey signups. Every query is scoped
/// by the app (housekeeping aside).
public enum PasskeyStore {
    static let columns = """
        id, identity_id, user_id, credential_id, public_key_cose, algorithm, sign_count, aaguid, format, attestation_verified, \
        transports, backup_eligible, backup_state, uv_initialized, clone_suspected, name, platform, created_at, updated_at, last_used_at
        """

    static func decode(_ rows: PostgresRowSequence) async throws -> [Passkey] {
        var result: [Passkey] = []
        for try await row in rows {
            let c = try row.decode(
                (UUID, UUID, UUID, Data, Data, Int, Int64, Data, String, Bool, [String], Bool, Bool, Bool, Bool, String, String, Date, Date,
                 Date?).self)
            result.append(Passkey(
                id: c.0, identityId: c.1, userId: c.2, credentialId: Array(c.3), publicKeyCOSE: Array(c.4), algorithm: c.5, signCount: c.6,
                aaguid: Array(c.7), format: c.8, attestationVerified: c.9, transports: c.10, backupEligible: c.11, backupState: c.12,
                uvInitialized: c.13, cloneSuspected: c.14, name: c.15, platform: c.16, createdAt: c.17, updatedAt: c.18, lastUsedAt: c.19))
        }
        return result
    }

    /// Inserts the passkey and its identity; returns the identity's id. A credential id already
    /// registered in the app violates `passkeys_app_credential` (or `identities_app_subject`).
    @discardableResult
    static func insert(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, passkey p: NewPasskey, name: String, logger: Logger
    ) async throws -> UUID {
        let subject = Base64URL.encode(p.credentialId)
        let rows = try await db.query(
            """
            WITH identity AS (
                INSERT INTO identities (app_ref, user_id, kind, subject) VALUES (\(appRef), \(userId), 'passkey', \(subject))
                RETURNING id)
            INSERT INTO passkeys (identity_id, app_ref, user_id, credential_id, public_key_cose, algorithm, sign_count, aaguid, format,
                                  attestation_verified, transports, backup_eligible, backup_state, uv_initialized, name, platform)
            SELECT identity.id, \(appRef), \(userId), \(Data(p.credentialId)), \(Data(p.publicKeyCOSE)), \(p.algorithm), \(p.signCount),
                   \(Data(p.aaguid)), \(p.format), \(p.attestationVerified), \(p.transports), \(p.backupEligible), \(p.backupState),
                   \(p.uvInitialized), \(name), \(p.platform)
            FROM identity
            RETURNING identity_id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        throw StoreError.noRowReturned
    }

    static func list(_ db: PostgresConnection, appRef: Int64, userId: UUID, logger: Logger) async throws -> [Passkey] {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM passkeys WHERE app_ref = \(appRef) AND user_id = \(userId) ORDER BY created_at, id",
            logger: logger)
        return try await decode(rows)
    }

    static func find(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, credentialId: [UInt8], forUpdate: Bool = false, logger: Logger
    ) async throws -> Passkey? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await db.query(
            """
            SELECT \(unescaped: columns) FROM passkeys
            WHERE app_ref = \(appRef) AND user_id = \(userId) AND credential_id = \(Data(credentialId))\(unescaped: lock)
            """, logger: logger)
        return try await decode(rows).first
    }

    static func exists(_ db: PostgresConnection, appRef: Int64, credentialId: [UInt8], logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "SELECT 1 FROM passkeys WHERE app_ref = \(appRef) AND credential_id = \(Data(credentialId))", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func count(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int FROM passkeys WHERE user_id = \(userId)", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    /// After a verified assertion: the new counter, the backup state, UV seen, last use. The
    /// identity's last use is the caller's to record next (`IdentityStore.touchPasskey`).
    static func recordUse(
        _ db: PostgresConnection, id: UUID, signCount: Int64, backupState: Bool, userVerified: Bool, cloneSuspected: Bool, logger: Logger
    ) async throws {
        try await db.query(
            """
            UPDATE passkeys SET sign_count = GREATEST(sign_count, \(signCount)), backup_state = \(backupState),
                uv_initialized = uv_initialized OR \(userVerified), clone_suspected = clone_suspected OR \(cloneSuspected),
                last_used_at = now(), updated_at = now()
            WHERE id = \(id)
            """, logger: logger)
    }

    static func rename(_ db: PostgresConnection, appRef: Int64, userId: UUID, credentialId: [UInt8], name: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE passkeys SET name = \(name), updated_at = now()
            WHERE app_ref = \(appRef) AND user_id = \(userId) AND credential_id = \(Data(credentialId)) RETURNING id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// How many ways to sign in the user has: passkeys, social and password identities. An anonymous
    /// handle is no way in for AppKey (its account signs in with a passkey).
    static func signInMethods(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "SELECT count(*)::int FROM identities WHERE user_id = \(userId) AND kind <> 'anonymous'", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    // MARK: users and profiles

    /// Inserts the profile of a new AppKey user, after its user row and identity
    /// (`AppKeyFlows.insertUser`).
    static func insertProfile(_ db: PostgresConnection, appRef: Int64, userId: UUID, profile: AppKeyProfile, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO appkey_profiles (user_id, app_ref, display_name, first_name, last_name, is_anonymous)
            VALUES (\(userId), \(appRef), \(profile.displayName), \(profile.firstName), \(profile.lastName), \(profile.isAnonymous))
            """, logger: logger)
    }

    static func profile(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> AppKeyProfile? {
        let rows = try await db.query(
            "SELECT display_name, first_name, last_name, is_anonymous, require_add_passkey FROM appkey_profiles WHERE user_id = \(userId)",
            logger: logger)
        for try await c in rows.decode((String, String?, String?, Bool, Bool).self) {
            return AppKeyProfile(displayName: c.0, firstName: c.1, lastName: c.2, isAnonymous: c.3, requireAddPasskey: c.4)
        }
        return nil
    }

    static func setNames(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, displayName: String, firstName: String?, lastName: String?, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO appkey_profiles (user_id, app_ref, display_name, first_name, last_name)
            VALUES (\(userId), \(appRef), \(displayName), \(firstName), \(lastName))
            ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, first_name = EXCLUDED.first_name,
                last_name = EXCLUDED.last_name
            """, logger: logger)
    }

    static func setRequireAddPasskey(_ db: PostgresConnection, userId: UUID, _ flag: Bool, logger: Logger) async throws {
        try await db.query("UPDATE appkey_profiles SET require_add_passkey = \(flag) WHERE user_id = \(userId)", logger: logger)
    }

    /// The user whose user name is `name` (lower-case).
    static func user(_ db: PostgresConnection, appRef: Int64, userName: String, logger: Logger) async throws -> User? {
        let rows = try await db.query(
            "SELECT \(unescaped: UserStore.columns) FROM users WHERE app_ref = \(appRef) AND lower(user_name) = \(userName)",
            logger: logger)
        return try await UserStore.decode(rows).first
    }

    // MARK: passkey resets

    /// Opens a reset: the account waits for a new passkey, older resets go, a reset row is made. The
    /// caller ended the user's sessions and removed its passkeys first (`AppKeyFlows.resetPasskeys`).
    static func openReset(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, resetId: UUID, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO appkey_profiles (user_id, app_ref, require_add_passkey) VALUES (\(userId), \(appRef), true)
            ON CONFLICT (user_id) DO UPDATE SET require_add_passkey = true
            """, logger: logger)
        try await db.query("DELETE FROM passkey_resets WHERE user_id = \(userId)", logger: logger)
        try await db.query(
            """
            INSERT INTO passkey_resets (id, app_ref, user_id, expires_at)
            VALUES (\(resetId), \(appRef), \(userId), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// When a reset was made, if it is unused and alive.
    static func liveReset(_ db: PostgresConnection, id: UUID, userId: UUID, logger: Logger) async throws -> Date? {
        let rows = try await db.query(
            "SELECT created_at FROM passkey_resets WHERE id = \(id) AND user_id = \(userId) AND used_at IS NULL AND expires_at > now()",
            logger: logger)
        for try await date in rows.decode(Date.self) { return date }
        return nil
    }

    /// Uses a reset (once); false when it was used, expired or removed meanwhile.
    static func useReset(_ db: PostgresConnection, id: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "UPDATE passkey_resets SET used_at = now() WHERE id = \(id) AND used_at IS NULL AND expires_at > now() RETURNING id", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Housekeeping: removes passkey resets that expired more than a day ago; returns how many.
    static func purgeExpiredResets(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH r AS (DELETE FROM passkey_resets WHERE expires_at < now() - interval '1 day' RETURNING 1)
            SELECT count(*)::int FROM r
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    // MARK: pending signups

    /// Adds a pending signup. Others pending for the same handle stay: each has its own signup-token,
    /// so whoever starts a signup for someone else's address cancels nothing of theirs.
    static func insertSignup(
        _ db: PostgresConnection, appRef: Int64, handle: String, userId: UUID, displayName: String, firstName: String?, lastName: String?,
        locale: String, passkey p: NewPasskey, codeSealed: Data, tokenHash: Data, lifetimeSeconds: Int, id: UUID, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO appkey_signups (id, app_ref, handle, user_id, display_name, first_name, last_name, locale, credential_id,
                public_key_cose, algorithm, sign_count, aaguid, format, attestation_verified, transports, backup_eligible, backup_state,
                uv_initialized, platform, code_sealed, token_hash, expires_at)
            VALUES (\(id), \(appRef), \(handle), \(userId), \(displayName), \(firstName), \(lastName), \(locale), \(Data(p.credentialId)),
                \(Data(p.publicKeyCOSE)), \(p.algorithm), \(p.signCount), \(Data(p.aaguid)), \(p.format), \(p.attestationVerified),
                \(p.transports), \(p.backupEligible), \(p.backupState), \(p.uvInitialized), \(p.platform), \(codeSealed), \(tokenHash),
                now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    static let signupColumns = """
        id, handle, user_id, display_name, first_name, last_name, locale, credential_id, public_key_cose, algorithm, sign_count, aaguid, \
        format, attestation_verified, transports, backup_eligible, backup_state, uv_initialized, platform, code_sealed, attempts, \
        expires_at <= now()
        """

    static func decodeSignups(_ rows: PostgresRowSequence) async throws -> [AppKeySignup] {
        var result: [AppKeySignup] = []
        for try await row in rows {
            let c = try row.decode(
                (UUID, String, UUID, String, String?, String?, String, Data, Data, Int, Int64, Data, String, Bool, [String], Bool, Bool, Bool,
                 String, Data, Int, Bool).self)
            let passkey = NewPasskey(
                credentialId: Array(c.7), publicKeyCOSE: Array(c.8), algorithm: c.9, signCount: c.10, aaguid: Array(c.11), format: c.12,
                attestationVerified: c.13, transports: c.14, backupEligible: c.15, backupState: c.16, uvInitialized: c.17, platform: c.18)
            result.append(AppKeySignup(
                id: c.0, handle: c.1, userId: c.2, displayName: c.3, firstName: c.4, lastName: c.5, locale: c.6, passkey: passkey,
                codeSealed: c.19, attempts: c.20, expired: c.21))
        }
        return result
    }

    /// The pending signup of a signup-token (by its hash), and its app.
    static func signup(_ db: PostgresConnection, tokenHash: Data, logger: Logger) async throws -> (appRef: Int64, signup: AppKeySignup)? {
        // Two statements keep the decoders simple: the app, then the row.
        let refs = try await db.query("SELECT app_ref FROM appkey_signups WHERE token_hash = \(tokenHash)", logger: logger)
        var appRef: Int64?
        for try await ref in refs.decode(Int64.self) { appRef = ref }
        guard let appRef else { return nil }
        let signups = try await db.query("SELECT \(unescaped: signupColumns) FROM appkey_signups WHERE token_hash = \(tokenHash)", logger: logger)
        guard let signup = try await decodeSignups(signups).first else { return nil }
        return (appRef, signup)
    }

    /// The app of a signup-token, when the signup exists.
    static func signupAppRef(_ db: PostgresConnection, tokenHash: Data, logger: Logger) async throws -> Int64? {
        let rows = try await db.query("SELECT app_ref FROM appkey_signups WHERE token_hash = \(tokenHash)", logger: logger)
        for try await ref in rows.decode(Int64.self) { return ref }
        return nil
    }

    /// Reserves one code attempt (atomically: no two requests can both take the last); nil when the
    /// signup is gone or its attempts are used up.
    static func reserveAttempt(_ db: PostgresConnection, id: UUID, maxAttempts: Int, logger: Logger) async throws -> Int? {
        let rows = try await db.query(
            "UPDATE appkey_signups SET attempts = attempts + 1 WHERE id = \(id) AND attempts < \(maxAttempts) RETURNING attempts",
            logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return nil
    }

    /// Takes (deletes) every pending signup of a handle, whose account is being created; returns their ids.
    static func takeSignups(_ db: PostgresConnection, appRef: Int64, handle: String, logger: Logger) async throws -> [UUID] {
        let rows = try await db.query(
            "DELETE FROM appkey_signups WHERE app_ref = \(appRef) AND lower(handle) = lower(\(handle)) RETURNING id", logger: logger)
        var ids: [UUID] = []
        for try await id in rows.decode(UUID.self) { ids.append(id) }
        return ids
    }

    /// Takes (deletes) the pending signup; false when another request took it first.
    static func takeSignup(_ db: PostgresConnection, id: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query("DELETE FROM appkey_signups WHERE id = \(id) RETURNING id", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Housekeeping: removes pending signups that expired more than a day ago; returns how many.
    static func purgeExpiredSignups(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH s AS (DELETE FROM appkey_signups WHERE expires_at < now() - interval '1 day' RETURNING 1)
            SELECT count(*)::int FROM s
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
