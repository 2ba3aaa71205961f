import Foundation
import Logging
import PostgresNIO

/// The code sign-in method: one-time codes (signup, invite, reset, phone, login) sealed at rest and
/// compared in constant time, and the second step of a login (the SMS code of its challenge, or a
/// TOTP) with its attempt limits. The end-user flows use it today; the AppKey signup's e-mailed code,
/// the OAuth login page and the Portal's TOTP sign-in use the same one.
public struct CodeChallenge: Sendable {
    let box: SecretBox
    let limits: Limits
    let logger: Logger

    /// The attempt limits of the second step.
    public struct Limits: Sendable {
        /// Wrong codes one login challenge allows.
        public var maxCodeAttempts = 5
        /// Wrong codes of a user are also counted over this window, across challenges; from twice
        /// `maxCodeAttempts` on, the second step is locked like a login (30 s doubling, at most `maxLockout`).
        public var secondFactorWindow = 24 * 3600
        public var maxLockout = 15 * 60
        public init() {}
    }

    public init(box: SecretBox, limits: Limits, logger: Logger) {
        self.box = box
        self.limits = limits
        self.logger = logger
    }

    /// A code sealed for storage under `purpose` (the purpose binds it to its row).
    func seal(_ code: String, purpose: SealPurpose) throws -> Data { try box.seal(code, purpose: purpose) }

    /// Constant-time comparison of a submitted code with a sealed one.
    func matches(_ given: String, sealed: Data?, purpose: SealPurpose) -> Bool {
        guard let sealed, let stored = try? box.openString(sealed, purpose: purpose) else { return false }
        return Secrets.constantTimeEquals(Data(given.utf8), Data(stored.utf8))
    }

    /// What the second step came to.
    enum Verdict: Sendable {
        /// The code is right: the challenge is used, the user's count of wrong codes forgotten.
        case accepted(AuthProof)
        /// The code is wrong; it is counted on the challenge and on the user.
        case wrongCode
        /// Not judged (the reason, for the audit row): used, expired, too many wrong codes, locked.
        case refused(String)
    }

    /// Judges `code` against `challenge` of `user`, both locked by the caller's transaction (user row
    /// first). The attempt is reserved before the compare, so concurrent guesses cannot exceed the limit.
    func verifySecondFactor(
        _ db: PostgresConnection, app: App, user: User, challenge: LoginChallengeStore.Challenge, code: String
    ) async throws -> Verdict {
        if challenge.used { return .refused("login-token already used") }
        if challenge.expired { return .refused("login-token expired") }
        if challenge.attempts >= limits.maxCodeAttempts { return .refused("too many wrong codes") }
        // Wrong codes also count per user across login-tokens, so that logging in again does not buy
        // fresh guesses at the TOTP or SMS code.
        let subject = "2fa:\(user.id)"
        guard try await ThrottleStore.reserve(
            db, appRef: app.ref, subject: subject, threshold: limits.maxCodeAttempts * 2,
            windowSeconds: limits.secondFactorWindow, maxLockSeconds: limits.maxLockout, logger: logger)
        else { return .refused("second factor locked") }
        let matched: Bool
        switch challenge.factor {
        case .phone: matched = matches(code, sealed: challenge.codeSealed, purpose: .loginChallenge(challenge.id))
        case .google: matched = try await acceptTOTP(db, user: user, code: code)
        }
        guard matched else {
            try await LoginChallengeStore.countFailedChallenge(db, id: challenge.id, logger: logger)
            return .wrongCode
        }
        try await LoginChallengeStore.markChallengeUsed(db, id: challenge.id, logger: logger)
        try await ThrottleStore.clear(db, appRef: app.ref, subject: subject, logger: logger)
        return .accepted(.presented(.secondFactor))
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
