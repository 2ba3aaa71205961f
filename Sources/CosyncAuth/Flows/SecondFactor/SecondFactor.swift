import Foundation
import PostgresNIO

/// The reply of `setTwoFactorGoogleVerification(true)`.
public struct AuthenticatorSetup: Sendable, Equatable {
    public let googleSecretKey: String
    public let qrDataImage: String
}

extension EndUserFlows {
    // MARK: loginComplete

    /// `POST loginComplete` (<doc:EndUserAPI> §5.3, §7.4). The login-token must be valid, unexpired, of scope `login`,
    /// of the calling app, and its challenge unused, with fewer than `maxCodeAttempts` wrong codes.
    /// Phone: the SMS code of this challenge. Google: a TOTP of the current step ±1 that is later
    /// than the last one the user logged in with.
    public func loginComplete(app: App, fields: Fields) async throws -> IssuedTokens {
        let loginToken = try fields.require("loginToken")
        let rawCode = try fields.require("code")
        let code = String(rawCode.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }.map(Character.init))
        guard !code.isEmpty, code.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw EndUserError.invalidData }
        guard let claims = await tokens.verifyLoginToken(loginToken), claims.appId == app.appId,
            let challengeId = UUID(uuidString: claims.jti)
        else { throw EndUserError.invalidCredentials }
        try requireActive(app)

        /// A wrong code is audited inside the transaction; other refusals after it.
        enum Outcome { case accepted(User), wrongCode, refused(String) }
        let outcome: Outcome = try await client.transaction(logger: logger) { db in
            guard let challenge = try await SecondFactorStore.lockChallenge(db, id: challengeId, appRef: app.ref, logger: logger) else {
                return .refused("unknown login-token")
            }
            if challenge.used { return .refused("login-token already used") }
            if challenge.expired { return .refused("login-token expired") }
            if challenge.attempts >= settings.maxCodeAttempts { return .refused("too many wrong codes") }
            guard let user = try await UserStore.find(db, appRef: app.ref, id: challenge.userId, logger: logger),
                user.handle == claims.handle
            else { return .refused("user gone") }
            // Wrong codes also count per user across login-tokens, so that logging in again does not
            // buy fresh guesses at the TOTP or SMS code. The attempt is reserved before the compare
            // (the row stays locked until this transaction ends), so concurrency cannot exceed it.
            let subject = "2fa:\(user.id)"
            guard try await ThrottleStore.reserve(
                db, appRef: app.ref, subject: subject, threshold: settings.maxCodeAttempts * 2,
                windowSeconds: settings.secondFactorWindow, maxLockSeconds: settings.maxLockout, logger: logger)
            else { return .refused("second factor locked") }
            let matched: Bool
            switch challenge.factor {
            case "phone":
                matched = codeMatches(code, sealed: challenge.codeSealed, purpose: "login-challenge:\(challenge.id)")
            default:
                matched = try await acceptTOTP(db, user: user, code: code)
            }
            guard matched else {
                try await SecondFactorStore.countFailedChallenge(db, id: challenge.id, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "loginComplete", status: "error",
                                detail: ["reason": .string("wrong code"), "factor": .string(challenge.factor)])
                return .wrongCode
            }
            try await SecondFactorStore.markChallengeUsed(db, id: challenge.id, logger: logger)
            try await ThrottleStore.clear(db, appRef: app.ref, subject: subject, logger: logger)
            return .accepted(user)
        }
        switch outcome {
        case .wrongCode:
            throw EndUserError.invalidCredentials
        case .refused(let reason):
            await audit(app: app, handle: claims.handle, action: "loginComplete", status: "error", detail: ["reason": .string(reason)])
            throw EndUserError.invalidCredentials
        case .accepted(let user):
            try requireActiveUser(user)
            let issued = try await issueTokens(app: app, user: user, method: .secondFactor)
            try await client.withConnection { db in
                try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "loginComplete")
                try await Events.record(db, app: app, type: .userLoginSucceeded, user: user, data: ["secondFactor": .bool(true)], logger: logger)
            }
            return issued
        }
    }

    /// Checks a TOTP against the user's secret and records its step, so it cannot be used again.
    func acceptTOTP(_ db: PostgresConnection, user: User, code: String) async throws -> Bool {
        guard code.count == TOTP.digits, let state = try await SecondFactorStore.lockTOTP(db, userId: user.id, logger: logger),
            let sealed = state.sealed, let key = try? box.openString(sealed, purpose: "totp:\(user.id)"),
            let secret = TOTP.secret(fromKey: key),
            let step = TOTP.matchingStep(secret: secret, code: code, at: Date()), step > state.lastStep
        else { return false }
        return try await SecondFactorStore.acceptTOTPStep(db, userId: user.id, step: step, logger: logger)
    }

    // MARK: phone

    /// An app that must send SMS through Twilio needs its credentials before anything changes.
    func requireSMSCapability(_ app: App) async throws {
        guard settings.smsNeedsProviderCredentials else { return }
        let credentials = try apps.openCredentials(app.credentialsSealed, appId: app.appId)
        guard TwilioTransport.canSend(with: credentials) else {
            logger.warning("SMS requested but the app has no Twilio credentials", metadata: ["app": "\(app.appId)"])
            throw EndUserError.internalError
        }
    }

    /// E.164 after the <doc:EndUserAPI> §1.3 repair (a leading space was a `+`): `+` and 8–15 digits, else nil.
    static func e164(_ raw: String) -> String? {
        let phone = Identifiers.repairedPhone(raw)
        guard phone.hasPrefix("+") else { return nil }
        let digits = phone.dropFirst()
        guard (8...15).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }), digits.first != "0" else { return nil }
        return phone
    }

    /// `POST setPhone` (<doc:EndUserAPI> §5.16): stores the number unverified and texts a code (expires after
    /// `phoneCodeLifetime`, at most `maxCodeAttempts` wrong tries). The same number, already verified
    /// by the caller, answers true without an SMS. Counted against the app's daily SMS cap.
    public func setPhone(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let raw = try fields.require("phone")
        try requireActive(app)
        guard app.settings.twoFactorVerification == .phone else { throw EndUserError.phoneTwoFactorDisabled }
        guard let phone = Self.e164(raw) else { throw EndUserError.invalidData }
        if user.phone == phone && user.phoneVerified { return }
        let taken = try await client.withConnection {
            try await SecondFactorStore.phoneVerifiedByOther($0, appRef: app.ref, phone: phone, userId: user.id, logger: logger)
        }
        if taken { throw EndUserError.phoneInUse }
        try await requireSMSCapability(app)
        let code = Secrets.numericCode()
        let sealed = try sealCode(code, purpose: "phone-code:\(user.id)")
        try await client.transaction(logger: logger) { db in
            try await SecondFactorStore.setPendingPhone(
                db, userId: user.id, phone: phone, codeSealed: sealed, lifetimeSeconds: settings.phoneCodeLifetime, logger: logger)
            try await outbox.sms(db, app: app, locale: user.locale, to: phone, values: ["CODE": code, "HANDLE": user.handle],
                perNumberPerHour: settings.smsPerNumberPerHour, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "setPhone")
        }
    }

    /// `POST verifyPhone` (<doc:EndUserAPI> §5.17).
    /// The contract checks `code` before the token, so the caller is resolved only after it.
    public func verifyPhone(caller resolve: () async throws -> AuthenticatedCaller, fields: Fields) async throws {
        let given = try fields.require("code")
        let caller = try await resolve()
        let (app, user) = (caller.app, caller.user)
        let code = try Input.code(given)
        try requireActive(app)
        enum Outcome { case verified, wrong, taken }
        let outcome: Outcome
        do {
            outcome = try await client.transaction(logger: logger) { db in
                guard let pending = try await SecondFactorStore.lockPhoneCode(db, userId: user.id, logger: logger),
                    let phone = pending.phone, pending.sealed != nil
                else { return .wrong }
                if try await SecondFactorStore.phoneVerifiedByOther(db, appRef: app.ref, phone: phone, userId: user.id, logger: logger) {
                    return .taken
                }
                guard !pending.expired, pending.attempts < settings.maxCodeAttempts,
                    codeMatches(code, sealed: pending.sealed, purpose: "phone-code:\(user.id)")
                else {
                    try await SecondFactorStore.countFailedPhoneCode(db, userId: user.id, logger: logger)
                    try await audit(db, app: app, handle: user.handle, action: "verifyPhone", status: "error", detail: ["reason": .string("wrong code")])
                    return .wrong
                }
                try await SecondFactorStore.markPhoneVerified(db, userId: user.id, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "verifyPhone")
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

    /// `twoFactor` is true when it is the string or JSON value `true`.
    static func wantsOn(_ fields: Fields) -> Bool { fields["twoFactor"]?.lowercased() == "true" }

    /// `POST setTwoFactorPhoneVerification` (<doc:EndUserAPI> §5.18): phone 2FA only, in an app of mode `phone`.
    public func setTwoFactorPhoneVerification(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        try requireActive(app)
        guard app.settings.twoFactorVerification == .phone else { throw EndUserError.phoneTwoFactorDisabled }
        let on = Self.wantsOn(fields)
        if on && !user.phoneVerified { throw EndUserError.phoneNotVerified }
        try await client.transaction(logger: logger) { db in
            try await SecondFactorStore.setTwoFactor(db, userId: user.id, phone: on, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "setTwoFactorPhoneVerification", detail: ["enabled": .bool(on)])
            try await Events.record(db, app: app, type: on ? .userSecondFactorEnabled : .userSecondFactorDisabled, user: user, data: ["factor": .string("phone")], logger: logger)
        }
    }

    /// `POST setTwoFactorGoogleVerification` (<doc:EndUserAPI> §5.19, §6.6): enabling makes a new secret every time,
    /// sealed at rest, answers it with a QR PNG of the otpauth URI, and e-mails both (template
    /// `qrCode`, PNG attached). Disabling keeps the secret, as legacy did.
    public func setTwoFactorGoogleVerification(caller: AuthenticatedCaller, fields: Fields) async throws -> AuthenticatorSetup? {
        let (app, user) = (caller.app, caller.user)
        try requireActive(app)
        guard app.settings.twoFactorVerification == .google else { throw EndUserError.googleTwoFactorDisabled }
        guard Self.wantsOn(fields) else {
            try await client.transaction(logger: logger) { db in
                try await SecondFactorStore.setTwoFactor(db, userId: user.id, google: false, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "setTwoFactorGoogleVerification", detail: ["enabled": .bool(false)])
                try await Events.record(db, app: app, type: .userSecondFactorDisabled, user: user, data: ["factor": .string("google")], logger: logger)
            }
            return nil
        }
        let secret = TOTP.newSecret()
        let displayKey = TOTP.displayKey(secret)
        let issuer = app.settings.googleAppName.isEmpty ? app.name : app.settings.googleAppName
        let uri = TOTP.provisioningURI(issuer: issuer, account: user.handle, secret: secret)
        let png = try QRCode.png(for: uri, scale: 6)
        let sealed = try box.seal(TOTP.base32(secret), purpose: "totp:\(user.id)")
        try await client.transaction(logger: logger) { db in
            try await SecondFactorStore.setTOTP(db, userId: user.id, sealed: sealed, logger: logger)
            if user.handle.contains("@") {
                try await outbox.email(
                    db, app: app, template: "qrCode", locale: user.locale, to: user.handle,
                    values: ["CODE": displayKey, "HANDLE": user.handle], attachment: (name: "QRCode.png", data: png), logger: logger)
            }
            try await audit(db, app: app, handle: user.handle, action: "setTwoFactorGoogleVerification", detail: ["enabled": .bool(true)])
            try await Events.record(db, app: app, type: .userSecondFactorEnabled, user: user, data: ["factor": .string("google")], logger: logger)
        }
        return AuthenticatorSetup(googleSecretKey: displayKey, qrDataImage: "data:image/png;base64," + Data(png).base64EncodedString())
    }
}
