import Foundation
import Logging
import PostgresNIO

// `POST login`: handle (or user name) and password.

/// `POST login` (<doc:EndUserAPI> §5.2, §6.3). Every attempt is reserved in PostgreSQL before the password is
/// checked (see `LoginThrottle`); while the caller's address, the handle or the address as a whole
/// is locked, the answer is `invalidCredentials` without a password check.
struct PasswordLogin: Sendable {
    let client: PostgresClient
    let hasher: PasswordHasher
    let passwords: PasswordMethod
    let challenges: LoginChallenge
    let sms: SMSCapability
    let grant: TokenGrant
    let failures: FailedLoginEvents
    let audit: UserAudit
    let logger: Logger

    func run(app: App, fields: Fields, clientAddress: String?) async throws -> LoginOutcome {
        let handle = Identifiers.handle(try fields.require("handle"))
        let password = try fields.require("password")
        if !Identifiers.hasAt(handle) && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
        try Gates.requireActive(app)
        // No account has a longer handle (users.handle is 1-254 code points, as PostgreSQL counts them;
        // Swift's character count lets one letter carry thousands of combining marks): nothing to find
        // or to count (a throttle subject that long would not fit its index).
        guard handle.unicodeScalars.count <= 254 else { throw EndUserError.invalidCredentials }
        // While this app's bcrypt queue is full, turn the attempt away before any database work.
        try hasher.scheduler.precheck(tenant: String(app.ref))

        // One pool checkout, one transaction: the user lookup, then the attempt's reservation (a locked
        // subject rolls the reservation back). The session's transaction is the only other checkout
        // of a successful login: it also gives the attempt back.
        let found: User?
        let throttle: LoginThrottle
        do {
            (found, throttle) = try await Telemetry.sql("select user, reserve attempt") {
                try await client.transaction(logger: logger) { db -> (User?, LoginThrottle) in
                    let found = try await UserStore.user(db, appRef: app.ref, handleOrUserName: handle, logger: logger)
                    if found == nil, app.settings.signupFlow != .none,
                        try await PendingStore.pending(db, .signups, appRef: app.ref, handle: handle, lock: false, logger: logger) != nil
                    {
                        throw EndUserError.accountNotVerified
                    }
                    // Failures of one account are counted under its handle, whichever identifier was typed.
                    let throttle = passwords.throttle(app: app, handle: found?.handle.lowercased() ?? handle, address: clientAddress)
                    try await throttle.reserve(in: db)
                    return (found, throttle)
                }
            }
        } catch is LoginThrottle.Locked {
            Telemetry.login("locked", appId: app.appId)
            await audit.record(app: app, handle: handle, action: "login", status: "error", detail: ["reason": .string("locked")])
            throw EndUserError.invalidCredentials
        }
        guard let user = found else {
            Telemetry.login("unknown_account", appId: app.appId)
            await audit.record(app: app, handle: handle, action: "login", status: "error", detail: ["reason": .string("unknown account")])
            throw EndUserError.invalidCredentials
        }
        do {
            try Gates.requireActiveUser(user)
        } catch {
            try await throttle.succeeded()  // the password was not checked: give the attempt back
            Telemetry.login("not_active", appId: app.appId)
            throw error
        }
        guard PasswordHasher.isMD5Hex(password), try await throttle.check(releasing: false, { try await passwords.verify(password, user: user) }) else {
            Telemetry.login("wrong_password", appId: app.appId)
            await failures.record(app: app, user: user, throttle: throttle)
            await audit.record(app: app, handle: user.handle, action: "login", status: "error", detail: ["reason": .string("wrong password")])
            throw EndUserError.invalidCredentials
        }
        let outcome = try await completeFirstFactor(app: app, user: user, throttle: throttle)
        if case .secondFactor = outcome {
            Telemetry.login("second_factor", appId: app.appId)
        } else {
            Telemetry.login("success", appId: app.appId)
        }
        return outcome
    }

    /// After the password: either a second factor (<doc:EndUserAPI> §6.3) or the tokens. A second factor opens a
    /// login challenge (the login-token's `jti`); in phone mode its SMS code is queued in the same
    /// transaction. The correct password's attempt is given back (`throttle`) in that same transaction,
    /// or on its own when the step fails (the password was right whatever came after it).
    func completeFirstFactor(app: App, user: User, throttle: LoginThrottle) async throws -> LoginOutcome {
        do {
            let mode = app.settings.twoFactorVerification
            if mode == .phone, user.twoFactorPhone, user.phoneVerified, let phone = user.phone {
                try await sms.require(app)
                return try await challenges.open(app: app, user: user, factor: .phone, smsTo: phone, throttle: throttle)
            }
            if mode == .google, user.twoFactorGoogle {
                return try await challenges.open(app: app, user: user, factor: .google, smsTo: nil, throttle: throttle)
            }
            let issued = try await grant.issueTokens(app: app, user: user, method: .password) { db in
                try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
                try await audit.record(db, app: app, handle: user.handle, action: "login")
                try await Events.record(db, app: app, type: .userLoginSucceeded, user: user, logger: logger)
                // Last, just before the commit: the client address's throttle row is shared by every
                // login from that address, and is locked from here to the commit.
                try await throttle.release(in: db)
            }
            return .tokens(issued)
        } catch {
            await Task { _ = try? await withDeadline(.seconds(5)) { try await throttle.succeeded(); return true } }.value
            throw error
        }
    }
}

extension EndUserFlows {
    public func login(app: App, fields: Fields, clientAddress: String?) async throws -> LoginOutcome {
        try await PasswordLogin(
            client: client, hasher: hasher, passwords: passwords, challenges: loginChallenge, sms: smsCapability, grant: grant,
            failures: FailedLoginEvents(client: client, logger: logger), audit: userAudit, logger: logger
        ).run(app: app, fields: fields, clientAddress: clientAddress)
    }
}
