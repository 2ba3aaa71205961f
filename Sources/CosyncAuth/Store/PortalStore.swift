import Foundation
import Logging
import PostgresNIO

/// SQL of the Portal's accounts, roles, sessions, invites and tickets (sql/0021_portal.sql). Its
/// lockout counters (`portal_throttle`) are ThrottleStore's; its e-mails are the outbox's; its audit
/// rows are AuditLog's. Every single-use rule (an invite, a ticket, a TOTP step) is one conditional
/// UPDATE … RETURNING, so two concurrent requests can never both use the same thing.
enum PortalStore {
    /// One row of `portal_accounts`, the secrets still sealed or hashed.
    struct AccountRow: Sendable {
        let id: UUID
        let email: String
        let passwordHash: String?
        let totpSealed: Data?
        let totpEnabled: Bool
        let totpLastStep: Int64
        let isOperator: Bool
        let status: String
    }

    static let accountColumns = "id, email, password_hash, totp_secret_sealed, totp_enabled, totp_last_step, is_operator, status"

    static func decodeAccounts(_ rows: PostgresRowSequence) async throws -> [AccountRow] {
        var found: [AccountRow] = []
        for try await (id, email, hash, sealed, enabled, step, isOperator, status) in rows.decode(
            (UUID, String, String?, Data?, Bool, Int64, Bool, String).self)
        {
            found.append(
                AccountRow(
                    id: id, email: email, passwordHash: hash, totpSealed: sealed, totpEnabled: enabled, totpLastStep: step,
                    isOperator: isOperator, status: status))
        }
        return found
    }

    // MARK: accounts

