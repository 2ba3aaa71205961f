import Foundation
import Logging
import PostgresNIO

/// What the issuer answers about its own tokens (<doc:OAuth> §7): revocation (RFC 7009),
/// introspection (RFC 7662) and userinfo (OpenID Connect Core §5.3). An access token counts only
/// while its session is live, its user active and its client still holds a grant on the session, so
/// every revocation of the end-user API (password change, sign out everywhere, suspension, detach)
/// ends it here at once, whatever its `exp` says.
public struct OAuthResourceAccess: Sendable {
    let oauth: OAuthServices

    var logger: Logger { oauth.logger }

    /// A token this server's refresh tokens cannot be confused with: an access token is a JWT.
    static func isJWT(_ token: String) -> Bool { token.split(separator: ".", omittingEmptySubsequences: false).count == 3 }

    // MARK: revocation (RFC 7009)

    /// Revokes `token` for `client`: a refresh token ends its grant (the whole family and the access
    /// tokens it gave); an access token ends the grant its client holds on its session. A token that
    /// is unknown, malformed, already dead or another client's changes nothing, and the answer is the
    /// same (RFC 7009 §2.2). A client_credentials access token (no session) is not revocable: it
    /// lives until its short `exp`.
    public func revoke(app: App, client registered: OAuthClient, token: String) async throws(OAuthError) {
        guard !token.isEmpty, token.utf8.count <= 8192 else { return }
        do {
            if Self.isJWT(token) {
                guard let claims = await oauth.tokens.verifyOAuthAccessToken(
                    token, appRef: app.ref, issuer: oauth.issuer(appId: app.appId), allowExpired: true),
                    claims["client_id"]?.stringValue == registered.clientId,
                    let sid = claims["sid"]?.stringValue.flatMap(UUID.init(uuidString:))
                else { return }
                _ = try await oauth.client.withConnection { db in
                    try await OAuthGrantStore.deleteHeld(db, clientRef: registered.ref, sessionId: sid, logger: logger)
                }
            } else {
                try await oauth.client.withConnection { db in
                    guard let status = try await OAuthRefreshTokenStore.status(
                        db, appRef: app.ref, tokenHash: Secrets.sha256(token), logger: logger),
                        status.grant.clientRef == registered.ref
                    else { return }
                    try await OAuthGrantStore.delete(db, appRef: app.ref, ref: status.grant.ref, logger: logger)
                }
            }
        } catch {
            logger.error("revocation failed", metadata: ["error": "\(String(reflecting: error))"])
            throw .serverError()
        }
    }

    // MARK: introspection (RFC 7662)

    /// What the app's confidential clients may learn of a token: `{"active": false}` for anything not
    /// live, else its claims (`token_type` is `Bearer`/`DPoP` for an access token, `refresh_token`
    /// for a refresh token; `cnf.jkt` when bound).
    public func introspect(app: App, client registered: OAuthClient, token: String) async throws(OAuthError) -> [String: JSONValue] {
        guard registered.kind == .confidential else {
            throw .invalidClient("introspection is for the app's confidential clients", challenge: nil)
        }
        let inactive: [String: JSONValue] = ["active": .bool(false)]
        guard !token.isEmpty, token.utf8.count <= 8192 else { return inactive }
        do {
            let issuer = oauth.issuer(appId: app.appId)
            if Self.isJWT(token) {
                guard app.status == .active, let (claims, _) = try await liveAccessToken(token, app: app) else { return inactive }
                var answer = claims
                answer["active"] = .bool(true)
                answer["token_type"] = .string(claims["cnf"] == nil ? "Bearer" : "DPoP")
                return answer
            }
            let found = try await oauth.client.withConnection { db in
                try await OAuthRefreshTokenStore.status(db, appRef: app.ref, tokenHash: Secrets.sha256(token), logger: logger)
            }
            guard app.status == .active, let status = found, status.active else { return inactive }
            var answer: [String: JSONValue] = [
                "active": .bool(true), "token_type": .string("refresh_token"), "scope": .string(status.grant.scope),
                "client_id": .string(status.clientId), "sub": .string(status.grant.userId.uuidString.lowercased()), "iss": .string(issuer),
                "iat": .int(Int(status.issuedAt.timeIntervalSince1970)), "exp": .int(Int(status.expiresAt.timeIntervalSince1970)),
                "sid": .string(status.grant.sessionId.uuidString.lowercased()),
                "auth_time": .int(Int(status.grant.authTime.timeIntervalSince1970)),
            ]
            if let jkt = status.grant.dpopJKT { answer["cnf"] = .object(["jkt": .string(jkt)]) }
            return answer
        } catch {
            logger.error("introspection failed", metadata: ["error": "\(String(reflecting: error))"])
            throw .serverError()
        }
    }

