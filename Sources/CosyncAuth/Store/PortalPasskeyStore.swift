import Foundation
import Logging
import PostgresNIO

/// SQL of the Portal accounts' passkeys and their WebAuthn challenges (sql/0024_portal_passkeys.sql).
/// A challenge is taken by one DELETE … RETURNING, so it completes one ceremony at most; a passkey's
/// counter moves forward only (the UPDATE says so).
enum PortalPasskeyStore {
    struct PasskeyRow: Sendable {
        let id: UUID
        let accountId: UUID
        let credentialId: [UInt8]
        let publicKey: [UInt8]
        let signCount: Int64
        let backupEligible: Bool
        let name: String
        let createdAt: Date
        let lastUsedAt: Date?
    }

    static let columns = "id, account_id, credential_id, public_key, sign_count, backup_eligible, name, created_at, last_used_at"

    static func decode(_ rows: PostgresRowSequence) async throws -> [PasskeyRow] {
        var found: [PasskeyRow] = []
        for try await (id, account, credential, key, count, eligible, name, created, used) in rows.decode(
            (UUID, UUID, Data, Data, Int64, Bool, String, Date, Date?).self)
        {
            found.append(
                PasskeyRow(
                    id: id, accountId: account, credentialId: Array(credential), publicKey: Array(key), signCount: count,
                    backupEligible: eligible, name: name, createdAt: created, lastUsedAt: used))
        }
        return found
    }

    // MARK: passkeys

    /// Stores a new passkey; false when the credential id is registered already (to any account).
    static func insert(
        _ db: PostgresConnection, accountId: UUID, credentialId: [UInt8], publicKey: [UInt8], signCount: Int64, backupEligible: Bool,
        name: String, logger: Logger
    ) async throws -> Bool {
        let rows = try await db.query(
            """
            INSERT INTO portal_passkeys (account_id, credential_id, public_key, sign_count, backup_eligible, name)
            VALUES (\(accountId), \(Data(credentialId)), \(Data(publicKey)), \(signCount), \(backupEligible), \(name))
            ON CONFLICT (credential_id) DO NOTHING RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func passkey(_ db: PostgresConnection, credentialId: [UInt8], logger: Logger) async throws -> PasskeyRow? {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM portal_passkeys WHERE credential_id = \(Data(credentialId))", logger: logger)
        return try await decode(rows).first
    }

    /// The account's passkeys, oldest first (at most 100).
    static func passkeys(_ db: PostgresConnection, accountId: UUID, logger: Logger) async throws -> [PasskeyRow] {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM portal_passkeys WHERE account_id = \(accountId) ORDER BY created_at, id LIMIT 100",
            logger: logger)
        return try await decode(rows)
    }

    static func hasPasskey(_ db: PostgresConnection, accountId: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query("SELECT 1 FROM portal_passkeys WHERE account_id = \(accountId) LIMIT 1", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Records a use: the new counter (only forward) and the time. False when the counter did not move
    /// forward meanwhile (a concurrent use of the same passkey with a counter) or the passkey is gone.
    static func recordUse(_ db: PostgresConnection, id: UUID, signCount: Int64, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE portal_passkeys SET sign_count = \(signCount), last_used_at = now()
            WHERE id = \(id) AND (sign_count < \(signCount) OR (sign_count = 0 AND \(signCount) = 0))
            RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Removes one of the account's passkeys, unless it is the account's last way to sign in (no
    /// confirmed TOTP and no other passkey): the row is locked with its account first, so two removals
    /// at once cannot both pass. Answers what happened.
    enum Removal: Sendable { case removed(name: String), notFound, lastFactor }

    static func remove(_ db: PostgresConnection, id: UUID, accountId: UUID, logger: Logger) async throws -> Removal {
        let rows = try await db.query(
            """
            SELECT a.totp_enabled, (SELECT count(*) FROM portal_passkeys q WHERE q.account_id = a.id)::int
            FROM portal_accounts a WHERE a.id = \(accountId) FOR UPDATE
            """, logger: logger)
        var state: (Bool, Int)?
        for try await (totp, count) in rows.decode((Bool, Int).self) { state = (totp, count) }
        guard let (totp, count) = state else { return .notFound }
        let exists = try await db.query(
            "SELECT name FROM portal_passkeys WHERE id = \(id) AND account_id = \(accountId)", logger: logger)
        var name: String?
        for try await found in exists.decode(String.self) { name = found }
        guard let name else { return .notFound }
        guard totp || count > 1 else { return .lastFactor }
        try await db.query("DELETE FROM portal_passkeys WHERE id = \(id) AND account_id = \(accountId)", logger: logger)
        return .removed(name: name)
    }

    /// Deletes every passkey of the account (the `portal-operator` recovery invite resets its
    /// credentials); answers their names. Run it in the transaction that resets the password and TOTP.
    static func removeAll(_ db: PostgresConnection, accountId: UUID, logger: Logger) async throws -> [String] {
        let rows = try await db.query(
            "DELETE FROM portal_passkeys WHERE account_id = \(accountId) RETURNING name", logger: logger)
        var names: [String] = []
        for try await name in rows.decode(String.self) { names.append(name) }
        return names.sorted()
    }

    // MARK: challenges

    /// Stores a challenge. Earlier challenges of the same binding and purpose go (one ceremony at a time
    /// per browser, ticket or session), and so does every expired challenge (no row outlives its
    /// lifetime by more than the time to the next ceremony).
    /// Answers whether a live challenge of the same binding and purpose was replaced (false: one row more).
    @discardableResult
    static func insertChallenge(
        _ db: PostgresConnection, challenge: String, purpose: String, binding: Data, accountId: UUID?, lifetimeSeconds: Int, logger: Logger
    ) async throws -> Bool {
        let deleted = try await db.query(
            """
            DELETE FROM portal_passkey_challenges
            WHERE (binding = \(binding) AND purpose = \(purpose)) OR expires_at <= now()
            RETURNING binding = \(binding) AND purpose = \(purpose) AND expires_at > now()
            """, logger: logger)
        var replaced = false
        for try await same in deleted.decode(Bool.self) where same { replaced = true }
        try await db.query(
            """
            INSERT INTO portal_passkey_challenges (challenge, purpose, binding, account_id, expires_at)
            VALUES (\(challenge), \(purpose), \(binding), \(accountId), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
        return replaced
    }

    /// Takes a live challenge of this purpose and binding (it is gone afterwards, whatever follows).
    /// nil: unknown, expired, used, or issued for something else. `.some(nil)`: a sign-in challenge
    /// (no account named).
    static func takeChallenge(
        _ db: PostgresConnection, challenge: String, purpose: String, binding: Data, logger: Logger
    ) async throws -> UUID?? {
        let rows = try await db.query(
            """
            DELETE FROM portal_passkey_challenges
            WHERE challenge = \(challenge) AND purpose = \(purpose) AND binding = \(binding) AND expires_at > now()
            RETURNING account_id
            """, logger: logger)
        for try await account in rows.decode(UUID?.self) { return .some(account) }
        return nil
    }
}