    static func account(_ db: PostgresConnection, email: String, forUpdate: Bool = false, logger: Logger) async throws -> AccountRow? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await db.query(
            "SELECT \(unescaped: accountColumns) FROM portal_accounts WHERE email = \(email)\(unescaped: lock)", logger: logger)
        return try await decodeAccounts(rows).first
    }

    static func account(_ db: PostgresConnection, id: UUID, forUpdate: Bool = false, logger: Logger) async throws -> AccountRow? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await db.query(
            "SELECT \(unescaped: accountColumns) FROM portal_accounts WHERE id = \(id)\(unescaped: lock)", logger: logger)
        return try await decodeAccounts(rows).first
    }

    /// The account of `email`, made when there is none, and locked (for the rest of the transaction).
    static func lockOrCreateAccount(_ db: PostgresConnection, email: String, logger: Logger) async throws -> AccountRow {
        try await db.query("INSERT INTO portal_accounts (email) VALUES (\(email)) ON CONFLICT (email) DO NOTHING", logger: logger)
        guard let row = try await account(db, email: email, forUpdate: true, logger: logger) else { throw StoreError.noRowReturned }
        return row
    }

    /// A new password and a new, not yet confirmed, TOTP secret: the account cannot sign in until the
    /// first code confirms it (`enableTOTP`).
    static func setCredentials(
        _ db: PostgresConnection, id: UUID, passwordHash: String, totpSealed: Data, logger: Logger
    ) async throws {
        try await db.query(
            """
            UPDATE portal_accounts SET password_hash = \(passwordHash), totp_secret_sealed = \(totpSealed), totp_enabled = false,
                totp_last_step = 0, updated_at = now()
            WHERE id = \(id)
            """, logger: logger)
    }

    /// A new pending TOTP secret for an account whose enrolment was never confirmed.
    static func setPendingTOTP(_ db: PostgresConnection, id: UUID, totpSealed: Data, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE portal_accounts SET totp_secret_sealed = \(totpSealed), totp_last_step = 0, updated_at = now()
            WHERE id = \(id) AND NOT totp_enabled
            """, logger: logger)
    }

    static func makeOperator(_ db: PostgresConnection, id: UUID, logger: Logger) async throws {
        try await db.query("UPDATE portal_accounts SET is_operator = true, updated_at = now() WHERE id = \(id)", logger: logger)
    }

    /// Confirms the pending secret with the step of its first code; false when it was already confirmed
    /// (a concurrent confirmation won).
    static func enableTOTP(_ db: PostgresConnection, id: UUID, step: Int64, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE portal_accounts SET totp_enabled = true, totp_last_step = \(step), updated_at = now()
            WHERE id = \(id) AND NOT totp_enabled AND totp_secret_sealed IS NOT NULL
            RETURNING id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Uses a TOTP step: true only for a step later than every step used before (a code works once).
    static func useTOTPStep(_ db: PostgresConnection, id: UUID, step: Int64, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE portal_accounts SET totp_last_step = \(step) WHERE id = \(id) AND totp_enabled AND totp_last_step < \(step)
            RETURNING id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    // MARK: roles

    /// Gives `role` on the app, or changes the role the account has there.
    static func setRole(_ db: PostgresConnection, accountId: UUID, appRef: Int64, role: String, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO portal_roles (account_id, app_ref, role) VALUES (\(accountId), \(appRef), \(role))
            ON CONFLICT (account_id, app_ref) DO UPDATE SET role = EXCLUDED.role
            """, logger: logger)
    }

    static func role(_ db: PostgresConnection, accountId: UUID, appId: String, logger: Logger) async throws -> String? {
        let rows = try await db.query(
            """
            SELECT r.role FROM portal_roles r JOIN apps a ON a.id = r.app_ref WHERE r.account_id = \(accountId) AND a.app_id = \(appId)
            """, logger: logger)
        for try await role in rows.decode(String.self) { return role }
        return nil
    }

    /// The accounts with a role on the app, by e-mail.
    static func members(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> [(id: UUID, email: String, role: String)] {
        let rows = try await db.query(
            """
            SELECT p.id, p.email, r.role FROM portal_roles r JOIN portal_accounts p ON p.id = r.account_id
            WHERE r.app_ref = \(appRef) ORDER BY p.email LIMIT 1000
            """, logger: logger)
        var found: [(id: UUID, email: String, role: String)] = []
        for try await (id, email, role) in rows.decode((UUID, String, String).self) { found.append((id, email, role)) }
        return found
    }

    // MARK: sessions

    struct SessionRow: Sendable {
        let id: UUID
        let accountId: UUID
        let createdAt: Date
        let lastSeenAt: Date
        let provenAt: Date
        let provenBy: String
    }

    static let sessionColumns = "id, account_id, created_at, last_seen_at, proven_at, proven_by"

    static func decodeSession(_ rows: PostgresRowSequence) async throws -> SessionRow? {
        for try await (id, account, created, seen, proven, by) in rows.decode((UUID, UUID, Date, Date, Date, String).self) {
            return SessionRow(id: id, accountId: account, createdAt: created, lastSeenAt: seen, provenAt: proven, provenBy: by)
        }
        return nil
    }

    static func insertSession(
        _ db: PostgresConnection, accountId: UUID, secretHash: Data, provenBy: String, logger: Logger
    ) async throws -> SessionRow {
        let rows = try await db.query(
            """
            INSERT INTO portal_sessions (account_id, secret_hash, proven_by) VALUES (\(accountId), \(secretHash), \(provenBy))
            RETURNING \(unescaped: sessionColumns)
            """, logger: logger)
        guard let row = try await decodeSession(rows) else { throw StoreError.noRowReturned }
        return row
    }

    /// The live session of this cookie hash, marked seen now: one that was idle for `idleSeconds` or
    /// began more than `absoluteSeconds` ago is not live (and is not touched).
    static func touchSession(
        _ db: PostgresConnection, secretHash: Data, idleSeconds: Int, absoluteSeconds: Int, logger: Logger
    ) async throws -> SessionRow? {
        let rows = try await db.query(
            """
            UPDATE portal_sessions SET last_seen_at = now()
            WHERE secret_hash = \(secretHash)
              AND last_seen_at > now() - make_interval(secs => \(idleSeconds)::int)
              AND created_at > now() - make_interval(secs => \(absoluteSeconds)::int)
            RETURNING \(unescaped: sessionColumns)
            """, logger: logger)
        return try await decodeSession(rows)
    }

    /// A fresh proof of the session's account (a fresh sign-in before a destructive action).
    static func proveSession(_ db: PostgresConnection, id: UUID, provenBy: String, logger: Logger) async throws -> SessionRow? {
        let rows = try await db.query(
            """
            UPDATE portal_sessions SET proven_at = now(), proven_by = \(provenBy), last_seen_at = now() WHERE id = \(id)
            RETURNING \(unescaped: sessionColumns)
            """, logger: logger)
        return try await decodeSession(rows)
    }

    /// Ends the session of this cookie hash; the id of the account it was, or nil.
    static func deleteSession(_ db: PostgresConnection, secretHash: Data, logger: Logger) async throws -> UUID? {
        let rows = try await db.query(
            "DELETE FROM portal_sessions WHERE secret_hash = \(secretHash) RETURNING account_id", logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    static func deleteSessions(_ db: PostgresConnection, accountId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM portal_sessions WHERE account_id = \(accountId)", logger: logger)
    }

    // MARK: invites

    struct InviteRow: Sendable {
        let id: UUID
        let email: String
        let isOperator: Bool
        let appRef: Int64?
        let role: String?
        let resets: Bool
        let invitedBy: UUID?
    }

    static func insertInvite(
        _ db: PostgresConnection, codeHash: Data, email: String, isOperator: Bool, appRef: Int64?, role: String?, resets: Bool,
        invitedBy: UUID?, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO portal_invites (code_hash, email, is_operator, app_ref, role, resets, invited_by, expires_at)
            VALUES (\(codeHash), \(email), \(isOperator), \(appRef), \(role), \(resets), \(invitedBy),
                    now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// The invite of this code hash while it is unused and unexpired (nothing changes).
    static func openInvite(_ db: PostgresConnection, codeHash: Data, logger: Logger) async throws -> InviteRow? {
        let rows = try await db.query(
            """
            SELECT id, email, is_operator, app_ref, role, resets, invited_by FROM portal_invites
            WHERE code_hash = \(codeHash) AND used_at IS NULL AND expires_at > now()
            """, logger: logger)
        return try await decodeInvite(rows)
    }

    /// Uses the invite: one statement, so of any number of concurrent uses exactly one gets the row.
    static func useInvite(_ db: PostgresConnection, codeHash: Data, logger: Logger) async throws -> InviteRow? {
        let rows = try await db.query(
            """
            UPDATE portal_invites SET used_at = now()
            WHERE code_hash = \(codeHash) AND used_at IS NULL AND expires_at > now()
            RETURNING id, email, is_operator, app_ref, role, resets, invited_by
            """, logger: logger)
        return try await decodeInvite(rows)
    }

    static func decodeInvite(_ rows: PostgresRowSequence) async throws -> InviteRow? {
        for try await (id, email, isOperator, appRef, role, resets, invitedBy) in rows.decode(
            (UUID, String, Bool, Int64?, String?, Bool, UUID?).self)
        {
            return InviteRow(id: id, email: email, isOperator: isOperator, appRef: appRef, role: role, resets: resets, invitedBy: invitedBy)
        }
        return nil
    }

    /// Retires the unused recovery invites of `email` (the portal-operator command re-issues one).
    static func retireResetInvites(_ db: PostgresConnection, email: String, logger: Logger) async throws {
        try await db.query(
            "UPDATE portal_invites SET used_at = now() WHERE email = \(email) AND resets AND used_at IS NULL", logger: logger)
    }

    // MARK: tickets

    static func insertTicket(
        _ db: PostgresConnection, secretHash: Data, kind: String, accountId: UUID, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO portal_tickets (secret_hash, kind, account_id, expires_at)
            VALUES (\(secretHash), \(kind), \(accountId), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// Counts one code attempt on a live ticket before the code is checked; the account it is for, or
    /// nil when the ticket is unknown, used, expired or out of attempts.
    static func attemptTicket(
        _ db: PostgresConnection, secretHash: Data, kind: String, maxAttempts: Int, logger: Logger
    ) async throws -> UUID? {
        let rows = try await db.query(
            """
            UPDATE portal_tickets SET attempts = attempts + 1
            WHERE secret_hash = \(secretHash) AND kind = \(kind) AND used_at IS NULL AND expires_at > now() AND attempts < \(maxAttempts)
            RETURNING account_id
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// The account of a live ticket (nothing changes).
    static func ticketAccount(_ db: PostgresConnection, secretHash: Data, kind: String, logger: Logger) async throws -> UUID? {
        let rows = try await db.query(
            """
            SELECT account_id FROM portal_tickets
            WHERE secret_hash = \(secretHash) AND kind = \(kind) AND used_at IS NULL AND expires_at > now()
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// Uses the ticket up; false when it was already used or has expired.
    static func useTicket(_ db: PostgresConnection, secretHash: Data, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE portal_tickets SET used_at = now() WHERE secret_hash = \(secretHash) AND used_at IS NULL AND expires_at > now()
            RETURNING 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    // MARK: housekeeping

    /// Removes sessions past their absolute lifetime or idle for a day, tickets and invites expired for
    /// a day (an invite's row stays that long after its expiry, so "expired" can still be told apart).
    static func purgeExpired(_ db: PostgresConnection, absoluteSeconds: Int, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH sessions AS (
                DELETE FROM portal_sessions
                WHERE created_at < now() - make_interval(secs => \(absoluteSeconds)::int) OR last_seen_at < now() - interval '1 day'
                RETURNING 1),
            tickets AS (DELETE FROM portal_tickets WHERE expires_at < now() - interval '1 day' RETURNING 1),
            invites AS (DELETE FROM portal_invites WHERE expires_at < now() - interval '1 day' RETURNING 1)
            SELECT (SELECT count(*) FROM sessions)::int + (SELECT count(*) FROM tickets)::int + (SELECT count(*) FROM invites)::int
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
