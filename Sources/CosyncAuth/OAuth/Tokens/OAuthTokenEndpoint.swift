import Crypto
import Foundation
import Logging
import PostgresNIO

/// A request to the token endpoint, after its client authenticated.
public struct OAuthTokenRequest: Sendable {
    /// The form parameters (`grant_type`, `code`, `refresh_token`, …).
    public var fields: [String: String]
    /// The `DPoP` header, when one came (RFC 9449).
    public var dpopProof: String?
    /// Where the request comes from, for a session a grant opens (JWT-bearer, upstream ID token).
    public var origin: ClientOrigin

    public init(fields: [String: String], dpopProof: String?, origin: ClientOrigin = ClientOrigin(address: nil, userAgent: nil)) {
        self.fields = fields
        self.dpopProof = dpopProof
        self.origin = origin
    }
}

/// What the token endpoint answers (RFC 6749 §5.1, RFC 8693 §2.2.1).
public struct OAuthTokenResponse: Sendable, Equatable {
    public let accessToken: String
    /// `Bearer`, or `DPoP` when the access token is bound to a key.
    public let tokenType: String
    public let expiresIn: Int
    public let refreshToken: String?
    public let idToken: String?
    public let scope: String
    /// Token exchange only: what `access_token` is.
    public let issuedTokenType: String?
}

/// The token endpoint of an app's issuer (<doc:OAuth> §4, §5): one method per grant type, chosen by
/// a plain switch on `grant_type`. Every grant that stands for a user works on a session of the
/// end-user API: it locks the user row, then the session, then its own rows (the order every
/// revocation takes), and the tokens it answers name that session (`sid`).
public struct OAuthTokenEndpoint: Sendable {
    let oauth: OAuthServices

    var client: PostgresClient { oauth.client }
    var logger: Logger { oauth.logger }

    /// The scopes that stand for a user; a client_credentials token (no user) may not ask for them.
    static let userScopes: Set<String> = Set(OAuthClient.standardScopes)
    /// A refresh token: 256 random bits with a prefix that secret scanners can recognise.
    static let refreshTokenPrefix = "crt_"

    /// Answers a token request of `client` (already authenticated, `OAuthClients.authenticate`).
    public func token(app: App, client registered: OAuthClient, _ request: OAuthTokenRequest) async throws(OAuthError) -> OAuthTokenResponse {
        do {
            guard app.status == .active else { throw OAuthError.unauthorizedClient("the app is not active") }
            guard let name = request.fields["grant_type"], !name.isEmpty else { throw OAuthError.invalidRequest("grant_type is missing") }
            guard let grant = OAuthGrantType(rawValue: name) else { throw OAuthError.unsupportedGrantType("this grant type is not supported") }
            guard registered.allows(grant) else { throw OAuthError.unauthorizedClient("this client may not use \(grant.rawValue)") }
            switch grant {
            case .authorizationCode: return try await authorizationCode(app: app, client: registered, request)
            case .refreshToken: return try await refresh(app: app, client: registered, request)
            case .clientCredentials: return try await clientCredentials(app: app, client: registered, request)
            case .tokenExchange: return try await tokenExchange(app: app, client: registered, request)
            case .jwtBearer: return try await jwtBearer(app: app, client: registered, request)
            }
        } catch let error as OAuthError {
            throw error
        } catch {
            logger.error("token endpoint failed", metadata: ["error": "\(String(reflecting: error))"])
            throw .serverError()
        }
    }

    // MARK: authorization_code (RFC 6749 §4.1.3, RFC 7636 §4.6)

    /// What a transaction decided: tokens to sign after it commits, or a refusal. A refusal that
    /// changed something (a spent code, a revoked grant, a revoked session) still commits.
    enum Decision: Sendable {
        case issue(Issuance)
        case refuse(OAuthError)
    }

    /// Everything needed to sign the answer once the transaction committed.
    struct Issuance: Sendable {
        var user: User
        var grant: OAuthGrant
        /// The scope of this access token (a refresh may narrow the grant's).
        var scope: String
        var refreshToken: String?
        var nonce: String?
        /// The key the access token is bound to (the grant's, or this request's proof).
        var jkt: String?
    }

