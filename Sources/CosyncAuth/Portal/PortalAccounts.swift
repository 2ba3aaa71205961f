import Crypto
import Foundation
import Logging
import PostgresNIO

/// The Portal's accounts (operators and developers, separate from the apps' end users): invites,
/// passwords, TOTP, browser sessions and roles per app (issue 23).
///
/// - **Invites** carry a one-time code (only its SHA-256 stored), valid 7 days, used by one statement
///   (`PortalStore.useInvite`), so a code is accepted once however many requests race for it.
/// - **Passwords** (12 characters at least) are bcrypt through the server's `PasswordHasher`, over the
///   hex SHA-256 of the password (so that bcrypt's 72-byte limit never cuts a long password).
/// - **Sign-in** is a password, then a TOTP code. Each password check is reserved first in PostgreSQL
///   (`portal_throttle`), per (e-mail, address), per e-mail and per address, exactly as the end-user
///   login is (`LoginThrottle`); each code check is reserved per account and per ticket. Nothing is
///   checked while a subject is locked.
/// - **Sessions**: the cookie is 256 random bits; only its SHA-256 is stored. A session ends after 30
///   minutes without a request and 12 hours after it began.
/// - Every action is written to the audit log with the actor `portal:<email>` (no app for account
///   actions; the app's row for an invite to an app).
public final class PortalAccounts: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let hasher: PasswordHasher
    let apps: AppAdministration
    let outbox: Outbox
    let limits: PasswordLimits
    let logger: Logger
    /// The server's public base URL, for invite links.
    public let publicURL: String

    public static let idleSeconds = 30 * 60
    public static let absoluteSeconds = 12 * 3600
    public static let inviteSeconds = 7 * 86_400
    public static let signInTicketSeconds = 5 * 60
    public static let enrolTicketSeconds = 30 * 60
    /// How recent a proof must be for a destructive action.
    public static let freshSeconds = 5 * 60
    /// Failures of one e-mail from one address before it locks (the others are multiples of it, as for
    /// an app's users).
    public static let maxLoginAttempts = 5
    /// Code attempts on one ticket, and wrong codes of one account before it locks.
    public static let maxCodeAttempts = 5
    public static let minPasswordLength = 12
    static let maxPasswordBytes = 1024
    static let maxEmailBytes = 254
    /// Invite codes, tickets and cookies are 43 base64url characters; anything much longer is refused
    /// before it is hashed.
    static let maxSecretBytes = 128
    static let provenBy = "password+totp"

    public init(
        client: PostgresClient, box: SecretBox, hasher: PasswordHasher, apps: AppAdministration, outbox: Outbox, logger: Logger,
        limits: PasswordLimits = PasswordLimits()
    ) {
        self.client = client
        self.box = box
        self.hasher = hasher
        self.apps = apps
        self.outbox = outbox
        self.limits = limits
        self.logger = logger
        self.publicURL = outbox.publicURL
    }

    // MARK: input

    /// A trimmed, lower-cased e-mail address of a plausible shape, or `badInput`.
    static func normalizedEmail(_ text: String) throws(PortalError) -> String {
        let email = text.trimmingCharacters(in: .whitespaces).lowercased()
        let bytes = Array(email.utf8)
        guard (3...maxEmailBytes).contains(bytes.count), let at = bytes.firstIndex(of: UInt8(ascii: "@")),
            at > 0, at < bytes.count - 1, bytes.lastIndex(of: UInt8(ascii: "@")) == at,
            bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7f && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") && $0 != UInt8(ascii: "\"") })
        else { throw .badInput("Enter a valid e-mail address.") }
        return email
    }

    /// The password rule: at least 12 characters, at most 1024 bytes, not the e-mail address.
    static func checkPasswordRule(_ password: String, email: String) throws(PortalError) {
        guard password.count >= minPasswordLength else {
            throw .weakPassword("The password must have at least \(minPasswordLength) characters.")
        }
        guard password.utf8.count <= maxPasswordBytes else { throw .weakPassword("The password is too long.") }
        guard password.lowercased() != email, !password.allSatisfy({ $0 == password.first }) else {
            throw .weakPassword("Choose a password that is harder to guess.")
        }
    }

    /// What bcrypt hashes: the hex SHA-256 of the password (64 characters, under bcrypt's 72-byte limit).
    static func preHash(_ password: String) -> String {
        Hex.encode(SHA256.hash(data: Data("cosync-portal-password:\(password)".utf8)))
    }

    /// SHA-256 of a bearer secret (invite code, ticket, cookie); nil for a value no server issued.
    static func secretHash(_ text: String) -> Data? {
        guard (16...maxSecretBytes).contains(text.utf8.count) else { return nil }
        return Secrets.sha256(text)
    }

    static func newSecret() -> String { Base64URL.encode(Secrets.randomBytes(32)) }

    static func isCode(_ code: String) -> Bool {
        code.utf8.count == TOTP.digits && code.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    static func account(_ row: PortalStore.AccountRow) -> PortalAccount {
        PortalAccount(id: row.id, email: row.email, isOperator: row.isOperator, totpEnabled: row.totpEnabled, status: row.status)
    }

    static func session(_ row: PortalStore.SessionRow, account: PortalAccount) -> PortalSession {
        PortalSession(
            id: row.id, account: account, createdAt: row.createdAt, lastSeenAt: row.lastSeenAt, provenAt: row.provenAt,
            provenBy: row.provenBy)
    }

    /// `{publicURL}/portal/invite/{code}`.
    public func inviteLink(code: String) -> String { "\(publicURL)/portal/invite/\(code)" }

    // MARK: audit

    func audit(
        _ db: PostgresConnection, actor: String, action: String, status: String = "success", app: (ref: Int64, appId: String)? = nil,
        detail: [String: JSONValue] = [:]
    ) async throws {
        try await AuditLog.record(
            db, appRef: app?.ref, appId: app?.appId ?? "", actor: actor, action: action, status: status, detail: detail, logger: logger)
    }

    /// An audit row of its own (a refusal, whose work rolled back); a failure to write it is logged.
    func auditAlone(actor: String, action: String, status: String = "error", detail: [String: JSONValue] = [:]) async {
        do {
            try await client.withConnection { db in try await audit(db, actor: actor, action: action, status: status, detail: detail) }
        } catch {
            logger.warning("could not write a Portal audit row", metadata: ["action": "\(action)", "error": "\(type(of: error))"])
        }
    }

    // MARK: invites

    /// Makes (or makes again) the first operator's invite, for the `portal-operator` command. It also
    /// recovers an operator who lost the password or the authenticator: accepting it sets a new
    /// password and a new TOTP secret, and ends the account's sessions. An earlier unused invite of this
    /// kind for the address stops working. Returns the one-time code (the link is `inviteLink(code:)`).
    public func bootstrapOperator(email: String) async throws -> String {
        let email = try Self.normalizedEmail(email)
        let code = Self.newSecret()
        try await client.transaction(logger: logger) { db in
            try await PortalStore.retireResetInvites(db, email: email, logger: logger)
            try await PortalStore.insertInvite(
                db, codeHash: Secrets.sha256(code), email: email, isOperator: true, appRef: nil, role: nil, resets: true, invitedBy: nil,
                lifetimeSeconds: Self.inviteSeconds, logger: logger)
            try await audit(db, actor: "cli", action: "portal.operator.invite", detail: ["email": .string(email)])
        }
        return code
    }

    /// Invites `email`: as an operator (only an operator may), or to `role` on `appId` (an operator, or
    /// an owner of that app). The e-mail with the link goes through the outbox in the same transaction;
    /// the code is returned too (the Portal shows the link, for an operator without e-mail delivery).
    public func invite(email: String, isOperator: Bool, appId: String?, role: PortalRole?, by session: PortalSession) async throws -> String {
        let email = try Self.normalizedEmail(email)
        let inviter = session.account
        var target: (ref: Int64, appId: String)?
        if isOperator {
            guard appId == nil, role == nil else { throw PortalError.badInput("An operator invite names no app and no role.") }
            guard inviter.isOperator else { throw PortalError.forbidden }
        } else {
            guard let appId, role != nil else { throw PortalError.badInput("Choose an app and a role.") }
            try await authorize(session, appId: appId, needs: .owner)
            guard let app = try await apps.currentApp(appId: appId) else { throw PortalError.notFound }
            target = (app.ref, app.appId)
        }
        let code = Self.newSecret()
        let link = inviteLink(code: code)
        let what = isOperator ? "an operator of the Cosync Portal" : "a member (\(role?.rawValue ?? "")) of an app in the Cosync Portal"
        let text = """
            \(inviter.email) invited you to be \(what).

            Open this link within 7 days to set your password: \(link)

            If you did not expect this, ignore this e-mail.
            """
        let html = """
            <p>\(Outbox.escapeHTML(inviter.email)) invited you to be \(Outbox.escapeHTML(what)).</p>
            <p><a href="\(Outbox.escapeHTML(link))">Set your password</a> (the link works for 7 days).</p>
            <p>If you did not expect this, ignore this e-mail.</p>
            """
        let target_ = target
        try await client.transaction(logger: logger) { db in
            try await PortalStore.insertInvite(
                db, codeHash: Secrets.sha256(code), email: email, isOperator: isOperator, appRef: target_?.ref, role: role?.rawValue,
                resets: false, invitedBy: inviter.id, lifetimeSeconds: Self.inviteSeconds, logger: logger)
            try await outbox.portalEmail(
                db, template: Outbox.portalInviteTemplate, to: email, subject: "Your invitation to the Cosync Portal", text: text, html: html,
                logger: logger)
            var detail: [String: JSONValue] = ["email": .string(email), "operator": .bool(isOperator)]
            if let role { detail["role"] = .string(role.rawValue) }
            try await audit(db, actor: session.auditActor, action: "portal.invite", app: target_, detail: detail)
        }
        return code
    }

    /// Who an invite code is for, while it is unused and unexpired; nil otherwise.
    public func inviteEmail(code: String) async throws -> String? {
        guard let hash = Self.secretHash(code) else { return nil }
        return try await client.withConnection { db in try await PortalStore.openInvite(db, codeHash: hash, logger: logger)?.email }
    }

    /// Accepts an invite with `password`.
    ///
    /// - The password rule is checked first, whatever the account: a password that breaks it gets the
    ///   same answer (`weakPassword`) for a new and an existing account, so the answer does not tell
    ///   whether the address has an account.
    /// - A new account (no password yet), or any account for the `portal-operator` recovery invite: the
    ///   password is set, the role or operator flag given, and a new TOTP secret returned to enrol
    ///   (`confirmTOTP`); the account cannot sign in before that.
    /// - An account with a password, enrolled or not: `password` must be its current password (checked
    ///   under the sign-in limits; it is not changed), the role is added, and nil is returned: sign in as
    ///   usual (an account that never finished its enrolment is led to it by the sign-in). Whoever holds
    ///   an invite code (an app's owner who invited the address, say) cannot replace the credentials of
    ///   an account, even a half-set-up one, and so cannot take over its roles or operator flag; only the
    ///   recovery invite of the `portal-operator` command (run on the server) resets them: password, TOTP,
    ///   sessions and passkeys (the account enrols again).
    public func acceptInvite(code: String, password: String, address: String? = nil) async throws -> PortalEnrolment? {
        guard let hash = Self.secretHash(code) else { throw PortalError.inviteInvalid }
        let (invite, existing) = try await client.withConnection { db -> (PortalStore.InviteRow?, PortalStore.AccountRow?) in
            guard let invite = try await PortalStore.openInvite(db, codeHash: hash, logger: logger) else { return (nil, nil) }
            return (invite, try await PortalStore.account(db, email: invite.email, logger: logger))
        }
        guard let invite else { throw PortalError.inviteInvalid }
        let actor = "portal:\(invite.email)"
        try Self.checkPasswordRule(password, email: invite.email)
        if let existing, existing.passwordHash != nil, !invite.resets {
            guard try await checkPassword(password, of: existing, address: address, action: "portal.invite.accept") else {
                throw PortalError.invalidCredentials
            }
            try await client.transaction(logger: logger) { db in
                guard let used = try await PortalStore.useInvite(db, codeHash: hash, logger: logger) else { throw PortalError.inviteInvalid }
                try await grant(db, used, to: existing.id)
                try await audit(db, actor: actor, action: "portal.invite.accept", app: try await appOf(db, used), detail: grantDetail(used))
            }
            return nil
        }
        // Hashed before the transaction (bcrypt takes a while); only a live invite gets this far.
        let passwordHash = try await hasher.hash(md5Hex: Self.preHash(password), tenant: "portal")
        let secret = TOTP.newSecret()
        let ticket = Self.newSecret()
        let account = try await client.transaction(logger: logger) { db -> PortalStore.AccountRow in
            guard let used = try await PortalStore.useInvite(db, codeHash: hash, logger: logger) else { throw PortalError.inviteInvalid }
            let row = try await PortalStore.lockOrCreateAccount(db, email: used.email, logger: logger)
            if row.passwordHash != nil, !used.resets {
                // It got a password since the check above (a concurrent accept): this code is for adding
                // the role with that password, never for replacing it.
                throw PortalError.conflict("This account already exists: open the link again and enter its password.")
            }
            let sealed = try box.seal(Data(secret), purpose: .portalTOTP(accountId: row.id))
            try await PortalStore.setCredentials(db, id: row.id, passwordHash: passwordHash, totpSealed: sealed, logger: logger)
            if used.resets {
                try await PortalStore.deleteSessions(db, accountId: row.id, logger: logger)
                // The recovery replaces every way to sign in: a passkey left by whoever held the account
                // would still sign in as it (an operator).
                let removed = try await PortalPasskeyStore.removeAll(db, accountId: row.id, logger: logger)
                if !removed.isEmpty {
                    try await audit(
                        db, actor: actor, action: "portal.passkey.remove",
                        detail: ["reason": .string("recovery invite"), "names": .array(removed.map(JSONValue.string))])
                }
            }
            try await grant(db, used, to: row.id)
            try await PortalStore.insertTicket(
                db, secretHash: Secrets.sha256(ticket), kind: "enrol", accountId: row.id, lifetimeSeconds: Self.enrolTicketSeconds,
                logger: logger)
            try await audit(db, actor: actor, action: "portal.invite.accept", app: try await appOf(db, used), detail: grantDetail(used))
            guard let updated = try await PortalStore.account(db, id: row.id, logger: logger) else { throw StoreError.noRowReturned }
            return updated
        }
        return PortalEnrolment(account: Self.account(account), totpSecret: secret, ticket: ticket)
    }

    func grant(_ db: PostgresConnection, _ invite: PortalStore.InviteRow, to accountId: UUID) async throws {
        if invite.isOperator { try await PortalStore.makeOperator(db, id: accountId, logger: logger) }
        if let appRef = invite.appRef, let role = invite.role {
            try await PortalStore.setRole(db, accountId: accountId, appRef: appRef, role: role, logger: logger)
        }
    }

    func appOf(_ db: PostgresConnection, _ invite: PortalStore.InviteRow) async throws -> (ref: Int64, appId: String)? {
        guard let ref = invite.appRef, let app = try await AppStore.app(db, ref: ref, logger: logger) else { return nil }
        return (app.ref, app.appId)
    }

    func grantDetail(_ invite: PortalStore.InviteRow) -> [String: JSONValue] {
        var detail: [String: JSONValue] = ["operator": .bool(invite.isOperator)]
        if let role = invite.role { detail["role"] = .string(role) }
        return detail
    }

    // MARK: enrolment

    /// The enrolment an `enrol` ticket carries on (to show the key again), while the ticket is live and
    /// the enrolment unconfirmed.
    public func enrolment(ticket: String) async throws -> PortalEnrolment? {
        guard let hash = Self.secretHash(ticket) else { return nil }
        let row = try await client.withConnection { db -> PortalStore.AccountRow? in
            guard let id = try await PortalStore.ticketAccount(db, secretHash: hash, kind: "enrol", logger: logger) else { return nil }
            return try await PortalStore.account(db, id: id, logger: logger)
        }
        guard let row, !row.totpEnabled, let sealed = row.totpSealed else { return nil }
        let secret = try box.open(sealed, purpose: .portalTOTP(accountId: row.id))
        return PortalEnrolment(account: Self.account(row), totpSecret: Array(secret), ticket: ticket)
    }

    /// Confirms a TOTP enrolment with its first code, and signs the account in.
    public func confirmTOTP(ticket: String, code: String, address: String? = nil) async throws -> PortalSignIn {
        try await codeStep(ticket: ticket, kind: "enrol", code: code, address: address)
    }

    // MARK: sign-in

    /// Sign-in step 1: the password, reserved in PostgreSQL per (e-mail, address), per e-mail and per
    /// address before bcrypt runs. Right: the ticket for the code (5 minutes), or the enrolment of an
    /// account that never confirmed one. Wrong, unknown or suspended: `invalidCredentials` (the same
    /// answer, after the same bcrypt work).
    public func signIn(email: String, password: String, address: String? = nil) async throws -> PortalSignInStep {
        guard let email = try? Self.normalizedEmail(email), !password.isEmpty, password.utf8.count <= Self.maxPasswordBytes else {
            throw PortalError.invalidCredentials
        }
        try hasher.scheduler.precheck(tenant: "portal")
        let row = try await client.withConnection { db in try await PortalStore.account(db, email: email, logger: logger) }
        let throttle = passwordThrottle(email: email, address: address)
        guard try await checkPassword(password, of: row, throttle: throttle, address: address, action: "portal.sign-in") else {
            throw PortalError.invalidCredentials
        }
        guard let row, row.status == "active" else { throw PortalError.invalidCredentials }
        if !row.totpEnabled, try await client.withConnection({ db in try await PortalPasskeyStore.hasPasskey(db, accountId: row.id, logger: logger) }) {
            // Enrolled with a passkey and no TOTP: the password alone never starts a new enrolment.
            throw PortalError.badInput("This account signs in with its passkey: choose “Sign in with a passkey”.")
        }
        if !row.totpEnabled {
            // The password was set from an invite, but the enrolment never finished: a new secret.
            let secret = TOTP.newSecret()
            let ticket = Self.newSecret()
            try await client.transaction(logger: logger) { db in
                let sealed = try box.seal(Data(secret), purpose: .portalTOTP(accountId: row.id))
                try await PortalStore.setPendingTOTP(db, id: row.id, totpSealed: sealed, logger: logger)
                try await PortalStore.insertTicket(
                    db, secretHash: Secrets.sha256(ticket), kind: "enrol", accountId: row.id, lifetimeSeconds: Self.enrolTicketSeconds,
                    logger: logger)
            }
            return .enrol(PortalEnrolment(account: Self.account(row), totpSecret: secret, ticket: ticket))
        }
        let ticket = Self.newSecret()
        try await client.withConnection { db in
            try await PortalStore.insertTicket(
                db, secretHash: Secrets.sha256(ticket), kind: "sign-in", accountId: row.id, lifetimeSeconds: Self.signInTicketSeconds,
                logger: logger)
        }
        return .code(ticket: ticket)
    }

    /// Sign-in step 2: the TOTP code for a step-1 ticket. A wrong code keeps the ticket (a few attempts);
    /// the right one uses it up and makes the session. A ticket that is gone: `invalidCredentials`.
    public func signInCode(ticket: String, code: String, address: String? = nil) async throws -> PortalSignIn {
        try await codeStep(ticket: ticket, kind: "sign-in", code: code, address: address)
    }

    func passwordThrottle(email: String, address: String?) -> LoginThrottle {
        LoginThrottle(
            client: client, limits: limits, logger: logger, scope: .portal, maxAttempts: Self.maxLoginAttempts, handle: email,
            address: address)
    }

    /// The password check of one attempt, reserved first. An unknown account (or one without a
    /// password) costs the same bcrypt work and is wrong. Throws `locked` while a subject is locked.
    func checkPassword(
        _ password: String, of row: PortalStore.AccountRow?, throttle: LoginThrottle? = nil, address: String?, action: String
    ) async throws -> Bool {
        let email = row?.email ?? throttle?.handle ?? ""
        let throttle = throttle ?? passwordThrottle(email: email, address: address)
        let actor = "portal:\(email)"
        guard try await throttle.reserve() else {
            let seconds = try await client.withConnection { db in
                try await ThrottleStore.lockedSeconds(db, scope: .portal, subjects: throttle.subjects.map(\.0), logger: logger)
            }
            await auditAlone(actor: actor, action: action, detail: ["reason": .string("locked")])
            throw PortalError.locked(retryAfterSeconds: max(1, seconds))
        }
        let given = Self.preHash(password)
        let right = try await throttle.check {
            guard let stored = row?.passwordHash else {
                _ = try await hasher.hash(md5Hex: given, tenant: "portal")
                return false
            }
            return try await hasher.verify(md5Hex: given, hash: stored, tenant: "portal")
        }
        if !right { await auditAlone(actor: actor, action: action, detail: ["reason": .string("wrong password")]) }
        return right
    }

    /// Reserves one code check for `accountId` (per account, in `portal_throttle`); `locked` while locked.
    func reserveCode(accountId: UUID, db: PostgresConnection) async throws {
        let subject = "totp:\(accountId.uuidString.lowercased())"
        guard try await ThrottleStore.reserve(
            db, scope: .portal, subject: subject, threshold: Self.maxCodeAttempts, windowSeconds: limits.throttleWindow,
            maxLockSeconds: limits.maxLockout, logger: logger)
        else {
            let seconds = try await ThrottleStore.lockedSeconds(db, scope: .portal, subjects: [subject], logger: logger)
            throw PortalError.locked(retryAfterSeconds: max(1, seconds))
        }
    }

    func clearCode(accountId: UUID, db: PostgresConnection) async throws {
        try await ThrottleStore.clear(db, scope: .portal, subject: "totp:\(accountId.uuidString.lowercased())", logger: logger)
    }

    /// Checks a TOTP code against the account's secret (enabled, or pending for an enrolment): the
    /// matching step, or nil. Constant time over the candidate steps (`TOTP.matchingStep`).
    func matchingStep(_ row: PortalStore.AccountRow, code: String) throws -> Int64? {
        guard let sealed = row.totpSealed else { return nil }
        let secret = try box.open(sealed, purpose: .portalTOTP(accountId: row.id))
        guard let step = TOTP.matchingStep(secret: Array(secret), code: code, at: Date()), step > row.totpLastStep else { return nil }
        return step
    }

    /// The code step of a sign-in or an enrolment: the ticket's attempt and the account's code check are
    /// counted first (committed), then the code is checked; the right code uses the ticket and the step
    /// up and makes the session in one transaction.
    func codeStep(ticket: String, kind: String, code: String, address: String?) async throws -> PortalSignIn {
        guard let hash = Self.secretHash(ticket) else { throw PortalError.invalidCredentials }
        guard Self.isCode(code) else { throw PortalError.invalidCode }
        let row = try await client.transaction(logger: logger) { db -> PortalStore.AccountRow in
            guard let id = try await PortalStore.attemptTicket(db, secretHash: hash, kind: kind, maxAttempts: Self.maxCodeAttempts, logger: logger),
                let row = try await PortalStore.account(db, id: id, logger: logger)
            else { throw PortalError.invalidCredentials }
            try await reserveCode(accountId: row.id, db: db)
            return row
        }
        let enrolling = kind == "enrol"
        let actor = "portal:\(row.email)"
        let action = enrolling ? "portal.enrol" : "portal.sign-in"
        guard row.status == "active", row.totpEnabled != enrolling else { throw PortalError.invalidCredentials }
        guard let step = try matchingStep(row, code: code) else {
            await auditAlone(actor: actor, action: action, detail: ["reason": .string("wrong code")])
            throw PortalError.invalidCode
        }
        let cookie = Self.newSecret()
        let session = try await client.transaction(logger: logger) { db -> PortalStore.SessionRow in
            guard try await PortalStore.useTicket(db, secretHash: hash, logger: logger) else { throw PortalError.invalidCredentials }
            let stepUsed = enrolling
                ? try await PortalStore.enableTOTP(db, id: row.id, step: step, logger: logger)
                : try await PortalStore.useTOTPStep(db, id: row.id, step: step, logger: logger)
            guard stepUsed else { throw PortalError.invalidCode }
            try await clearCode(accountId: row.id, db: db)
            let session = try await PortalStore.insertSession(
                db, accountId: row.id, secretHash: Secrets.sha256(cookie), provenBy: Self.provenBy, logger: logger)
            try await audit(db, actor: actor, action: action)
            return session
        }
        let account = PortalAccount(id: row.id, email: row.email, isOperator: row.isOperator, totpEnabled: true, status: row.status)
        return PortalSignIn(session: Self.session(session, account: account), cookie: cookie)
    }

    // MARK: sessions

    /// The live session of a cookie value, marked seen now; nil when unknown, idle for 30 minutes,
    /// older than 12 hours, or when its account is suspended or not enrolled.
    public func session(cookie: String) async throws -> PortalSession? {
        guard let hash = Self.secretHash(cookie) else { return nil }
        return try await client.withConnection { db -> PortalSession? in
            guard let row = try await PortalStore.touchSession(
                db, secretHash: hash, idleSeconds: Self.idleSeconds, absoluteSeconds: Self.absoluteSeconds, logger: logger),
                let account = try await PortalStore.account(db, id: row.accountId, logger: logger),
                account.status == "active"
            else { return nil }
            // Enrolled: a confirmed TOTP, or a passkey (PortalPasskeys).
            if !account.totpEnabled, !(try await PortalPasskeyStore.hasPasskey(db, accountId: account.id, logger: logger)) { return nil }
            return Self.session(row, account: Self.account(account))
        }
    }

    /// Ends the session of a cookie value (nothing when there is none).
    public func signOut(cookie: String) async throws {
        guard let hash = Self.secretHash(cookie) else { return }
        try await client.transaction(logger: logger) { db in
            guard let accountId = try await PortalStore.deleteSession(db, secretHash: hash, logger: logger),
                let account = try await PortalStore.account(db, id: accountId, logger: logger)
            else { return }
            try await audit(db, actor: "portal:\(account.email)", action: "portal.sign-out")
        }
    }

    /// A fresh sign-in inside a live session (before a destructive action): the password and a TOTP
    /// code again, under the same limits as a sign-in. Returns the session with its new `provenAt`.
    public func reauthenticate(cookie: String, password: String, code: String, address: String? = nil) async throws -> PortalSession {
        guard let current = try await session(cookie: cookie) else { throw PortalError.invalidCredentials }
        guard !password.isEmpty, password.utf8.count <= Self.maxPasswordBytes else { throw PortalError.invalidCredentials }
        guard Self.isCode(code) else { throw PortalError.invalidCode }
        let row = try await client.withConnection { db in try await PortalStore.account(db, id: current.account.id, logger: logger) }
        guard let row else { throw PortalError.invalidCredentials }
        let throttle = passwordThrottle(email: row.email, address: address)
        guard try await checkPassword(password, of: row, throttle: throttle, address: address, action: "portal.reauth") else {
            throw PortalError.invalidCredentials
        }
        try await client.transaction(logger: logger) { db in try await reserveCode(accountId: row.id, db: db) }
        guard let step = try matchingStep(row, code: code) else {
            await auditAlone(actor: current.auditActor, action: "portal.reauth", detail: ["reason": .string("wrong code")])
            throw PortalError.invalidCode
        }
        let proven = try await client.transaction(logger: logger) { db -> PortalStore.SessionRow in
            guard try await PortalStore.useTOTPStep(db, id: row.id, step: step, logger: logger) else { throw PortalError.invalidCode }
            try await clearCode(accountId: row.id, db: db)
            guard let proven = try await PortalStore.proveSession(db, id: current.id, provenBy: Self.provenBy, logger: logger) else {
                throw PortalError.invalidCredentials
            }
            try await audit(db, actor: current.auditActor, action: "portal.reauth")
            return proven
        }
        return Self.session(proven, account: current.account)
    }

    // MARK: roles

    /// The session's role on the app: `.owner` for an operator, the account's role otherwise, nil for
    /// none (the Portal then answers 404, not 403: it does not confirm the app exists).
    public func role(of session: PortalSession, appId: String) async throws -> PortalRole? {
        if session.account.isOperator { return .owner }
        guard appId.utf8.count <= 64 else { return nil }
        let stored = try await client.withConnection { db in
            try await PortalStore.role(db, accountId: session.account.id, appId: appId, logger: logger)
        }
        return stored.flatMap(PortalRole.init(rawValue:))
    }

    /// The session's role on the app when it is at least `needed`: `notFound` without a role,
    /// `forbidden` with a lower one.
    @discardableResult
    public func authorize(_ session: PortalSession, appId: String, needs needed: PortalRole) async throws -> PortalRole {
        guard let role = try await role(of: session, appId: appId) else { throw PortalError.notFound }
        guard role >= needed else { throw PortalError.forbidden }
        return role
    }

    /// The apps the session may see, newest first, keyset-paginated as the admin list is: every app
    /// for an operator, the apps with a role for a developer. `limit` is clamped to 1…200.
    public func visibleApps(of session: PortalSession, query: String?, limit: Int, cursor: String?) async throws -> AppAdministration.Page {
        let limit = min(max(limit, 1), 200)
        let query = query.map { String($0.prefix(100)) }
        if session.account.isOperator { return try await apps.list(query: query, limit: limit, cursor: cursor) }
        let before = try Cursor.intOrNil(cursor)
        let rows = try await client.withConnection { db in
            try await AppStore.listApps(
                db, namePrefix: query, before: before, limit: limit + 1, portalAccount: session.account.id, logger: logger)
        }
        let page = rows.prefix(limit)
        let views = try page.map { row in
            AppView(
                appId: row.appId, state: try apps.state(of: row), appToken: nil, rawPublicKey: nil, createdAt: row.createdAt,
                updatedAt: row.updatedAt, product: row.product)
        }
        return AppAdministration.Page(apps: views, nextCursor: rows.count > limit ? page.last.map { Cursor.encode($0.ref) } : nil)
    }

    /// The app's Portal members by e-mail (at most 1000); `notFound` for an unknown app.
    public func members(appId: String) async throws -> [PortalMember] {
        guard appId.utf8.count <= 64 else { throw PortalError.notFound }
        return try await client.withConnection { db in
            guard let app = try await AppStore.app(db, appId: appId, logger: logger) else { throw PortalError.notFound }
            return try await PortalStore.members(db, appRef: app.ref, logger: logger).compactMap { member in
                PortalRole(rawValue: member.role).map { PortalMember(accountId: member.id, email: member.email, role: $0) }
            }
        }
    }

    // MARK: housekeeping

    /// Removes expired sessions, tickets and invites; how many rows went.
    @discardableResult
    public func purgeExpired() async throws -> Int {
        try await client.withConnection { db in
            try await PortalStore.purgeExpired(db, absoluteSeconds: Self.absoluteSeconds, logger: logger)
        }
    }
}
