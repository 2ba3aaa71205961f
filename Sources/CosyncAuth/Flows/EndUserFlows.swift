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

/// The end-user flows (<doc:EndUserAPI> §5, <doc:EndUserAPI> §6): the composition root of the flow
/// steps. Each step is a small type in its folder (`ChangePassword`, `PasswordLogin`, …) that names the
/// dependencies it uses; `EndUserFlows` holds them all and builds each step for its public method. A
/// step takes decoded fields and returns a result or throws an `EndUserError`; none knows about HTTP.
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
    /// The pieces every step may share (`Flows/Shared/`).
    let userAudit: UserAudit
    let accounts: Accounts
    let grant: TokenGrant
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
        let sessions = SessionGrant(tokens: tokens, logger: logger)
        self.sessions = sessions
        self.passkeys = PasskeyMethod(logger: logger)
        self.codes = CodeChallenge(box: apps.box, limits: settings.codeLimits, logger: logger)
        self.userAudit = UserAudit(client: client, logger: logger)
        self.accounts = Accounts(settings: settings, logger: logger)
        self.grant = TokenGrant(client: client, tokens: tokens, sessions: sessions, logger: logger)
    }
}
