import Foundation
import Logging
import PostgresNIO

extension OAuthServices {
    /// The authorization endpoint, pushed requests, the hosted page's waiting requests, codes and
    /// browser sessions (<doc:OAuth> §3).
    public var authorization: OAuthAuthorization { OAuthAuthorization(oauth: self) }

    /// Signing in on the hosted login page through the end-user flows (<doc:OAuth> §3).
    public var hostedSignIn: HostedSignIn { HostedSignIn(flows: flows, tokens: tokens) }

    /// RP-initiated logout (<doc:OAuth>, "Logout").
    public var logout: OAuthLogout { OAuthLogout(oauth: self) }
}

/// The authorization endpoint (RFC 6749 §4.1, RFC 7636 S256 only, RFC 9207, RFC 9126) and what the
/// hosted login page needs around it: the waiting request a reference names, the code a sign-in
/// answers it with, and the browser session that lets a later request skip the form.
public struct OAuthAuthorization: Sendable {
    let oauth: OAuthServices
    var client: PostgresClient { oauth.client }
    var logger: Logger { oauth.logger }

    /// How long a request waits for its user on the hosted page.
    public static let requestLifetimeSeconds = 600
    /// How long a pushed request waits for its authorization request (RFC 9126 §2.2).
    public static let pushedLifetimeSeconds = 90
    /// The `request_uri` of a pushed request is this prefix and a random reference.
    public static let requestURIPrefix = "urn:ietf:params:oauth:request_uri:"

    /// What the authorization endpoint answers.
    public enum Answer: Sendable, Equatable {
        /// Show this error to the user: the client or its redirect URI cannot be trusted, so nothing
        /// goes back to it.
        case errorPage(OAuthError)
        /// Send the browser to the client: a code, or an error once the redirect URI is trusted.
        case redirect(String)
        /// Show the hosted login page for the waiting request `reference` names.
        case signIn(reference: String)
        /// The browser is signed in, but the client is public: ask the user to continue as the signed-in
        /// user or use another account (the waiting request `reference` names) before issuing a code.
        case chooseAccount(reference: String)
    }

    /// Why a request is refused, and where the refusal goes.
    enum Refusal: Error {
        case page(OAuthError)
        case redirect(OAuthError, redirectURI: String, state: String?)
    }

    /// A browser signed in on the hosted page: its session (live), the user and the session's last proof.
    public struct SignedInBrowser: Sendable {
        public let sessionId: UUID
        public let user: User
        public let proof: AuthProof
    }

    // MARK: the authorization endpoint

    /// Answers an authorization request (the query of a GET or the form of a POST). `browserKey` is
    /// the value of the browser's binding cookie (the HTTP layer makes one when it has none): a request
    /// that goes on to the login page may be continued only by the browser that started it.
    /// `browserToken` is the browser-session cookie, if any: with a live session that needs no new
    /// proof a confidential client's code is issued at once (single sign-on), and `prompt=none` needs
    /// one. A public client's identity cannot be assured (RFC 8252 §8.6: any local program can use its
    /// client_id with its own loopback port or scheme), so for it the user confirms first
    /// (`chooseAccount`), and `prompt=none` answers `interaction_required`.
    public func authorize(app: App, params: [String: String], browserKey: String, browserToken: String?) async -> Answer {
        do {
            return try await answer(app: app, params: params, browserKey: browserKey, browserToken: browserToken)
        } catch let refusal as Refusal {
            switch refusal {
            case .page(let error): return .errorPage(error)
            case .redirect(let error, let redirectURI, let state):
                return .redirect(AuthorizationRules.redirect(redirectURI, [
                    ("error", error.code), ("error_description", error.description), ("state", state), ("iss", oauth.issuer(appId: app.appId)),
                ]))
            }
        } catch {
            logger.error("authorization request failed", metadata: ["error": "\(String(reflecting: error))"])
            return .errorPage(.serverError())
        }
    }

