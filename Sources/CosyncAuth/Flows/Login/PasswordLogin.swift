import Foundation
import PostgresNIO

extension EndUserFlows {
    /// `POST login` (§5.2, §6.3). Failed attempts are counted per (app, handle) and per (app, client
    /// address) in PostgreSQL; while either is locked the answer is `invalidCredentials` without a
    /// password check (see LoginThrottle in the README for the rule).
    public func login(appToken: String?, fields: Fields, clientAddress: String?) async throws -> LoginOutcome {
        let app = try await app(token: appToken, whenMissing: .invalidAppToken)
        let handle = Input.handle(try fields.require("handle"))
        let password = try fields.require("password")
        if !handle.contains("@") && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
        try requireActive(app)

        let throttle = LoginThrottle(flows: self, app: app, handle: handle, address: clientAddress)
        if try await throttle.isLocked() {
            await audit(app: app, handle: handle, action: "login", status: "error", detail: ["reason": .string("locked")])
            throw EndUserError.invalidCredentials
        }
        let found = try await client.withConnection {
            try await EndUserStore.user($0, appRef: app.ref, handleOrUserName: handle, logger: logger)
        }
        guard let user = found else {
            let pending = app.settings.signupFlow != .none ? try await client.withConnection {
                try await EndUserStore.pending($0, .signups, appRef: app.ref, handle: handle, logger: logger)
            } : nil
            if pending != nil { throw EndUserError.accountNotVerified }
            try await throttle.recordFailure()
            await audit(app: app, handle: handle, action: "login", status: "error", detail: ["reason": .string("unknown account")])
            throw EndUserError.invalidCredentials
        }
        try requireActiveUser(user)
        guard PasswordHasher.isMD5Hex(password), try await verifyPassword(password, user: user) else {
            try await throttle.recordFailure()
            await audit(app: app, handle: user.handle, action: "login", status: "error", detail: ["reason": .string("wrong password")])
            throw EndUserError.invalidCredentials
        }
        try await throttle.clear()
        return try await completeFirstFactor(app: app, user: user)
    }

    /// After the password: either a second factor (§6.3) or the tokens. A second factor opens a
    /// login challenge (the login-token's `jti`); in phone mode its SMS code is queued in the same
    /// transaction.
    func completeFirstFactor(app: AppRow, user: User) async throws -> LoginOutcome {
        let mode = app.settings.twoFactorVerification
        if mode == .phone, user.twoFactorPhone, user.phoneVerified, let phone = user.phone {
            try await requireSMSCapability(app)
            return try await openChallenge(app: app, user: user, factor: "phone", smsTo: phone)
        }
        if mode == .google, user.twoFactorGoogle {
            return try await openChallenge(app: app, user: user, factor: "google", smsTo: nil)
        }
        let issued = try await issueTokens(app: app, user: user)
        try await client.withConnection { db in
            try await EndUserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "login")
        }
        return .tokens(issued)
    }

    /// Opens a login challenge for `factor` and answers its login-token; with `smsTo`, the
    /// challenge's SMS code is queued in the same transaction.
    func openChallenge(app: AppRow, user: User, factor: String, smsTo phone: String?) async throws -> LoginOutcome {
        let challenge = UUID()
        let code = phone.map { _ in Secrets.numericCode() }
        let sealed = try code.map { try sealCode($0, purpose: "login-challenge:\(challenge)") }
        try await client.transaction(logger: logger) { db in
            try await SecondFactorStore.insertChallenge(
                db, id: challenge, appRef: app.ref, userId: user.id, factor: factor, codeSealed: sealed,
                lifetimeSeconds: settings.loginCodeLifetime, logger: logger)
            if let phone, let code {
                try await outbox.sms(
                    db, app: app, locale: user.locale, to: phone, values: ["CODE": code, "HANDLE": user.handle],
                    perNumberPerHour: settings.smsPerNumberPerHour, logger: logger)
            }
            try await audit(db, app: app, handle: user.handle, action: "login", detail: ["secondFactor": .string(factor)])
        }
        return .secondFactor(loginToken: try await tokens.loginToken(handle: user.handle, appId: app.appId, challenge: challenge))
    }

    /// `POST loginAnonymous` (§5.4): the handle must contain `ANON_`; it is matched exactly.
    public func loginAnonymous(appToken: String?, fields: Fields) async throws -> IssuedTokens {
        let app = try await app(token: appToken, whenMissing: .invalidAppToken)
        guard let handle = fields["handle"], handle.contains("ANON_"), handle.count <= 254 else {
            throw EndUserError.invalidCredentials
        }
        guard app.settings.anonymousLoginEnabled else { throw EndUserError.anonymousLoginDisabled }
        try requireActive(app)
        let user: User = try await client.transaction(logger: logger) { db in
            if let existing = try await EndUserStore.user(db, appRef: app.ref, handle: handle, exact: true, logger: logger) {
                return existing
            }
            // Another user whose handle differs only in case owns the slot: not this one's account.
            if try await EndUserStore.user(db, appRef: app.ref, handle: handle, logger: logger) != nil {
                throw EndUserError.invalidCredentials
            }
            let created = try await insertUser(db, app: app, handle: handle, passwordHash: nil, locale: Locales.defaultLocale, metadata: [:])
            try await audit(db, app: app, handle: handle, action: "loginAnonymous.create")
            return created
        }
        try requireActiveUser(user)
        let issued = try await issueTokens(app: app, user: user)
        try await client.withConnection { db in
            try await EndUserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await audit(db, app: app, handle: handle, action: "loginAnonymous")
        }
        return issued
    }
}

/// Failed-login counting for one attempt: per (app, handle) with the app's `maxLoginAttempts`, and per
/// (app, client address) with a threshold `addressThresholdFactor` times higher. From the threshold
/// on, a subject is locked for 30 s, doubling with each further failure, at most `maxLockout`
/// (15 min). While locked nothing is counted, so a lock never outlives `maxLockout` after the last
/// counted failure; counters start again after `throttleWindow` without failures or on success.
struct LoginThrottle {
    let flows: EndUserFlows
    let app: AppRow
    let handle: String
    let address: String?

    var subjects: [String] { ["handle:\(handle)"] + (address.map { ["ip:\($0)"] } ?? []) }

    func isLocked() async throws -> Bool {
        try await flows.client.withConnection {
            try await EndUserStore.isLocked($0, appRef: app.ref, subjects: subjects, logger: flows.logger)
        }
    }

    func recordFailure() async throws {
        let threshold = max(1, app.settings.maxLoginAttempts)
        try await flows.client.withConnection { db in
            try await EndUserStore.recordFailure(
                db, appRef: app.ref, subject: "handle:\(handle)", threshold: threshold, windowSeconds: flows.settings.throttleWindow,
                maxLockSeconds: flows.settings.maxLockout, logger: flows.logger)
            if let address {
                try await EndUserStore.recordFailure(
                    db, appRef: app.ref, subject: "ip:\(address)", threshold: threshold * flows.settings.addressThresholdFactor,
                    windowSeconds: flows.settings.throttleWindow, maxLockSeconds: flows.settings.maxLockout, logger: flows.logger)
            }
        }
    }

    func clear() async throws {
        try await flows.client.withConnection {
            try await EndUserStore.clearFailures($0, appRef: app.ref, subject: "handle:\(handle)", logger: flows.logger)
        }
    }
}
