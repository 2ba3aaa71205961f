import Foundation
import Logging
import PostgresNIO

extension OAuthServices {
    /// Passkey sign-in (and passkey signup) on the hosted login page, through the AppKey flows.
    public var browserPasskey: BrowserPasskey {
        BrowserPasskey(
            appKey: AppKeyFlows(flows: flows), resolver: AppKeyResolver(client: client, apps: apps, tokens: tokens, logger: logger),
            tokens: tokens, publicURL: publicURL, logger: logger)
    }
}

/// Passkeys on the hosted login page (<doc:OAuth>, "Passkeys on the hosted page"): the browser runs
/// the WebAuthn ceremony against the app's relying party, and the server checks it with the AppKey
/// flows themselves (`AppKeyFlows.login`/`loginComplete`, `signup`/`signupConfirm`/`signupComplete`).
/// So the challenge storage and lifetime, the challenge quotas, the passkey method (`PasskeyMethod`:
/// credential lookup, user handle, signature, counter policy), the session (`SessionGrant`), the audit
/// rows and the events are exactly those of an AppKey passkey login: this type adds no second
/// implementation. It only reads the session id from the access token the flow answers, so the page
/// can continue the authorization request on that session.
///
/// The browser's origin is the origin of the server's public URL, so the page offers passkeys only
/// when the app can accept a ceremony from there (`availability(app:)`): an AppKey app whose RP ID is
/// the public host or a parent domain of it, and whose allowed origins include the public origin.
/// During a ceremony the app's allowed origins are narrowed to that one origin (`pageApp`): an
/// assertion made at another of the app's origins (its website, its Android app) cannot be replayed
/// into the page.
///
/// Sign-in is handle-first, as in the AppKey flow: the user types its handle (e-mail, phone or user
/// name) and the options list that account's passkeys. The AppKey flow has no discoverable
/// (handle-less) login, so neither has the page.
public struct BrowserPasskey: Sendable {
    let appKey: AppKeyFlows
    let resolver: AppKeyResolver
    let tokens: TokenIssuer
    let publicURL: String
    let logger: Logger

    /// What a successful passkey sign-in (or signup) opened: a session like an AppKey login's.
    public struct SignIn: Sendable, Equatable {
        public let sessionId: UUID
        public let userId: UUID
        public let handle: String
        /// Always `.passkey`: the session's `method` and `proven_by`.
        public let method: SessionMethod
    }

    /// A signup waiting for the code sent to its handle (AppKey K4 → K5).
    public struct PendingSignup: Sendable, Equatable {
        public let handle: String
        /// The AppKey signup-token: the browser keeps it for `signupComplete`. It only completes this
        /// signup, with the code that went to the handle.
        public let signupToken: String
    }

    /// Why the page does or does not offer passkeys for an app.
    public enum Availability: Sendable, Equatable {
        case offered
        /// Passkeys belong to the AppKey product; a CosyncAuth app has none.
        case notAppKey
        case appInactive
        /// The app has no RP ID.
        case noRelyingParty
        /// The RP ID is neither the public URL's host nor a parent domain of it: browsers refuse it.
        case rpIdDoesNotCoverHost(host: String, rpId: String)
        /// The public origin is not among the app's allowed origins (`allowedOrigins`, or
        /// `https://<rpId>` when it is empty).
        case originNotAllowed(origin: String)
        /// The public URL has no usable origin.
        case noPublicOrigin
    }