    func answer(app: App, params: [String: String], browserKey: String, browserToken: String?) async throws -> Answer {
        guard app.status == .active else { throw Refusal.page(OAuthError("access_denied", "this app is not available", status: 403)) }
        guard let clientId = params["client_id"], !clientId.isEmpty else { throw Refusal.page(.invalidRequest("client_id is required")) }
        guard let registered = try await oauth.clients.find(app: app, clientId: clientId) else {
            throw Refusal.page(.invalidRequest("client_id is not a client of this app"))
        }
        var wire = params
        if let requestURI = params["request_uri"] {
            // RFC 9126 §4: the pushed parameters are the request; others in the query are ignored.
            guard requestURI.hasPrefix(Self.requestURIPrefix), requestURI.utf8.count <= 200 else {
                throw Refusal.page(OAuthError("invalid_request_uri", "request_uri is not one this server issued"))
            }
            let reference = String(requestURI.dropFirst(Self.requestURIPrefix.count))
            let pushed = try await client.withConnection { db in
                try await OAuthRequestStore.takePushed(db, handleHash: Secrets.sha256(reference), appRef: app.ref, clientRef: registered.ref, logger: logger)
            }
            guard let pushed else { throw Refusal.page(OAuthError("invalid_request_uri", "request_uri is unknown, expired or already used")) }
            wire = pushed
        }
        let redirectURI: String
        do { redirectURI = try AuthorizationRules.trustedRedirect(wire, client: registered) } catch { throw Refusal.page(error) }
        let request: AuthorizationRequest
        do {
            request = try AuthorizationRules.check(wire, client: registered, redirectURI: redirectURI)
        } catch {
            throw Refusal.redirect(error, redirectURI: redirectURI, state: Self.echoedState(wire["state"]))
        }

        let browser = try await signedInBrowser(app: app, token: browserToken)
        let fresh = browser.map { Self.isFresh($0.proof, maxAge: request.maxAge) } ?? false
        if browser != nil, fresh, request.prompt != .login, registered.kind == .public {
            if request.prompt == AuthorizationRequest.Prompt.none {
                throw Refusal.redirect(
                    OAuthError("interaction_required", "the user must confirm the sign-in to this client"), redirectURI: redirectURI, state: request.state)
            }
            var stored = request.parameters
            stored["_binding"] = Hex.encode(Secrets.sha256(browserKey))
            let reference = Self.newReference()
            guard try await store(app: app, clientRef: registered.ref, reference: reference, params: stored, pushed: false) else {
                throw Refusal.page(.slowDown(retryAfter: 60))
            }
            return .chooseAccount(reference: reference)
        }
        if let browser, fresh, request.prompt != .login {
            let code = try await client.withConnection { db in
                try await issueCode(db, app: app, client: registered, request: request, sessionId: browser.sessionId, userId: browser.user.id,
                                    authTime: browser.proof.at, amr: Self.amr(browser.proof, app: app))
            }
            return .redirect(success(app: app, request: request, code: code))
        }
        if request.prompt == AuthorizationRequest.Prompt.none {
            throw Refusal.redirect(OAuthError("login_required", "the user must sign in"), redirectURI: redirectURI, state: request.state)
        }
        var stored = request.parameters
        stored["_binding"] = Hex.encode(Secrets.sha256(browserKey))
        // A signed-in user who must prove itself again (max_age) sees its own handle in the form.
        if let browser, request.prompt != .login, !Identifiers.isAnonymous(browser.user.handle) { stored["_prefill"] = browser.user.handle }
        let reference = Self.newReference()
        guard try await store(app: app, clientRef: registered.ref, reference: reference, params: stored, pushed: false) else {
            throw Refusal.page(.slowDown(retryAfter: 60))
        }
        return .signIn(reference: reference)
    }

    /// Waiting requests (for the page, or pushed) one client address may open per window: the
    /// endpoints are open to anyone, and a flood must not fill the table.
    public static let requestsPerAddress = 300
    public static let requestWindowSeconds = 600

    /// Stores a waiting request under the SHA-256 of `reference`, after taking one of the client
    /// address's requests for the window (in the same transaction); false when they are used up.
    func store(app: App, clientRef: UUID, reference: String, params: [String: String], pushed: Bool) async throws -> Bool {
        let address = ClientOrigin.current.address ?? "-"
        return try await client.transaction(logger: logger) { db in
            guard try await ThrottleStore.take(
                db, appRef: app.ref, subject: "oauth-request-ip:\(address)", limit: Self.requestsPerAddress,
                windowSeconds: Self.requestWindowSeconds, logger: logger)
            else { return false }
            try await OAuthRequestStore.insert(
                db, handleHash: Secrets.sha256(reference), appRef: app.ref, clientRef: clientRef, params: params, pushed: pushed,
                lifetimeSeconds: pushed ? Self.pushedLifetimeSeconds : Self.requestLifetimeSeconds, logger: logger)
            // Housekeeping on the way: waiting requests nobody finished.
            if Int.random(in: 0..<16) == 0 { try await OAuthRequestStore.deleteExpired(db, logger: logger) }
            return true
        }
    }

