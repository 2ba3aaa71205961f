import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Signing in through an app's upstream OpenID provider (<doc:OAuth> §8):
///
/// - **On the hosted page.** `start` keeps `state`, `nonce` and a PKCE verifier server-side (keyed by
///   the SHA-256 of `state`, tied to the browser's binding cookie) and answers where to send the
///   browser: the provider's authorization endpoint, with the code flow, S256 and the app's one
///   redirect URI `I/oauth/upstream/callback`. `callback` takes that row once, checks it belongs to the
///   same browser, exchanges the code at the provider's token endpoint with the verifier, and checks the
///   ID token it got: signature from the provider's JWK set, `iss`, `aud` (the client id; `azp` when
///   there are several), `exp`, `iat`, `nonce`, `sub`.
/// - **From a native app** (`exchange`, the token endpoint's RFC 8693 branch with subject_token_type
///   `urn:ietf:params:oauth:token-type:id_token`): an ID token the app got from the provider itself. Its
///   `iss` picks the provider among the app's; `aud` must name the provider's client id or one of its
///   `audiences`; `exp` and `iat` as above; there is no nonce of ours to check.
///
/// Either way the identity is `oidc` with subject `<issuer>|<sub>`, and the account rule is
/// `VouchedSignIn`'s: no account ever joins another by e-mail. The handle of a new account is the
/// provider's e-mail only when the ID token says `email_verified: true`.
public struct UpstreamSignIn: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let http: HTTPClient
    let keySets: RemoteKeySets
    let signIns: VouchedSignIn
    let redirectURI: @Sendable (App) -> String
    let logger: Logger

    /// How long a started sign-in waits for the provider's answer.
    public static let loginLifetimeSeconds = 600
    /// Sign-ins one client address may start per app in 10 minutes.
    public static let startsPerAddress = 60
    /// Clock skew allowed on every time check of an ID token.
    static let leeway: Int64 = 60
    /// How old the ID token of a hosted-page sign-in may be (it was just issued for us).
    static let maxCallbackAge: Int64 = 600

    public typealias Result = (user: User, sessionId: UUID, authTime: Date, amr: [String])

    // MARK: the hosted page

    /// Where to send the browser for `providerId`, after keeping the sign-in's secrets. `requestRef` is
    /// the hosted page's waiting request and `browserKey` the binding cookie it is bound to (the HTTP
    /// layer checks that pairing with `OAuthAuthorization.pending` first).
    public func start(app: App, providerId: UUID, requestRef: String, browserKey: String, origin: ClientOrigin) async throws(OAuthError) -> String {
        guard app.status == .active else { throw .accessDenied("the app is not active") }
        guard !requestRef.isEmpty, requestRef.utf8.count <= 512 else { throw .invalidRequest("the waiting request is missing") }
        let state = Base64URL.encode(Secrets.randomBytes(32))
        let nonce = Base64URL.encode(Secrets.randomBytes(32))
        let verifier = Base64URL.encode(Secrets.randomBytes(32))
        let challenge = Base64URL.encode(SHA256.hash(data: Data(verifier.utf8)))
        let provider: UpstreamProvider
        do {
            provider = try await client.transaction(logger: logger) { db in
                guard let provider = try await OAuthUpstreamProviderStore.find(db, appRef: app.ref, id: providerId, logger: logger), provider.enabled
                else { throw OAuthError.invalidRequest("no such provider") }
                let address = origin.address ?? "-"
                guard try await ThrottleStore.take(
                    db, appRef: app.ref, subject: "upstream-start:\(address)", limit: Self.startsPerAddress, windowSeconds: 600, logger: logger)
                else { throw OAuthError.slowDown(retryAfter: 600) }
                try await OAuthUpstreamLoginStore.insert(
                    db, stateHash: Secrets.sha256(state), appRef: app.ref, providerRef: provider.id, browserHash: Secrets.sha256(browserKey),
                    requestRef: requestRef, nonce: nonce, codeVerifier: verifier, lifetimeSeconds: Self.loginLifetimeSeconds, logger: logger)
                return provider
            }
        } catch let error as OAuthError {
            throw error
        } catch {
            logger.error("starting an upstream sign-in failed", metadata: ["app": "\(app.appId)", "error": "\(error)"])
            throw .serverError()
        }
        return AuthorizationRules.redirect(provider.authorizationEndpoint, [
            ("response_type", "code"), ("client_id", provider.clientId), ("redirect_uri", redirectURI(app)),
            ("scope", provider.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce), ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
        ])
    }

    /// What the callback ends with: the waiting request the sign-in belongs to (nil when the state is
    /// unknown, expired, used, or from another browser: nothing may continue then), and the sign-in or
    /// why it failed.
    public struct Callback: Sendable {
        public let requestRef: String?
        public let outcome: Swift.Result<Result, OAuthError>
    }

    /// Answers the provider's redirect (its query `parameters`) for the browser holding `browserKey`.
    public func callback(app: App, parameters: [String: String], browserKey: String?, origin: ClientOrigin) async -> Callback {
        guard let state = parameters["state"], !state.isEmpty, state.utf8.count <= 256 else {
            return Callback(requestRef: nil, outcome: .failure(.invalidRequest("the provider's answer has no state")))
        }
        let row: OAuthUpstreamLoginStore.Row?
        do {
            row = try await client.withConnection { try await OAuthUpstreamLoginStore.take($0, stateHash: Secrets.sha256(state), appRef: app.ref, logger: logger) }
        } catch {
            logger.error("reading an upstream sign-in failed", metadata: ["app": "\(app.appId)", "error": "\(error)"])
            return Callback(requestRef: nil, outcome: .failure(.serverError()))
        }
        guard let row else {
            return Callback(requestRef: nil, outcome: .failure(.invalidRequest("this sign-in is unknown, expired or already finished")))
        }
        guard let browserKey, Secrets.constantTimeEquals(Secrets.sha256(browserKey), row.browserHash) else {
            return Callback(requestRef: nil, outcome: .failure(.invalidRequest("this sign-in was started in another browser")))
        }
        do {
            return Callback(requestRef: row.requestRef, outcome: .success(try await finish(app: app, row: row, parameters: parameters, origin: origin)))
        } catch {
            return Callback(requestRef: row.requestRef, outcome: .failure(error))
        }
    }

    func finish(app: App, row: OAuthUpstreamLoginStore.Row, parameters: [String: String], origin: ClientOrigin) async throws(OAuthError) -> Result {
        let provider = try await provider(app: app, id: row.providerRef)
        if let error = parameters["error"] {
            let said = SignedJWT.isPlainText(error, max: 64) ? error : "an error"
            throw .accessDenied("the provider answered \(said)")
        }
        // RFC 9207: a provider that names itself must name the provider this sign-in went to.
        if let iss = parameters["iss"], iss != provider.issuer { throw .invalidRequest("the answer comes from another issuer") }
        guard let code = parameters["code"], !code.isEmpty, code.utf8.count <= 2048 else { throw .invalidRequest("the provider's answer has no code") }
        let idToken = try await redeem(code: code, verifier: row.codeVerifier, provider: provider, app: app)
        let claims = try await verifyIDToken(idToken, provider: provider, audiences: [provider.clientId], nonce: row.nonce, maxAge: Self.maxCallbackAge)
        return try await signIns.signIn(
            app: app, vouched(provider, claims), method: .oidc, amr: OAuthAuthorization.amr(.oidc, app: app), origin: origin)
    }

    func provider(app: App, id: UUID) async throws(OAuthError) -> UpstreamProvider {
        let found: UpstreamProvider?
        do {
            found = try await client.withConnection { try await OAuthUpstreamProviderStore.find($0, appRef: app.ref, id: id, logger: logger) }
        } catch {
            throw .serverError()
        }
        guard let found, found.enabled else { throw .accessDenied("the provider is no longer offered") }
        return found
    }

    /// The authorization code at the provider's token endpoint (RFC 6749 §4.1.3, RFC 7636): its ID token.
    func redeem(code: String, verifier: String, provider: UpstreamProvider, app: App) async throws(OAuthError) -> String {
        if let refusal = FetchableURL.refusal(provider.tokenEndpoint) {
            logger.warning("upstream token endpoint refused", metadata: ["reason": "\(refusal)"])
            throw .serverError("the provider's token endpoint cannot be reached")
        }
        var form: [(String, String?)] = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI(app)), ("code_verifier", verifier),
        ]
        var request = HTTPClientRequest(url: provider.tokenEndpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        let secret: String?
        do {
            secret = try provider.clientSecretSealed.map { try box.openString($0, purpose: .upstreamClientSecret(provider.id)) }
        } catch {
            logger.error("an upstream client secret does not open", metadata: ["provider": "\(provider.id)"])
            throw .serverError()
        }
        switch provider.tokenAuthMethod {
        case .clientSecretBasic:
            // RFC 6749 §2.3.1: both parts form-encoded, then base64.
            let pair = AuthorizationRules.formEncode(provider.clientId) + ":" + AuthorizationRules.formEncode(secret ?? "")
            request.headers.add(name: "Authorization", value: "Basic " + Data(pair.utf8).base64EncodedString())
        case .clientSecretPost:
            form += [("client_id", provider.clientId), ("client_secret", secret)]
        case .none:
            form.append(("client_id", provider.clientId))
        }
        request.body = .bytes(ByteBuffer(string: String(AuthorizationRules.redirect("", form).dropFirst())))
        let answer: [String: JSONValue]
        do {
            let response = try await GuardedFetch.send(request, outbound: keySets.outbound, maxBytes: 256 * 1024)
            let body = response.body
            guard let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(body.readableBytesView)))?.objectValue else {
                throw OAuthError.accessDenied("the provider's token endpoint answered HTTP \(response.status) without JSON")
            }
            guard response.status == 200 else {
                let said = object["error"]?.stringValue.flatMap { SignedJWT.isPlainText($0, max: 64) ? $0 : nil } ?? "HTTP \(response.status)"
                throw OAuthError.accessDenied("the provider refused the code (\(said))")
            }
            answer = object
        } catch let error as OAuthError {
            throw error
        } catch {
            logger.warning("upstream token request failed", metadata: ["provider": "\(provider.id)", "error": "\(type(of: error))"])
            throw .temporarilyUnavailable("the provider's token endpoint did not answer")
        }
        guard let idToken = answer["id_token"]?.stringValue else { throw .accessDenied("the provider answered no ID token (is openid among the scopes?)") }
        return idToken
    }

    // MARK: a native app's ID token (RFC 8693)

    /// Signs in the user of `idToken`, an ID token a native app of `oauthClient`'s app got from one of
    /// the app's upstream providers (`iss` picks it). For the token endpoint's token-exchange branch.
    public func exchange(
        app: App, client oauthClient: OAuthClient, idToken: String, origin: ClientOrigin
    ) async throws(OAuthError) -> Result {
        guard oauthClient.appRef == app.ref else { throw .invalidClient("unknown client") }
        guard let jwt = SignedJWT(idToken), let issuer = jwt.string("iss"), SignedJWT.isPlainText(issuer, max: 512) else {
            throw .invalidGrant("subject_token must be an ID token signed with \(SignedJWT.algorithms.joined(separator: ", "))")
        }
        let found: UpstreamProvider?
        do {
            found = try await client.withConnection { try await OAuthUpstreamProviderStore.find($0, appRef: app.ref, issuer: issuer, logger: logger) }
        } catch {
            throw .serverError()
        }
        guard let provider = found, provider.enabled else { throw .invalidGrant("the ID token's issuer is not an upstream provider of this app") }
        let claims = try await verifyIDToken(idToken, provider: provider, audiences: [provider.clientId] + provider.audiences, nonce: nil, maxAge: nil)
        return try await signIns.signIn(
            app: app, vouched(provider, claims, clientId: oauthClient.clientId), method: .oidc, amr: OAuthAuthorization.amr(.oidc, app: app),
            origin: origin)
    }

    // MARK: the ID token

    /// What a checked ID token says.
    struct Claims: Sendable {
        let subject: String
        /// Only when `email_verified` is true.
        let verifiedEmail: String?
    }

    /// Checks an ID token of `provider` (OpenID Connect Core §3.1.3.7): signature by a key of its JWK
    /// set, `iss`, `aud` among `audiences` (and `azp` one of them when there are several audiences),
    /// `exp` not past, `iat` present, not ahead, and at most `maxAge` old when given, `nonce` when
    /// expected, `sub` 1-255 characters.
    func verifyIDToken(
        _ token: String, provider: UpstreamProvider, audiences: [String], nonce: String?, maxAge: Int64?, now: Date = Date()
    ) async throws(OAuthError) -> Claims {
        let refuse = { (why: String) -> OAuthError in nonce == nil ? .invalidGrant(why) : .accessDenied(why) }
        guard let jwt = SignedJWT(token) else { throw refuse("the ID token must be signed with \(SignedJWT.algorithms.joined(separator: ", "))") }
        guard jwt.string("iss") == provider.issuer else { throw refuse("the ID token comes from another issuer") }
        let keys = await keySets.keys(url: provider.jwksURI, kid: jwt.kid, logger: logger) ?? []
        let candidates = keys.filter { (jwt.kid == nil || $0["kid"] == nil || $0["kid"]?.stringValue == jwt.kid) && PublicJWK.algorithms(of: $0).contains(jwt.algorithm) }
        var verified = false
        for key in candidates.prefix(20) where await jwt.verifies(with: key) {
            verified = true
            break
        }
        guard verified else { throw refuse("the ID token's signature does not verify with the provider's keys") }
        let named = jwt.audiences
        guard named.contains(where: audiences.contains) else { throw refuse("the ID token is not for this app (aud)") }
        if named.count > 1 || jwt.claims["azp"] != nil {
            guard let azp = jwt.string("azp"), audiences.contains(azp) else { throw refuse("the ID token's azp is not this app") }
        }
        let clock = Int64(now.timeIntervalSince1970.rounded(.down))
        guard case .seconds(let exp) = jwt.numericDate("exp") else { throw refuse("the ID token needs exp, a number") }
        guard exp > clock - Self.leeway else { throw refuse("the ID token has expired") }
        guard case .seconds(let iat) = jwt.numericDate("iat") else { throw refuse("the ID token needs iat, a number") }
        guard iat <= clock + Self.leeway else { throw refuse("the ID token's iat is in the future") }
        if let maxAge { guard iat >= clock - maxAge else { throw refuse("the ID token is too old") } }
        if let nonce {
            guard let said = jwt.string("nonce"), Secrets.constantTimeEquals(Data(said.utf8), Data(nonce.utf8)) else {
                throw refuse("the ID token's nonce is not this sign-in's")
            }
        }
        guard let sub = jwt.string("sub"), SignedJWT.isPlainText(sub, max: 255) else { throw refuse("the ID token needs sub") }
        let verifiedEmail: Bool
        switch jwt.claims["email_verified"] {
        case .bool(let flag)?: verifiedEmail = flag
        case .string(let text)?: verifiedEmail = text.lowercased() == "true"
        default: verifiedEmail = false
        }
        return Claims(subject: sub, verifiedEmail: verifiedEmail ? jwt.string("email") : nil)
    }

    func vouched(_ provider: UpstreamProvider, _ claims: Claims, clientId: String? = nil) -> VouchedSignIn.Vouched {
        var detail: [String: JSONValue] = ["providerId": .string(provider.id.uuidString.lowercased()), "issuer": .string(provider.issuer)]
        if let clientId { detail["clientId"] = .string(clientId) }
        return VouchedSignIn.Vouched(kind: .oidc, subject: provider.issuer + "|" + claims.subject, email: claims.verifiedEmail, detail: detail)
    }
}

extension OAuthServices {
    /// Signing in through the app's upstream OpenID providers (the hosted page, and ID-token exchange).
    public var upstreamSignIn: UpstreamSignIn {
        let oauth = self
        return UpstreamSignIn(
            client: client, box: box, http: .shared, keySets: remoteKeys,
            signIns: VouchedSignIn(client: client, sessions: SessionGrant(tokens: tokens, logger: logger), logger: logger),
            redirectURI: { app in oauth.upstreamRedirectURI(appId: app.appId) }, logger: logger)
    }
}
