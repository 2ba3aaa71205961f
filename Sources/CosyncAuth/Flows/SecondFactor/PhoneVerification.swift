import Foundation
import Logging
import PostgresNIO

// `POST setPhone`, `verifyPhone` and `setTwoFactorPhoneVerification`.

/// Whether an app can send SMS now (the login's phone factor and `setPhone` ask it first).
struct SMSCapability: Sendable {
    let apps: AppAdministration
    /// `FlowSettings.smsNeedsProviderCredentials`.
    let needsProviderCredentials: Bool
    let logger: Logger

    /// An app that must send SMS through Twilio needs its credentials before anything changes.
    func require(_ app: App) async throws {
        guard needsProviderCredentials else { return }
        let credentials = try apps.openCredentials(app.credentialsSealed, appId: app.appId)
        guard TwilioTransport.canSend(with: credentials) else {
            logger.warning("SMS requested but the app has no Twilio credentials", metadata: ["app": "\(app.appId)"])
            throw EndUserError.internalError
        }
    }
}

/// The `twoFactor` field of the two switches (phone and TOTP).
enum TwoFactorSwitch {
    /// `twoFactor` is true when it is the string or JSON value `true`.
    static func wantsOn(_ fields: Fields) -> Bool { fields["twoFactor"]?.lowercased() == "true" }
}

/// `POST setPhone` (<doc:EndUserAPI> §5.16): stores the number unverified and texts a code (expires after
/// `phoneCodeLifetime`, at most `maxCodeAttempts` wrong tries). The same number, already verified
/// by the caller, answers true without an SMS. Counted against the app's daily SMS cap.
struct SetPhone: Sendable {
    let client: PostgresClient
    let sms: SMSCapability
    let codes: CodeChallenge
    let accounts: Accounts
    let outbox: Outbox
    let audit: UserAudit
    let settings: FlowSettings
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let raw = try fields.require("phone")
        try Gates.requireActive(app)
        guard app.settings.twoFactorVerification == .phone else { throw EndUserError.phoneTwoFactorDisabled }
        guard let phone = Identifiers.phone(raw) else { throw EndUserError.invalidData }
        if user.phone == phone && user.phoneVerified { return }
        let taken = try await client.withConnection {
            try await UserStore.phoneVerifiedByOther($0, appRef: app.ref, phone: phone, userId: user.id, logger: logger)
        }
        if taken { throw EndUserError.phoneInUse }
        try await sms.require(app)
        let code = Secrets.numericCode()
        let sealed = try codes.seal(code, purpose: .phoneCode(userId: user.id))
        try await client.transaction(logger: logger) { db in
            try await accounts.lockCaller(db, app: app, userId: user.id)
            try await UserStore.setPendingPhone(
                db, userId: user.id, phone: phone, codeSealed: sealed, lifetimeSeconds: settings.phoneCodeLifetime, logger: logger)
            try await outbox.sms(db, app: app, locale: user.locale, to: phone, values: ["CODE": code, "HANDLE": user.handle],
                perNumberPerHour: settings.smsPerNumberPerHour, logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "setPhone")
        }
    }
}

/// `POST verifyPhone` (<doc:EndUserAPI> §5.17).
/// The contract checks `code` before the token, so the caller is resolved only after it.
struct VerifyPhone: Sendable {
    let client: PostgresClient
    let codes: CodeChallenge
    let audit: UserAudit
    let maxCodeAttempts: Int
    let logger: Logger

    func run(caller resolve: () async throws -> AuthenticatedCaller, fields: Fields) async throws {
        let given = try fields.require("code")
        let caller = try await resolve()
        let (app, user) = (caller.app, caller.user)
        let code = try Input.code(given)
        try Gates.requireActive(app)
        enum Outcome { case verified, wrong, taken }
        let outcome: Outcome
        do {
            outcome = try await client.transaction(logger: logger) { db in
                guard let pending = try await UserStore.lockPhoneCode(db, userId: user.id, logger: logger),
                    let phone = pending.phone, pending.sealed != nil
                else { return .wrong }
                if try await UserStore.phoneVerifiedByOther(db, appRef: app.ref, phone: phone, userId: user.id, logger: logger) {
                    return .taken
                }
                guard !pending.expired, pending.attempts < maxCodeAttempts,
                    codes.matches(code, sealed: pending.sealed, purpose: .phoneCode(userId: user.id))
                else {
                    try await UserStore.countFailedPhoneCode(db, userId: user.id, logger: logger)
                    try await audit.record(db, app: app, handle: user.handle, action: "verifyPhone", status: "error", detail: ["reason": .string("wrong code")])
                    return .wrong
                }
                try await UserStore.markPhoneVerified(db, userId: user.id, logger: logger)
                try await audit.record(db, app: app, handle: user.handle, action: "verifyPhone")
                return .verified
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint == "users_app_verified_phone" {
            outcome = .taken  // another user verified the same number at the same moment
        }
        switch outcome {
        case .verified: return
        case .wrong: throw EndUserError.invalidData
        case .taken: throw EndUserError.phoneInUse
        }
    }
}

/// `POST setTwoFactorPhoneVerification` (<doc:EndUserAPI> §5.18): phone 2FA only, in an app of mode `phone`.
struct SetTwoFactorPhone: Sendable {
    let client: PostgresClient
    let accounts: Accounts
    let audit: UserAudit
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        try Gates.requireActive(app)
        guard app.settings.twoFactorVerification == .phone else { throw EndUserError.phoneTwoFactorDisabled }
        let on = TwoFactorSwitch.wantsOn(fields)
        if on && !user.phoneVerified { throw EndUserError.phoneNotVerified }
        try await client.transaction(logger: logger) { db in
            try await accounts.lockCaller(db, app: app, userId: user.id)
            try await UserStore.setTwoFactor(db, userId: user.id, phone: on, logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "setTwoFactorPhoneVerification", detail: ["enabled": .bool(on)])
            try await Events.record(db, app: app, type: on ? .userSecondFactorEnabled : .userSecondFactorDisabled, user: user, data: ["factor": .string("phone")], logger: logger)
        }
    }
}

extension EndUserFlows {
    var smsCapability: SMSCapability {
        SMSCapability(apps: apps, needsProviderCredentials: settings.smsNeedsProviderCredentials, logger: logger)
    }

    public func setPhone(caller: AuthenticatedCaller, fields: Fields) async throws {
        try await SetPhone(
            client: client, sms: smsCapability, codes: codes, accounts: accounts, outbox: outbox, audit: userAudit, settings: settings,
            logger: logger
        ).run(caller: caller, fields: fields)
    }

    public func verifyPhone(caller resolve: () async throws -> AuthenticatedCaller, fields: Fields) async throws {
        try await VerifyPhone(client: client, codes: codes, audit: userAudit, maxCodeAttempts: settings.maxCodeAttempts, logger: logger)
            .run(caller: resolve, fields: fields)
    }

    public func setTwoFactorPhoneVerification(caller: AuthenticatedCaller, fields: Fields) async throws {
        try await SetTwoFactorPhone(client: client, accounts: accounts, audit: userAudit, logger: logger).run(caller: caller, fields: fields)
    }
}