    /// The `state` an error redirect may echo: the request's, unless it is itself what was wrong.
    static func echoedState(_ raw: String?) -> String? {
        (try? AuthorizationRules.text(raw, name: "state", maxBytes: AuthorizationRequest.maxState)) ?? nil
    }

    /// Whether a session's last proof satisfies `max_age` (OpenID Connect Core §3.1.2.1).
    static func isFresh(_ proof: AuthProof, maxAge: Int?, now: Date = Date()) -> Bool {
        guard let maxAge else { return true }
        return now.timeIntervalSince(proof.at) <= Double(maxAge)
    }

    /// The `amr` values (RFC 8176) of a session's last proof.
    public static func amr(_ proof: AuthProof, app: App) -> [String] {
        guard case .signIn(let method) = proof.method else { return [] }
        return amr(method, app: app)
    }

    /// The `amr` values (RFC 8176) of a sign-in by `method`: `pwd` for a password, and the second
    /// factor the app uses (`otp` for TOTP, `sms`) with `mfa`; `hwk` and `user` for a passkey (user
    /// verification); nothing this server can vouch for in RFC 8176 terms otherwise.
    public static func amr(_ method: SessionMethod, app: App) -> [String] {
        switch method {
        case .password, .signup, .register: ["pwd"]
        case .secondFactor: ["pwd", app.settings.twoFactorVerification == .phone ? "sms" : "otp", "mfa"]
        case .passkey: ["hwk", "user"]
        case .anonymous, .apple, .google, .custom, .oidc: []
        }
    }

    /// A random reference (256 bits, base64url): the login page's request, a pushed `request_uri`.
    static func newReference() -> String { Base64URL.encode(Secrets.randomBytes(32)) }

    /// The success redirect: the code, the request's state and the issuer (RFC 9207).
    func success(app: App, request: AuthorizationRequest, code: String) -> String {
        AuthorizationRules.redirect(request.redirectURI, [("code", code), ("state", request.state), ("iss", oauth.issuer(appId: app.appId))])
    }

    /// Issues a code (256 random bits; its SHA-256 is stored) for a signed-in session.
    func issueCode(
        _ db: PostgresConnection, app: App, client registered: OAuthClient, request: AuthorizationRequest, sessionId: UUID, userId: UUID,
        authTime: Date, amr: [String]
    ) async throws -> String {
        let code = Self.newReference()
        let record = AuthorizationCode(
            appRef: app.ref, clientRef: registered.ref, sessionId: sessionId, userId: userId, redirectURI: request.redirectURI, scope: request.scope,
            nonce: request.nonce, codeChallenge: request.codeChallenge, dpopJKT: request.dpopJKT, authTime: authTime, amr: amr)
        try await OAuthCodeStore.insert(db, codeHash: Secrets.sha256(code), record, logger: logger)
        return code
    }

    // MARK: pushed authorization requests (RFC 9126)

    /// Stores a pushed request of an authenticated client; answers its `request_uri` and lifetime.
    /// `dpopJKT` is the key of the PAR request's DPoP proof, if it carried one (RFC 9449 §10.1): the
    /// code is bound to it, and a `dpop_jkt` parameter must name the same key.
    public func push(app: App, client registered: OAuthClient, params: [String: String], dpopJKT: String?) async throws(OAuthError)
        -> (requestURI: String, expiresIn: Int)
    {
        guard app.status == .active else { throw OAuthError("access_denied", "this app is not available", status: 403) }
        guard params["request_uri"] == nil else { throw .invalidRequest("request_uri cannot be pushed") }
        if let named = params["client_id"], named != registered.clientId { throw .invalidRequest("client_id does not match the authenticated client") }
        let redirectURI = try AuthorizationRules.trustedRedirect(params, client: registered)
        var request = try AuthorizationRules.check(params, client: registered, redirectURI: redirectURI)
        if let dpopJKT {
            if let named = request.dpopJKT, named != dpopJKT { throw .invalidRequest("dpop_jkt does not match the key of the DPoP proof") }
            request = request.binding(dpopJKT: dpopJKT)
        }
        let reference = Self.newReference()
        let stored: Bool
        do {
            stored = try await store(app: app, clientRef: registered.ref, reference: reference, params: request.parameters, pushed: true)
        } catch {
            logger.error("storing a pushed request failed", metadata: ["error": "\(String(reflecting: error))"])
            throw .serverError()
        }
        guard stored else { throw .slowDown(retryAfter: 60) }
        return (Self.requestURIPrefix + reference, Self.pushedLifetimeSeconds)
    }

