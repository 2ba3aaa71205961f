import Foundation
import Logging
import PostgresNIO

/// Settings of the end-user flows that are not per app.
public struct FlowSettings: Sendable {
    public var signupCodeLifetime: Int = 24 * 3600
    public var inviteCodeLifetime: Int = 24 * 3600
    public var resetCodeLifetime: Int = 3600
    /// Life of a login-token and of its SMS code (<doc:EndUserAPI> §7.4).
    public var loginCodeLifetime: Int = 600
    /// Life of a phone-verification code.
    public var phoneCodeLifetime: Int = 30 * 60
    /// True with the twilio SMS transport: an app without Twilio credentials cannot send SMS, so
    /// the requests that would send one fail up front (E500) and change nothing.
    public var smsNeedsProviderCredentials = false
    public var maxCodeAttempts: Int = 5
    /// Failed-login counters reset after this long without a failure.
    public var throttleWindow: Int = 15 * 60
    /// The longest a lockout lasts.
    public var maxLockout: Int = 15 * 60
    /// Wrong second-factor codes of a user are counted over this window (across login-tokens);
    /// from 2 × maxCodeAttempts on, loginComplete is locked like a login (30 s doubling, ≤ maxLockout).
    public var secondFactorWindow: Int = 24 * 3600
    /// SMS one phone number may receive per hour (on top of the app's smsDailyLimit).
    public var smsPerNumberPerHour: Int = 5
    /// A client address may fail this many times more than one handle before it is locked.
    public var addressThresholdFactor: Int = 5
    /// A handle as a whole (failures from several addresses) locks at this many times maxLoginAttempts.
    public var handleThresholdFactor: Int = 3
    /// Signup and invite e-mails (new codes and re-sends) per handle and hour.
    public var codeMailsPerHandlePerHour: Int = 5
    /// forgotPassword requests per account and hour, and per client address and hour.
    public var resetMailsPerAccountPerHour: Int = 5
    public var resetRequestsPerAddressPerHour: Int = 30
    /// New anonymous accounts (end-user `loginAnonymous`, AppKey `loginAnonymousComplete`) per client
    /// address and hour, and per app and hour over all addresses.
    public var anonymousAccountsPerAddressPerHour: Int = 30
    public var anonymousAccountsPerAppPerHour: Int = 3600
    public init() {}

    /// The limits of `CodeChallenge`.
    var codeLimits: CodeChallenge.Limits {
        var limits = CodeChallenge.Limits()
        limits.maxCodeAttempts = maxCodeAttempts
        limits.secondFactorWindow = secondFactorWindow
        limits.maxLockout = maxLockout
        return limits
    }

    /// The limits of `PasswordMethod`.
    var passwordLimits: PasswordLimits {
        var limits = PasswordLimits()
        limits.throttleWindow = throttleWindow
        limits.maxLockout = maxLockout
        limits.addressThresholdFactor = addressThresholdFactor
        limits.handleThresholdFactor = handleThresholdFactor
        return limits
    }
}

/// The end-user flows (<doc:EndUserAPI> §5, <doc:EndUserAPI> §6). Each method takes decoded fields and returns a result
/// or throws an `EndUserError`; none knows about HTTP.
public struct EndUserFlows: Sendable {
    public let client: PostgresClient
    public let apps: AppAdministration
    public let tokens: TokenIssuer
    public let hasher: PasswordHasher
    public let outbox: Outbox
    public let social: SocialTokenVerifier
    public let settings: FlowSettings
    public let logger: Logger
    /// The shared sign-in methods (`Methods/`).
    public let passwords: PasswordMethod
    public let sessions: SessionGrant
    public let passkeys: PasskeyMethod
    public let codes: CodeChallenge
    var box: SecretBox { apps.box }

    public init(
        client: PostgresClient, apps: AppAdministration, tokens: TokenIssuer, hasher: PasswordHasher, outbox: Outbox,
        social: SocialTokenVerifier, settings: FlowSettings, logger: Logger
    ) {
        self.client = client
        self.apps = apps
        self.tokens = tokens
        self.hasher = hasher
        self.outbox = outbox
        self.social = social
        self.settings = settings
        self.logger = logger
        self.passwords = PasswordMethod(client: client, hasher: hasher, limits: settings.passwordLimits, logger: logger)
        self.sessions = SessionGrant(tokens: tokens, logger: logger)
        self.passkeys = PasskeyMethod(logger: logger)
        self.codes = CodeChallenge(box: apps.box, limits: settings.codeLimits, logger: logger)
    }

}

extension EndUserFlows {
    // MARK: gates

    /// `suspended` → 402, `migrated` → 413.
    func requireActive(_ app: App) throws(EndUserError) {
        switch app.status {
        case .active: return
        case .migrated: throw .appMigrated
        default: throw .appSuspended
        }
    }

    func requireActiveUser(_ user: User) throws(EndUserError) {
        guard user.status == .active else { throw .userSuspended }
    }

    /// The first statement of an access-token write (end-user or AppKey): locks the caller's user row
    /// and answers the user as it is now. A user deleted since the token was checked is
    /// `invalidAccessToken`, one suspended meanwhile `userSuspended`, as the next request would answer.
    @discardableResult
    func lockCaller(_ db: PostgresConnection, app: App, userId: UUID) async throws -> User {
        guard let user = try await UserStore.lockExisting(db, appRef: app.ref, userId: userId, logger: logger) else {
            throw EndUserError.invalidAccessToken
        }
        guard user.status == .active else { throw EndUserError.userSuspended }
        return user
    }

    func audit(_ db: PostgresConnection, app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async throws {
        var all = detail
        all["handle"] = .string(handle)
        try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: "user", action: action, status: status, detail: all, logger: logger)
    }

    func audit(app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async {
        try? await client.withConnection { db in
            try await audit(db, app: app, handle: handle, action: action, status: status, detail: detail)
        }
    }

    /// Counts one new anonymous account, per client address and per app (both, or neither: the caller's
    /// transaction rolls back on refusal); false when either quota is used up for this hour.
    func takeAnonymousAccountQuota(_ db: PostgresConnection, app: App) async throws -> Bool {
        let address = ClientOrigin.current.address ?? "-"
        for (subject, limit) in [
            ("anonymous-account-ip:\(address)", settings.anonymousAccountsPerAddressPerHour),
            ("anonymous-account", settings.anonymousAccountsPerAppPerHour),
        ] {
            guard try await ThrottleStore.take(db, appRef: app.ref, subject: subject, limit: limit, windowSeconds: 3600, logger: logger)
            else { return false }
        }
        return true
    }

    /// Inserts a user, mapping a handle clash to `handleAlreadyRegistered`.
    func insertUser(
        _ db: PostgresConnection, app: App, handle: String, passwordHash: String?, locale: String, metadata: [String: JSONValue]
    ) async throws -> User {
        do {
            let user = try await UserStore.insert(
                db, appRef: app.ref, handle: handle, userName: nil, passwordHash: passwordHash, locale: locale, metaData: metadata,
                logger: logger)
            try await Events.record(db, app: app, type: .userCreated, user: user, logger: logger)
            return user
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw EndUserError.handleAlreadyRegistered
        }
    }
}