    func authorizationCode(app: App, client registered: OAuthClient, _ request: OAuthTokenRequest) async throws -> OAuthTokenResponse {
        let fields = request.fields
        guard let code = fields["code"], !code.isEmpty, code.utf8.count <= 512 else { throw OAuthError.invalidRequest("code is missing") }
        guard let redirectURI = fields["redirect_uri"], !redirectURI.isEmpty else { throw OAuthError.invalidRequest("redirect_uri is missing") }
        guard let verifier = fields["code_verifier"] else { throw OAuthError.invalidRequest("code_verifier is missing (PKCE is required)") }
        guard CodeVerifier.isWellFormed(verifier) else {
            throw OAuthError.invalidRequest("code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~")
        }
        let resource = try Self.resource(fields)
        let jkt = try await proofKey(request, app: app, client: registered)
        let codeHash = Secrets.sha256(code)
        let (oauth, logger) = (oauth, logger)
        let decision: Decision = try await client.transaction(logger: logger) { db in
            // The user and the session first (the order revocations lock them), then the code.
            guard let owner = try await OAuthGrantStore.codeOwner(db, appRef: app.ref, codeHash: codeHash, logger: logger) else {
                return .refuse(.invalidGrant("the code is invalid or expired"))
            }
            let user = try await UserStore.lockExisting(db, appRef: app.ref, userId: owner.userId, logger: logger)
            let proof = try await SessionStore.lockLive(db, sessionId: owner.sessionId, appRef: app.ref, userId: owner.userId, logger: logger)
            switch try await OAuthCodeStore.redeem(db, appRef: app.ref, codeHash: codeHash, logger: logger) {
            case .unknown:
                return .refuse(.invalidGrant("the code is invalid or expired"))
            case .reused(let grantRef, _):
                // RFC 6749 §4.1.2: a code used twice revokes what its first use gave.
                if let grantRef { try await OAuthGrantStore.delete(db, appRef: app.ref, ref: grantRef, logger: logger) }
                return .refuse(.invalidGrant("the code was already used; the tokens it gave are revoked"))
            case .redeemed(let c):
                guard c.clientRef == registered.ref else { return .refuse(.invalidGrant("the code was issued to another client")) }
                guard c.redirectURI == redirectURI else { return .refuse(.invalidGrant("redirect_uri does not match the authorization request")) }
                guard CodeVerifier.matches(verifier, challenge: c.codeChallenge) else {
                    return .refuse(.invalidGrant("code_verifier does not match the code_challenge"))
                }
                if let bound = c.dpopJKT, bound != jkt {
                    return .refuse(.invalidGrant("the code is bound to a DPoP key: send a proof signed with it"))
                }
                guard let user, user.status == .active, proof != nil else {
                    return .refuse(.invalidGrant("the sign-in behind this code has ended"))
                }
                let (grant, refreshToken) = try await Self.openGrant(
                    db, oauth: oauth, app: app, client: registered, sessionId: c.sessionId, userId: c.userId, scope: c.scope, jkt: jkt,
                    authTime: c.authTime, amr: c.amr, logger: logger)
                try await OAuthCodeStore.attachGrant(db, codeHash: codeHash, grantRef: grant.ref, logger: logger)
                return .issue(Issuance(user: user, grant: grant, scope: c.scope, refreshToken: refreshToken, nonce: c.nonce, jkt: jkt))
            }
        }
        switch decision {
        case .refuse(let error): throw error
        case .issue(let issuance): return try await sign(issuance, app: app, client: registered, resource: resource, withNonce: true)
        }
    }