    /// The claims of an access token of `app` that is live now: signed by the app, unexpired, and
    /// (with a session) its session live, its user active and its client's grant held, with the user;
    /// without a session (client_credentials), its client still registered, and no user.
    func liveAccessToken(_ token: String, app: App) async throws -> (claims: [String: JSONValue], user: User?)? {
        guard let claims = await oauth.tokens.verifyOAuthAccessToken(token, appRef: app.ref, issuer: oauth.issuer(appId: app.appId)),
            let clientId = claims["client_id"]?.stringValue, let subject = claims["sub"]?.stringValue
        else { return nil }
        guard let sidText = claims["sid"]?.stringValue else {
            guard subject == clientId, try await oauth.clients.find(app: app, clientId: clientId) != nil else { return nil }
            return (claims, nil)
        }
        guard let sid = UUID(uuidString: sidText), let userId = UUID(uuidString: subject),
            let gid = claims["gid"]?.stringValue.flatMap(UUID.init(uuidString:)),
            let user = try await oauth.client.withConnection({ db in
                try await OAuthGrantStore.liveUser(
                    db, appRef: app.ref, sessionId: sid, userId: userId, clientId: clientId, grantId: gid, logger: logger)
            })
        else { return nil }
        return (claims, user)
    }

    // MARK: userinfo (OpenID Connect Core §5.3)

    /// An access token as a resource request presents it.
    public struct Presented: Sendable {
        /// `Bearer` or `DPoP` (RFC 9449 §7.1), as the `Authorization` header named it.
        public var scheme: String
        public var token: String
        /// The `DPoP` header.
        public var proof: String?
        /// The request's method and URL (the proof's `htm` and `htu`).
        public var method: String
        public var url: String

        public init(scheme: String, token: String, proof: String?, method: String, url: String) {
            self.scheme = scheme
            self.token = token
            self.proof = proof
            self.method = method
            self.url = url
        }
    }

    /// The user's claims for a live access token with the `openid` scope: `sub` and what its scopes
    /// allow (`OAuthTokenClaims.userClaims`). A DPoP-bound token (`cnf.jkt`) must come with the `DPoP`
    /// scheme and a proof by that key over this request and this token (`ath`); a bearer token must
    /// not use the `DPoP` scheme.
    public func userinfo(app: App, _ presented: Presented) async throws(OAuthError) -> [String: JSONValue] {
        let scheme = presented.scheme.lowercased() == "dpop" ? "DPoP" : "Bearer"
        let live: (claims: [String: JSONValue], user: User?)?
        do { live = try await liveAccessToken(presented.token, app: app) } catch {
            logger.error("userinfo failed", metadata: ["error": "\(String(reflecting: error))"])
            throw .serverError()
        }
        guard app.status == .active, let (claims, found) = live, let user = found else {
            throw .invalidToken("the access token is not live", challenge: scheme)
        }
        if let jkt = claims["cnf"]?["jkt"]?.stringValue {
            guard scheme == "DPoP" else { throw .invalidToken("this access token is DPoP-bound: use the DPoP scheme", challenge: "DPoP") }
            let proven = try await oauth.dpop.verify(
                presented.proof, expecting: .init(method: presented.method, url: presented.url, accessToken: presented.token), appRef: app.ref)
            guard proven == jkt else {
                var error = OAuthError.invalidToken("a DPoP proof by the token's key is required", challenge: "DPoP")
                error.dpopNonce = oauth.dpop.currentNonce(appRef: app.ref)
                throw error
            }
        } else if scheme == "DPoP" {
            throw .invalidToken("this access token is not DPoP-bound: use the Bearer scheme", challenge: "Bearer")
        }
        let scopes = claims["scope"]?.stringValue.flatMap(OAuthTokenEndpoint.scopes) ?? []
        guard scopes.contains("openid") else {
            var error = OAuthError("insufficient_scope", "userinfo needs the openid scope", status: 403)
            error.challenge = scheme
            throw error
        }
        return OAuthTokenClaims.userClaims(user: user, app: app, scopes: scopes)
    }
}

extension OAuthServices {
    /// Revocation, introspection and userinfo (<doc:OAuth> §7).
    public var resources: OAuthResourceAccess { OAuthResourceAccess(oauth: self) }
}