    // MARK: the waiting request of the hosted page

    /// A request waiting on the hosted page, checked again against its client as it is now.
    public struct Pending: Sendable {
        public let request: AuthorizationRequest
        public let client: OAuthClient
        /// The handle the form starts with: `login_hint`, or the signed-in user's own when it must
        /// prove itself again.
        public let prefill: String?
    }

    /// Why the hosted page cannot continue a request.
    public enum PendingFailure: Error, Sendable, Equatable {
        /// Unknown, expired, already answered, or its client no longer accepts it.
        case gone
        /// It was started in another browser (or the browser dropped its cookie).
        case otherBrowser
    }

    /// The request `reference` names, for the browser holding `browserKey`.
    public func pending(app: App, reference: String, browserKey: String?) async throws -> Pending {
        try await client.withConnection { db in try await pending(db, app: app, reference: reference, browserKey: browserKey, lock: false) }
    }

    func pending(_ db: PostgresConnection, app: App, reference: String, browserKey: String?, lock: Bool) async throws -> Pending {
        guard !reference.isEmpty, reference.utf8.count <= 100 else { throw PendingFailure.gone }
        guard let row = try await OAuthRequestStore.waiting(db, handleHash: Secrets.sha256(reference), appRef: app.ref, lock: lock, logger: logger) else {
            throw PendingFailure.gone
        }
        guard let browserKey, let bound = row.params["_binding"].flatMap(Hex.decode),
            Secrets.constantTimeEquals(Secrets.sha256(browserKey), bound)
        else { throw PendingFailure.otherBrowser }
        guard let registered = try await OAuthClientStore.find(db, ref: row.clientRef, logger: logger) else { throw PendingFailure.gone }
        let request: AuthorizationRequest
        do {
            let redirectURI = try AuthorizationRules.trustedRedirect(row.params, client: registered)
            request = try AuthorizationRules.check(row.params, client: registered, redirectURI: redirectURI)
        } catch {
            throw PendingFailure.gone
        }
        return Pending(request: request, client: registered, prefill: request.loginHint ?? row.params["_prefill"])
    }

    /// What finishing a sign-in gives the browser.
    public struct Completed: Sendable {
        /// The code, for the resume step's URL (`resume`).
        public let code: String
        /// The browser-session cookie's value, and how long it may live (the session's lifetime).
        public let browserToken: String
        public let browserTokenMaxAge: Int
    }

    /// Answers the waiting request with a code for the session the hosted page just signed in, and
    /// opens the browser session. One transaction: the request (locked, so one sign-in answers it),
    /// the session's user and last proof (`auth_time`), the code, the request's answer, the browser.
    public func complete(app: App, reference: String, browserKey: String?, signedIn: HostedSignIn.SignedIn) async throws -> Completed {
        let browserToken = Self.newReference()
        let code: String = try await client.transaction(logger: logger) { db in
            let pending = try await pending(db, app: app, reference: reference, browserKey: browserKey, lock: true)
            guard let (user, proof) = try await SessionStore.liveUser(
                db, sessionId: signedIn.sessionId, appRef: app.ref, userId: signedIn.userId, logger: logger)
            else { throw PendingFailure.gone }
            let code = try await issueCode(
                db, app: app, client: pending.client, request: pending.request, sessionId: signedIn.sessionId, userId: user.id,
                authTime: proof.at, amr: signedIn.amr)
            try await OAuthRequestStore.answer(db, handleHash: Secrets.sha256(reference), codeHashHex: Hex.encode(Secrets.sha256(code)), logger: logger)
            try await OAuthBrowserSessionStore.insert(
                db, tokenHash: Secrets.sha256(browserToken), appRef: app.ref, sessionId: signedIn.sessionId, logger: logger)
            return code
        }
        return Completed(code: code, browserToken: browserToken, browserTokenMaxAge: oauth.flows.sessions.lifetime(app))
    }

