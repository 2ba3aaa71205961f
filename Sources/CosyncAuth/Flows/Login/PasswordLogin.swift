import Foundation
import PostgresNIO

extension EndUserFlows {
    /// `POST login` (<doc:EndUserAPI> §5.2, §6.3). Every attempt is reserved in PostgreSQL before the password is
    /// checked (see `LoginThrottle`); while the caller's address, the handle or the address as a whole
    /// is locked, the answer is `invalidCredentials` without a password check.
    public func login(app: App, fields: Fields, clientAddress: String?) async throws -> LoginOutcome {
        let handle = Input.handle(try fields.require("handle"))
        let password = try fields.require("password")
        if !handle.contains("@") && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
        try requireActive(app)
        // No account has a longer handle (users.handle is 1-254 characters): nothing to find or to count
        // (a throttle subject that long would not fit its index).
        guard handle.count <= 254 else { throw EndUserError.invalidCredentials }

        let found = try await Telemetry.sql("select user") {
            try await client.withConnection {
                try await UserStore.user($0, appRef: app.ref, handleOrUserName: handle, logger: logger)
            }
        }
        if found == nil, app.settings.signupFlow != .none, try await client.withConnection({
            try await PendingStore.pending($0, .signups, appRef: app.ref, handle: handle, lock: false, logger: logger)
        }) != nil {
            throw EndUserError.accountNotVerified
        }
        // Failures of one account are counted under its handle, whichever identifier was typed.
        let throttle = LoginThrottle(flows: self, app: app, handle: found?.handle.lowercased() ?? handle, address: clientAddress)
        guard try await throttle.reserve() else {
            Telemetry.login("locked", appId: app.appId)
            await audit(app: app, handle: handle, action: "login", status: "error", detail: ["reason": .string("locked")])
            throw EndUserError.invalidCredentials
        }
        guard let user = found else {
            Telemetry.login("unknown_account", appId: app.appId)
            await audit(app: app, handle: handle, action: "login", status: "error", detail: ["reason": .string("unknown account")])
            throw EndUserError.invalidCredentials
        }
        do {
            try requireActiveUser(user)
        } catch {
            try await throttle.succeeded()  // the password was not checked: give the attempt back
            Telemetry.login("not_active", appId: app.appId)
            throw error
        }
        guard PasswordHasher.isMD5Hex(password), try await throttle.check({ try await verifyPassword(password, user: user) }) else {
            Telemetry.login("wrong_password", appId: app.appId)
            await recordFailedLogin(app: app, user: user, throttle: throttle)
            await audit(app: app, handle: user.handle, action: "login", status: "error", detail: ["reason": .string("wrong password")])
            throw EndUserError.invalidCredentials
        }
        let outcome = try await completeFirstFactor(app: app, user: user)
        if case .secondFactor = outcome {
            Telemetry.login("second_factor", appId: app.appId)
        } else {
            Telemetry.login("success", appId: app.appId)
        }
        return outcome
    }

    /// After the password: either a second factor (<doc:EndUserAPI> §6.3) or the tokens. A second factor opens a
    /// login challenge (the login-token's `jti`); in phone mode its SMS code is queued in the same
    /// transaction.
    func completeFirstFactor(app: App, user: User) async throws -> LoginOutcome {
        let mode = app.settings.twoFactorVerification
        if mode == .phone, user.twoFactorPhone, user.phoneVerified, let phone = user.phone {
            try await requireSMSCapability(app)
            return try await openChallenge(app: app, user: user, factor: "phone", smsTo: phone)
        }
        if mode == .google, user.twoFactorGoogle {
            return try await openChallenge(app: app, user: user, factor: "google", smsTo: nil)
        }
        let issued = try await issueTokens(app: app, user: user, method: .password)
        try await Telemetry.sql("update last login") {
            try await client.withConnection { db in
                try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "login")
                try await Events.record(db, app: app, type: .userLoginSucceeded, user: user, logger: logger)
            }
        }
        return .tokens(issued)
    }

    /// Opens a login challenge for `factor` and answers its login-token; with `smsTo`, the
    /// challenge's SMS code is queued in the same transaction.
    func openChallenge(app: App, user: User, factor: String, smsTo phone: String?) async throws -> LoginOutcome {
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

    /// `POST loginAnonymous` (<doc:EndUserAPI> §5.4): the handle must contain `ANON_`; it is matched exactly.
    public func loginAnonymous(app: App, fields: Fields) async throws -> IssuedTokens {
        guard let handle = fields["handle"], handle.contains("ANON_"), handle.count <= 254 else {
            throw EndUserError.invalidCredentials
        }
        guard app.settings.anonymousLoginEnabled else { throw EndUserError.anonymousLoginDisabled }
        try requireActive(app)
        let user: User = try await client.transaction(logger: logger) { db in
            if let existing = try await UserStore.user(db, appRef: app.ref, handle: handle, exact: true, forUpdate: true, logger: logger) {
                // Only an account that signs in anonymously with this handle: not a password or social
                // account whose handle happens to contain ANON_, nor one upgraded or detached since.
                guard try await IdentityStore.has(db, userId: existing.id, kind: .anonymous, subject: handle, logger: logger) else {
                    throw EndUserError.invalidCredentials
                }
                return existing
            }
            // Another user whose handle differs only in case owns the slot: not this one's account.
            if try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) != nil {
                throw EndUserError.invalidCredentials
            }
            let created = try await insertUser(db, app: app, handle: handle, passwordHash: nil, locale: Locales.defaultLocale, metadata: [:])
            try await audit(db, app: app, handle: handle, action: "loginAnonymous.create")
            return created
        }
        try requireActiveUser(user)
        let issued = try await issueTokens(app: app, user: user, method: .anonymous)
        try await client.withConnection { db in
            try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await audit(db, app: app, handle: handle, action: "loginAnonymous")
        }
        return issued
    }
}
