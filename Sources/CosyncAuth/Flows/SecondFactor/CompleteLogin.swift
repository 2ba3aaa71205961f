import Foundation
import PostgresNIO

// `POST loginComplete`: the login-token and its code.

extension EndUserFlows {
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
            // The user row before its challenge, in the order an account deletion or a password reset
            // takes them (user, then its challenges): the other order deadlocked with them (40P01).
            // FOR UPDATE, as the TOTP check locks it, so the lock is never upgraded.
            guard let user = try await UserStore.user(db, appRef: app.ref, handle: claims.handle, exact: true, forUpdate: true, logger: logger)
            else { return .refused("user gone") }
            guard let challenge = try await LoginChallengeStore.lockChallenge(db, id: challengeId, appRef: app.ref, logger: logger) else {
                return .refused("unknown login-token")
            }
            guard challenge.userId == user.id else { return .refused("user gone") }
            if challenge.used { return .refused("login-token already used") }
            if challenge.expired { return .refused("login-token expired") }
            if challenge.attempts >= settings.maxCodeAttempts { return .refused("too many wrong codes") }
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
            case .phone:
                matched = codeMatches(code, sealed: challenge.codeSealed, purpose: .loginChallenge(challenge.id))
            case .google:
                matched = try await acceptTOTP(db, user: user, code: code)
            }
            guard matched else {
                try await LoginChallengeStore.countFailedChallenge(db, id: challenge.id, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "loginComplete", status: "error",
                                detail: ["reason": .string("wrong code"), "factor": .string(challenge.factor.rawValue)])
                return .wrongCode
            }
            try await LoginChallengeStore.markChallengeUsed(db, id: challenge.id, logger: logger)
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
        guard code.count == TOTP.digits, let state = try await UserStore.lockTOTP(db, userId: user.id, logger: logger),
            let sealed = state.sealed, let key = try? box.openString(sealed, purpose: .totp(userId: user.id)),
            let secret = TOTP.secret(fromKey: key),
            let step = TOTP.matchingStep(secret: secret, code: code, at: Date()), step > state.lastStep
        else { return false }
        return try await UserStore.acceptTOTPStep(db, userId: user.id, step: step, logger: logger)
    }
}