    /// The browser session of cookie `browserToken` when the "Continue as" step may use it for
    /// `request`: live, its user active, fresh enough for `max_age`, and the request not `prompt=login`.
    public func continuable(app: App, request: AuthorizationRequest, browserToken: String?) async throws -> SignedInBrowser? {
        guard request.prompt != .login, let browser = try await signedInBrowser(app: app, token: browserToken),
            Self.isFresh(browser.proof, maxAge: request.maxAge)
        else { return nil }
        return browser
    }

    /// Why the "Continue as" step cannot issue a code.
    public enum ContinueFailure: Error, Sendable, Equatable {
        /// The browser is no longer signed in as the user the page showed (its session ended, another
        /// user signed in since, or the request asks for a new proof): the sign-in form instead.
        case notSignedIn
    }

    /// The "Continue as" step (a public client and a signed-in browser): the user confirmed, so the
    /// waiting request is answered with a code for the browser's session, which must still be
    /// `sessionId` (the one the page showed), live and fresh enough for the request. One transaction,
    /// the request locked, as `complete`. Answers the code, for the resume step.
    public func continueSignedIn(app: App, reference: String, browserKey: String?, browserToken: String?, sessionId: UUID) async throws -> String {
        guard let browser = try await signedInBrowser(app: app, token: browserToken), browser.sessionId == sessionId else {
            throw ContinueFailure.notSignedIn
        }
        return try await client.transaction(logger: logger) { db in
            let pending = try await pending(db, app: app, reference: reference, browserKey: browserKey, lock: true)
            guard pending.request.prompt != .login, Self.isFresh(browser.proof, maxAge: pending.request.maxAge),
                let (user, proof) = try await SessionStore.liveUser(db, sessionId: browser.sessionId, appRef: app.ref, userId: browser.user.id, logger: logger),
                user.status == .active
            else { throw ContinueFailure.notSignedIn }
            let code = try await issueCode(
                db, app: app, client: pending.client, request: pending.request, sessionId: browser.sessionId, userId: user.id,
                authTime: proof.at, amr: Self.amr(proof, app: app))
            try await OAuthRequestStore.answer(db, handleHash: Secrets.sha256(reference), codeHashHex: Hex.encode(Secrets.sha256(code)), logger: logger)
            return code
        }
    }

    /// The redirect to the client for an answered request, once: `code` must be its answer, and
    /// `browserKey` the binding key of the browser that started the request. A resume URL opened in
    /// another browser (or without the cookie) is refused with `PendingFailure.otherBrowser`, and the
    /// request stays for its own browser (the transaction rolls back).
    public func resume(app: App, reference: String, code: String, browserKey: String?) async throws -> String? {
        guard !reference.isEmpty, reference.utf8.count <= 100, !code.isEmpty, code.utf8.count <= 100 else { return nil }
        let row = try await client.transaction(logger: logger) { db in
            let row = try await OAuthRequestStore.takeAnswered(
                db, handleHash: Secrets.sha256(reference), appRef: app.ref, codeHashHex: Hex.encode(Secrets.sha256(code)), logger: logger)
            if let row {
                guard let browserKey, let bound = row.params["_binding"].flatMap(Hex.decode),
                    Secrets.constantTimeEquals(Secrets.sha256(browserKey), bound)
                else { throw PendingFailure.otherBrowser }
            }
            return row
        }
        guard let row, let redirectURI = row.params["redirect_uri"] else { return nil }
        return AuthorizationRules.redirect(redirectURI, [("code", code), ("state", row.params["state"]), ("iss", oauth.issuer(appId: app.appId))])
    }

    // MARK: browser sessions

    /// The browser session of cookie value `token`: its session must be live and its user active.
    public func signedInBrowser(app: App, token: String?) async throws -> SignedInBrowser? {
        guard let token, !token.isEmpty, token.utf8.count <= 100 else { return nil }
        return try await client.withConnection { db -> SignedInBrowser? in
            guard let found = try await OAuthBrowserSessionStore.find(db, tokenHash: Secrets.sha256(token), appRef: app.ref, logger: logger),
                let (user, proof) = try await SessionStore.liveUser(db, sessionId: found.sessionId, appRef: app.ref, userId: found.userId, logger: logger),
                user.status == .active
            else { return nil }
            return SignedInBrowser(sessionId: found.sessionId, user: user, proof: proof)
        }
    }
}