    /// Opens the grant `client` holds on a session (replacing an older one of the same client there),
    /// extends the session to the grant's lifetime, and mints the first refresh token when the client
    /// may refresh. The caller holds the user row and the session.
    ///
    /// A refresh token is issued whenever the client's registration includes the `refresh_token`
    /// grant, whether or not `offline_access` was asked: the token lives and dies with the session,
    /// so it is never more "offline" than the sign-in itself, and native apps need it to stay signed in.
    static func openGrant(
        _ db: PostgresConnection, oauth: OAuthServices, app: App, client registered: OAuthClient, sessionId: UUID, userId: UUID, scope: String,
        jkt: String?, authTime: Date, amr: [String], logger: Logger
    ) async throws -> (OAuthGrant, String?) {
        let refreshes = registered.allows(.refreshToken)
        try await OAuthGrantStore.deleteHeld(db, clientRef: registered.ref, sessionId: sessionId, logger: logger)
        let grant = try await OAuthGrantStore.insert(
            db, appRef: app.ref, clientRef: registered.ref, sessionId: sessionId, userId: userId, scope: scope, dpopJKT: jkt, authTime: authTime,
            amr: amr, absoluteSeconds: refreshes ? registered.refreshAbsoluteSeconds : registered.accessTokenSeconds, logger: logger)
        try await SessionStore.extend(db, sessionId: sessionId, until: grant.absoluteExpiresAt, logger: logger)
        guard refreshes else { return (grant, nil) }
        let token = Secrets.token(prefix: refreshTokenPrefix)
        _ = try await OAuthRefreshTokenStore.insert(
            db, tokenHash: Secrets.sha256(token), grantRef: grant.ref, slidingSeconds: registered.refreshSlidingSeconds,
            absoluteExpiresAt: grant.absoluteExpiresAt, logger: logger)
        return (grant, token)
    }

    // MARK: client_credentials (RFC 6749 §4.4)

    /// A confidential client for itself: `sub` is its client id, no session, no refresh token, no ID
    /// token. Scopes are the client's own (never the user scopes).
    func clientCredentials(app: App, client registered: OAuthClient, _ request: OAuthTokenRequest) async throws -> OAuthTokenResponse {
        guard registered.kind == .confidential else { throw OAuthError.unauthorizedClient("client_credentials is for confidential clients") }
        let allowed = registered.scopes.filter { !Self.userScopes.contains($0) }
        let scopes: [String]
        if let asked = request.fields["scope"] {
            guard let parsed = Self.scopes(asked), parsed.allSatisfy(allowed.contains) else {
                throw OAuthError.invalidScope("a client_credentials token may carry only the client's own registered scopes")
            }
            scopes = parsed
        } else {
            scopes = allowed
        }
        let resource = try Self.resource(request.fields)
        let jkt = try await proofKey(request, app: app, client: registered)
        let scope = scopes.joined(separator: " ")
        let claims = OAuthTokenClaims.accessToken(
            issuer: oauth.issuer(appId: app.appId), subject: registered.clientId, audience: resource ?? registered.clientId,
            clientId: registered.clientId, scope: scope, lifetime: registered.accessTokenSeconds, sessionId: nil, authTime: nil, jkt: jkt,
            now: Date())
        let token = try await oauth.tokens.signOAuthToken(claims, type: TokenIssuer.accessTokenType, appRef: app.ref)
        return OAuthTokenResponse(
            accessToken: token, tokenType: jkt == nil ? "Bearer" : "DPoP", expiresIn: registered.accessTokenSeconds, refreshToken: nil,
            idToken: nil, scope: scope, issuedTokenType: nil)
    }

    // MARK: shared pieces

    /// Checks the request's DPoP proof for the token endpoint and answers its key (nil without one).
    /// A client registered with `dpopRequired` must send one.
    func proofKey(_ request: OAuthTokenRequest, app: App, client registered: OAuthClient) async throws(OAuthError) -> String? {
        let url = oauth.endpoint(appId: app.appId, "/oauth/token")
        let jkt = try await oauth.dpop.verify(request.dpopProof, expecting: .init(method: "POST", url: url), appRef: app.ref)
        if jkt == nil && registered.dpopRequired {
            var error = OAuthError.invalidDPoPProof("this client must send a DPoP proof")
            error.dpopNonce = oauth.dpop.currentNonce(appRef: app.ref)
            throw error
        }
        return jkt
    }

