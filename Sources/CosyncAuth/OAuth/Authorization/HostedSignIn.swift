import Foundation

/// The sign-in steps of the hosted login page (<doc:OAuth> §3). Each one is the end-user flow the
/// SDKs call (`EndUserFlows`): the same limits, lockouts, sessions, audit rows and events. Nothing here
/// checks a password or a code itself.
///
/// The flows take passwords as the SDKs send them: the MD5 hex of the plaintext. The browser sends the
/// page the plaintext, so each step computes that MD5 hex here, on the server, before calling the
/// flow, and the plaintext goes no further.
public struct HostedSignIn: Sendable {
    let flows: EndUserFlows
    let tokens: TokenIssuer

    /// A finished sign-in: the session the flow opened, its user, and how it was proven.
    public struct SignedIn: Sendable, Equatable {
        public let sessionId: UUID
        public let userId: UUID
        public let amr: [String]

        public init(sessionId: UUID, userId: UUID, amr: [String]) {
            self.sessionId = sessionId
            self.userId = userId
            self.amr = amr
        }
    }

    /// The second factor a login waits for.
    public enum Factor: String, Sendable, Equatable { case totp, sms }

    public enum Outcome: Sendable, Equatable {
        case signedIn(SignedIn)
        /// The password was right; the code of `factor` completes the login (`secondFactor`).
        case secondFactor(loginToken: String, factor: Factor)
        /// A signup waits for the code e-mailed to the handle (`completeSignup`).
        case codeSent
    }

    /// A password the app's rules refuse (`PasswordPolicy`); `rule` says which, in English.
    public struct PasswordRefused: Error, Sendable, Equatable {
        public let rule: String
    }

    /// The longest password the page accepts (what a browser field can reasonably hold).
    static let maxPassword = 1024

    /// The MD5 hex of a typed password, as the SDKs send it to the flows; an empty or absurdly long one
    /// is refused before any work.
    static func sdkPassword(_ plaintext: String) throws(EndUserError) -> String {
        guard !plaintext.isEmpty else { throw .missingParameter }
        guard plaintext.utf8.count <= maxPassword else { throw .invalidCredentials }
        return PasswordHasher.md5Hex(plaintext)
    }

    /// `login`: handle (or user name) and password.
    public func password(app: App, handle: String, password: String, clientAddress: String?) async throws -> Outcome {
        let md5 = try Self.sdkPassword(password)
        switch try await flows.login(app: app, fields: Fields(["handle": handle, "password": md5]), clientAddress: clientAddress) {
        case .tokens(let issued):
            return .signedIn(try await signedIn(issued, amr: OAuthAuthorization.amr(.password, app: app)))
        case .secondFactor(let loginToken):
            return .secondFactor(loginToken: loginToken, factor: app.settings.twoFactorVerification == .phone ? .sms : .totp)
        }
    }

    /// `loginComplete`: the login-token of the password step and the TOTP or SMS code.
    public func secondFactor(app: App, loginToken: String, code: String) async throws -> SignedIn {
        let issued = try await flows.loginComplete(app: app, fields: Fields(["loginToken": loginToken, "code": code]))
        return try await signedIn(issued, amr: OAuthAuthorization.amr(.secondFactor, app: app))
    }

    /// `signup` with the app's flow: `none` signs in at once, `code` e-mails a code. (`link` is not
    /// offered on the page: its link carries an app token the page does not hold.)
    public func signup(app: App, handle: String, password: String, locale: String) async throws -> Outcome {
        if let rule = PasswordPolicy.violation(of: password, settings: app.settings) { throw PasswordRefused(rule: rule) }
        let md5 = try Self.sdkPassword(password)
        guard app.settings.signupFlow != .link else { throw EndUserError.signupDisabled }
        let fields = Fields(["handle": handle, "password": md5, "locale": locale])
        switch try await flows.signup(app: app, fields: fields, presentedAppToken: "") {
        case .tokens(let issued): return .signedIn(try await signedIn(issued, amr: OAuthAuthorization.amr(.signup, app: app)))
        case .codeSent: return .codeSent
        }
    }

    /// `completeSignup`: the e-mailed code turns the pending signup into an account, signed in.
    public func completeSignup(app: App, handle: String, code: String) async throws -> SignedIn {
        let completed = try await flows.completeSignup(app: app, fields: Fields(["handle": handle, "code": code]))
        return try await signedIn(completed.tokens, amr: OAuthAuthorization.amr(.signup, app: app))
    }

    /// `forgotPassword`: e-mails a reset code.
    public func forgotPassword(app: App, handle: String, clientAddress: String?) async throws {
        try await flows.forgotPassword(app: app, fields: Fields(["handle": handle]), clientAddress: clientAddress)
    }

    /// `resetPassword`: the e-mailed code and a new password (the app's rules apply to it).
    public func resetPassword(app: App, handle: String, code: String, password: String, clientAddress: String?) async throws {
        if let rule = PasswordPolicy.violation(of: password, settings: app.settings) { throw PasswordRefused(rule: rule) }
        let md5 = try Self.sdkPassword(password)
        try await flows.resetPassword(app: app, fields: Fields(["handle": handle, "code": code, "password": md5]), clientAddress: clientAddress)
    }

    /// The session an access token names (`sid`) and its user.
    func signedIn(_ issued: IssuedTokens, amr: [String]) async throws -> SignedIn {
        guard let claims = await tokens.verifyAccessToken(issued.accessToken), let sid = claims.sid.flatMap(UUID.init(uuidString:)),
            let uid = UUID(uuidString: claims.uid)
        else { throw EndUserError.internalError }
        return SignedIn(sessionId: sid, userId: uid, amr: amr)
    }
}
