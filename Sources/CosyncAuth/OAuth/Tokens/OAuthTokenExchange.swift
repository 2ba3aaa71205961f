import Foundation
import Logging
import PostgresNIO

// RFC 8693 token exchange (<doc:OAuth> §4): the migration path for apps on the Cosync SDKs. An app
// that holds an end-user access token of this server trades it for an OAuth token set on the SAME
// session, without a new sign-in.
extension OAuthTokenEndpoint {
    /// The token type URIs of RFC 8693 §3.
    public enum TokenTypeURI {
        public static let accessToken = "urn:ietf:params:oauth:token-type:access_token"
        public static let refreshToken = "urn:ietf:params:oauth:token-type:refresh_token"
        public static let idToken = "urn:ietf:params:oauth:token-type:id_token"
    }

    /// Dispatches on `subject_token_type` (today: an end-user access token of this server). Only
    /// impersonation (no `actor_token`); `requested_token_type` may be omitted or name an access or
    /// refresh token, and the answer is always an access token (`issued_token_type`), with a refresh
    /// token when the client may refresh.
    func tokenExchange(app: App, client registered: OAuthClient, _ request: OAuthTokenRequest) async throws -> OAuthTokenResponse {
        let fields = request.fields
        guard let subjectToken = fields["subject_token"], !subjectToken.isEmpty, subjectToken.utf8.count <= 8192 else {
            throw OAuthError.invalidRequest("subject_token is missing")
        }
        guard let subjectType = fields["subject_token_type"], !subjectType.isEmpty else {
            throw OAuthError.invalidRequest("subject_token_type is missing")
        }
        if let requested = fields["requested_token_type"], requested != TokenTypeURI.accessToken, requested != TokenTypeURI.refreshToken {
            throw OAuthError.invalidRequest("requested_token_type must be an access token or a refresh token")
        }
        guard fields["actor_token"] == nil, fields["actor_token_type"] == nil else {
            throw OAuthError.invalidRequest("delegation (actor_token) is not supported")
        }
        if let audience = fields["audience"], audience != registered.clientId {
            throw OAuthError("invalid_target", "audience may only name the client itself; use resource for an API")
        }
        switch subjectType {
        case TokenTypeURI.accessToken:
            return try await exchangeAccessToken(app: app, client: registered, request, subjectToken: subjectToken)
        case TokenTypeURI.idToken:
            return try await exchangeUpstreamIDToken(app: app, client: registered, request, subjectToken: subjectToken)
        default:
            throw OAuthError.invalidRequest("this subject_token_type is not supported")
        }
    }

    /// An end-user access token of this server (the one the Cosync SDKs hold), resolved exactly as
    /// the end-user API resolves its caller (`TenantResolver.caller`: signature, expiry, live session,
    /// user, app). It must name a session of this app: the grant is opened on that session, whose
    /// expiry moves out to the grant's. A token without a session (issued before sessions existed,
    /// or by the legacy server) cannot be exchanged: its user signs in again.
    func exchangeAccessToken(
        app: App, client registered: OAuthClient, _ request: OAuthTokenRequest, subjectToken: String
    ) async throws -> OAuthTokenResponse {
        let scope = try Self.requestedScope(request.fields, client: registered)
        let resource = try Self.resource(request.fields)
        let jkt = try await proofKey(request, app: app, client: registered)
        let resolver = TenantResolver(client: oauth.client, apps: oauth.apps, tokens: oauth.tokens, logger: logger)
        let caller: AuthenticatedCaller
        do {
            caller = try await resolver.caller(accessToken: subjectToken, whenMissing: .invalidAccessToken)
        } catch is EndUserError {
            throw OAuthError.invalidGrant("subject_token is not a live access token of this app")
        }
        guard caller.app.ref == app.ref else { throw OAuthError.invalidGrant("subject_token is not a live access token of this app") }
        guard let sessionId = caller.sessionId else {
            throw OAuthError.invalidGrant("subject_token has no session (it predates sessions): sign in again")
        }
        return try await tokens(
            onSession: sessionId, userId: caller.user.id, app: app, client: registered, scope: scope, jkt: jkt, proven: nil, resource: resource,
            issuedTokenType: TokenTypeURI.accessToken)
    }

    /// The `scope` of a grant made without an authorization request: among the client's registered
    /// scopes; all of them when none is asked.
    static func requestedScope(_ fields: [String: String], client registered: OAuthClient) throws -> String {
        guard let asked = fields["scope"] else { return registered.scopes.joined(separator: " ") }
        guard let parsed = scopes(asked), parsed.allSatisfy(registered.scopes.contains) else {
            throw OAuthError.invalidScope("scope must be among the client's registered scopes")
        }
        return parsed.joined(separator: " ")
    }

    /// Opens the grant of `client` on a live session of the user (locking the user row, then the
    /// session) and signs its tokens. `proven` is how and when the user proved itself (a sign-in just
    /// made); nil takes the session's last proof (an exchanged end-user token).
    func tokens(
        onSession sessionId: UUID, userId: UUID, app: App, client registered: OAuthClient, scope: String, jkt: String?,
        proven: (authTime: Date, amr: [String])?, resource: String?, issuedTokenType: String?
    ) async throws -> OAuthTokenResponse {
        let (oauth, logger) = (oauth, logger)
        let decision: Decision = try await client.transaction(logger: logger) { db in
            let user = try await UserStore.lockExisting(db, appRef: app.ref, userId: userId, logger: logger)
            guard let user, user.status == .active,
                let proof = try await SessionStore.lockLive(db, sessionId: sessionId, appRef: app.ref, userId: userId, logger: logger)
            else { return .refuse(.invalidGrant("the session has ended")) }
            let (grant, refreshToken) = try await Self.openGrant(
                db, oauth: oauth, app: app, client: registered, sessionId: sessionId, userId: userId, scope: scope, jkt: jkt,
                authTime: proven?.authTime ?? proof.at, amr: proven?.amr ?? OAuthAuthorization.amr(proof, app: app), logger: logger)
            return .issue(Issuance(user: user, grant: grant, scope: scope, refreshToken: refreshToken, nonce: nil, jkt: jkt))
        }
        switch decision {
        case .refuse(let error): throw error
        case .issue(let issuance):
            return try await sign(issuance, app: app, client: registered, resource: resource, withNonce: false, issuedTokenType: issuedTokenType)
        }
    }
}