    /// Signs the access token (and the ID token when the scope has `openid`) of a user grant.
    func sign(
        _ issuance: Issuance, app: App, client registered: OAuthClient, resource: String?, withNonce: Bool, issuedTokenType: String? = nil
    ) async throws -> OAuthTokenResponse {
        let now = Date()
        let issuer = oauth.issuer(appId: app.appId)
        let grant = issuance.grant
        let subject = issuance.user.id.uuidString.lowercased()
        let claims = OAuthTokenClaims.accessToken(
            issuer: issuer, subject: subject, audience: resource ?? registered.clientId, clientId: registered.clientId, scope: issuance.scope,
            lifetime: registered.accessTokenSeconds, sessionId: grant.sessionId, grantId: grant.ref, authTime: grant.authTime, jkt: issuance.jkt,
            now: now)
        let accessToken = try await oauth.tokens.signOAuthToken(claims, type: TokenIssuer.accessTokenType, appRef: app.ref)
        let scopes = Self.scopes(issuance.scope) ?? []
        var idToken: String?
        if scopes.contains("openid") {
            let idClaims = OAuthTokenClaims.idToken(
                issuer: issuer, user: issuance.user, app: app, clientId: registered.clientId, scopes: scopes, lifetime: registered.accessTokenSeconds,
                sessionId: grant.sessionId, authTime: grant.authTime, amr: grant.amr, nonce: withNonce ? issuance.nonce : nil,
                accessToken: accessToken, now: now)
            idToken = try await oauth.tokens.signOAuthToken(idClaims, type: "JWT", appRef: app.ref)
        }
        return OAuthTokenResponse(
            accessToken: accessToken, tokenType: issuance.jkt == nil ? "Bearer" : "DPoP", expiresIn: registered.accessTokenSeconds,
            refreshToken: issuance.refreshToken, idToken: idToken, scope: issuance.scope, issuedTokenType: issuedTokenType)
    }

    /// A space-separated scope list (RFC 6749 §3.3): nil when malformed (empty, a character outside
    /// %x21 / %x23-5B / %x5D-7E, more than 50 values or over 2 KiB). Duplicates are dropped.
    static func scopes(_ text: String) -> [String]? {
        guard text.utf8.count <= 2048 else { return nil }
        var seen: [String] = []
        for value in text.split(separator: " ", omittingEmptySubsequences: true) {
            guard value.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5B).contains($0) || (0x5D...0x7E).contains($0) }) else { return nil }
            if !seen.contains(String(value)) { seen.append(String(value)) }
        }
        return seen.isEmpty || seen.count > 50 ? nil : seen
    }

    /// The `resource` parameter (RFC 8707): an absolute URI without a fragment, which becomes the
    /// access token's `aud`; nil when absent.
    static func resource(_ fields: [String: String]) throws -> String? {
        guard let resource = fields["resource"] else { return nil }
        guard resource.utf8.count <= 2048, !resource.contains("#"), let parsed = URLComponents(string: resource),
            let scheme = parsed.scheme, !scheme.isEmpty, !(parsed.host ?? "").isEmpty
        else { throw OAuthError("invalid_target", "resource must be an absolute URI without a fragment") }
        return resource
    }
}

/// PKCE at the token endpoint (RFC 7636 §4.1, §4.6; S256 only).
enum CodeVerifier {
    /// 43 to 128 characters of the unreserved set.
    static func isWellFormed(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count)
            && verifier.utf8.allSatisfy { c in
                (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || c == 0x2D || c == 0x2E || c == 0x5F
                    || c == 0x7E
            }
    }

    /// Whether BASE64URL(SHA-256(verifier)) is the challenge, compared in constant time.
    static func matches(_ verifier: String, challenge: String) -> Bool {
        let computed = Base64URL.encode(SHA256.hash(data: Data(verifier.utf8)))
        return Secrets.constantTimeEquals(Data(computed.utf8), Data(challenge.utf8))
    }
}

extension OAuthServices {
    /// The token endpoint (<doc:OAuth> §4).
    public var tokenEndpoint: OAuthTokenEndpoint { OAuthTokenEndpoint(oauth: self) }
}