    /// A refusal, for the page: a stable reason, a sentence for logs and developers, an HTTP status.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public enum Reason: String, Sendable, CaseIterable {
            /// The page does not offer passkeys for this app (see `Availability`).
            case unavailable
            case invalidRequest
            /// No account has this handle.
            case unknownAccount
            /// The account has no passkey this page can use (none registered, the credential is not
            /// one of its passkeys, or an administrator reset them).
            case noPasskey
            /// The ceremony did not verify (signature, origin, RP ID, flags, counter, challenge).
            case passkeyRefused
            case accountSuspended
            /// The account signs in with Apple or Google.
            case useProvider
            case rateLimited
            case accountExists
            case invalidHandle
            case signupDisabled
            case invalidCode
            /// The pending signup is gone (expired, completed, or too many wrong codes).
            case signupExpired
        }

        public let reason: Reason
        public let detail: String

        public init(_ reason: Reason, _ detail: String) {
            self.reason = reason
            self.detail = detail
        }

        public var status: Int {
            switch reason {
            case .unavailable: 404
            case .accountSuspended, .signupDisabled: 403
            case .rateLimited: 429
            case .accountExists: 409
            default: 400
            }
        }

        public var description: String { "\(reason.rawValue): \(detail)" }
    }

    /// The origin of the server's public URL (`scheme://host[:port]`, the port only when it is not
    /// the scheme's default): the origin a browser reports for the hosted page.
    public var pageOrigin: String? { Self.origin(of: publicURL) }

    static func origin(of url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = components.host?.lowercased(), !host.isEmpty
        else { return nil }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        if let port = components.port, !(scheme == "https" && port == 443), !(scheme == "http" && port == 80) {
            return "\(scheme)://\(shownHost):\(port)"
        }
        return "\(scheme)://\(shownHost)"
    }

    /// Whether the hosted page can offer passkeys for `app`, and why not.
    public func availability(app: App) -> Availability {
        guard app.product == .appKey else { return .notAppKey }
        guard app.status == .active else { return .appInactive }
        let rpId = app.settings.rpId.lowercased()
        guard !rpId.isEmpty else { return .noRelyingParty }
        guard let origin = pageOrigin, let host = URLComponents(string: publicURL)?.host?.lowercased() else { return .noPublicOrigin }
        guard host == rpId || host.hasSuffix("." + rpId) else { return .rpIdDoesNotCoverHost(host: host, rpId: rpId) }
        guard app.settings.effectiveOrigins.contains(origin) else { return .originNotAllowed(origin: origin) }
        return .offered
    }

    /// Whether the page shows the passkey sign-in.
    public func offersSignIn(app: App) -> Bool { availability(app: app) == .offered }

    /// Whether the page shows the passkey signup: passkeys are offered and the app takes signups.
    public func offersSignup(app: App) -> Bool { offersSignIn(app: app) && app.settings.signupEnabled }

    /// The app as the page's ceremonies see it: the same app, its allowed origins narrowed to the
    /// page's origin. Refused when the page does not offer passkeys for it.
    func pageApp(_ app: App) throws(Refusal) -> App {
        let availability = availability(app: app)
        guard availability == .offered, let origin = pageOrigin else {
            throw Refusal(.unavailable, "passkeys are not offered on this page: \(availability)")
        }
        var settings = app.settings
        settings.allowedOrigins = [origin]
        return App(
            ref: app.ref, appId: app.appId, name: app.name, status: app.status, settings: settings, appSecretHash: app.appSecretHash,
            credentialsSealed: app.credentialsSealed, createdAt: app.createdAt, updatedAt: app.updatedAt, product: app.product)
    }

    // MARK: sign-in (AppKey K6 → K7)

    /// The request options for the passkeys of the account `handle` names (AppKey `login`).
    public func signInOptions(app: App, handle: String) async throws -> PasskeyRequestOptions {
        let app = try pageApp(app)
        let options = try await mapping(.signIn) { try await appKey.login(app: app, fields: AppKeyFields(["handle": .string(handle)])) }
        // An administrator reset the account's passkeys: only the app can register a new one.
        guard !options.allowCredentials.isEmpty else {
            throw Refusal(.noPasskey, "the account has no passkey (its passkeys were reset); add one in the app")
        }
        return options
    }

    /// Verifies the browser's assertion (`credential`: the PublicKeyCredential as JSON, `id`,
    /// `rawId`, `type`, `response` with base64url members) for the account `handle` names, and opens
    /// the session (AppKey `loginComplete`).
    public func signIn(app: App, handle: String, credential: [String: JSONValue]) async throws -> SignIn {
        let app = try pageApp(app)
        let result = try await mapping(.signIn) {
            try await appKey.loginComplete(app: app, fields: AppKeyFields(Self.fields(credential, handle: handle)))
        }
        return try await signIn(of: result)
    }

    // MARK: signup (AppKey K3 → K4 → K5)

    /// The creation options of a new account's first passkey (AppKey `signup`). `locale`: one of the
    /// app's locales (the page's), or nil for the default.
    public func signupOptions(app: App, handle: String, displayName: String, locale: String?) async throws -> PasskeyCreationOptions {
        let app = try pageApp(app)
        var fields: [String: JSONValue] = ["handle": .string(handle), "displayName": .string(displayName)]
        if let locale { fields["locale"] = .string(locale) }
        return try await mapping(.signup) { try await appKey.signup(app: app, fields: AppKeyFields(fields)) }
    }

    /// Verifies the new passkey and sends the signup code to the handle (AppKey `signupConfirm`).
    public func signupConfirm(app: App, handle: String, credential: [String: JSONValue]) async throws -> PendingSignup {
        let app = try pageApp(app)
        let pending = try await mapping(.signup) {
            try await appKey.signupConfirm(app: app, fields: AppKeyFields(Self.fields(credential, handle: handle)))
        }
        return PendingSignup(handle: pending.handle, signupToken: pending.signupToken)
    }

    /// The code of a pending signup: creates the account with its passkey and opens the session
    /// (AppKey `signupComplete`). The signup-token must be one of this app's.
    public func signupComplete(app: App, signupToken: String, code: String) async throws -> SignIn {
        let app = try pageApp(app)
        let result = try await mapping(.signupComplete) {
            let token = try await resolver.signup(AppKeyCredentials(signupToken: signupToken))
            guard token.app.ref == app.ref else { throw AppKeyError.invalidToken }
            return try await appKey.signupComplete(
                token: AppKeySignupToken(app: app, tokenHash: token.tokenHash), fields: AppKeyFields(["code": .string(code)]))
        }
        return try await signIn(of: result)
    }

    // MARK: shared

    /// The fields of an AppKey *Complete request from the browser's credential and the handle.
    static func fields(_ credential: [String: JSONValue], handle: String) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        for name in ["id", "rawId", "type", "response", "authenticatorAttachment"] {
            if let value = credential[name] { fields[name] = value }
        }
        fields["handle"] = .string(handle)
        return fields
    }

    /// The session an AppKey answer opened: its access token names it (`sid`).
    func signIn(of result: AppKeyUserResult) async throws -> SignIn {
        guard let access = result.accessToken, let claims = await tokens.verifyAccessToken(access), let sid = claims.sid,
            let sessionId = UUID(uuidString: sid)
        else {
            logger.error("passkey sign-in on the hosted page: the AppKey answer names no session")
            throw Refusal(.passkeyRefused, "the sign-in opened no session")
        }
        return SignIn(sessionId: sessionId, userId: result.user.id, handle: result.user.handle, method: .passkey)
    }

    enum Step { case signIn, signup, signupComplete }

    /// Runs an AppKey step and turns its refusals into the page's.
    func mapping<T: Sendable>(_ step: Step, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as AppKeyError {
            throw Self.refusal(error, step: step)
        }
    }

    static func refusal(_ error: AppKeyError, step: Step) -> Refusal {
        let detail = error.detail ?? error.kind.rawValue
        let reason: Refusal.Reason =
            switch error.kind {
            case .missingParameter, .invalidLocale, .invalidMetaData: .invalidRequest
            case .accountDoesNotExist, .userNameDoesNotExist, .userNamesNotSupported: .unknownAccount
            case .passkeyNotExist: .noPasskey
            case .invalidPasskey: .passkeyRefused
            // The AppKey flows answer invalidData for an unknown or spent challenge and for
            // unusable client data; in signupComplete, for a wrong code.
            case .invalidData: step == .signupComplete ? .invalidCode : .passkeyRefused
            case .accountSuspended: .accountSuspended
            case .appleAccountExists, .googleAccountExists: step == .signIn ? .useProvider : .accountExists
            case .rateLimited, .smsLimitReached: .rateLimited
            case .handleAlreadyRegistered, .emailAccountExists: .accountExists
            case .invalidHandleFormat, .invalidLoginCredentials: .invalidHandle
            case .signupNotSupported: .signupDisabled
            case .signupExpired, .invalidToken: .signupExpired
            case .appSuspended, .appMigrated, .internalError, .invalidAppToken, .appNotFound: .unavailable
            default: .passkeyRefused
            }
        return Refusal(reason, detail)
    }
}
