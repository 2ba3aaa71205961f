import Foundation

// The token endpoint's two grants that sign a user in on the spot (<doc:OAuth> §8): the JWT-bearer
// grant (the app's backend vouches, RFC 7523) and the exchange of an upstream provider's ID token
// (RFC 8693, subject_token_type id_token). The request is checked first (scope, resource, DPoP proof),
// so a bad request spends no assertion and opens no session; then the sign-in opens a session, and the
// client's grant is opened on it (`tokens(onSession:)`, as for an exchanged end-user token).
extension OAuthTokenEndpoint {
    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with `assertion` (`AssertionGrant`).
    func jwtBearer(app: App, client registered: OAuthClient, _ request: OAuthTokenRequest) async throws -> OAuthTokenResponse {
        guard let assertion = request.fields["assertion"], !assertion.isEmpty else { throw OAuthError.invalidRequest("assertion is missing") }
        let scope = try Self.requestedScope(request.fields, client: registered)
        let resource = try Self.resource(request.fields)
        let jkt = try await proofKey(request, app: app, client: registered)
        let signedIn = try await oauth.assertionGrant.signIn(app: app, client: registered, assertion: assertion, origin: request.origin)
        return try await tokens(
            onSession: signedIn.sessionId, userId: signedIn.user.id, app: app, client: registered, scope: scope, jkt: jkt,
            proven: (signedIn.authTime, signedIn.amr), resource: resource, issuedTokenType: nil)
    }

    /// An ID token a native app got from one of the app's upstream providers (`UpstreamSignIn.exchange`).
    func exchangeUpstreamIDToken(
        app: App, client registered: OAuthClient, _ request: OAuthTokenRequest, subjectToken: String
    ) async throws -> OAuthTokenResponse {
        let scope = try Self.requestedScope(request.fields, client: registered)
        let resource = try Self.resource(request.fields)
        let jkt = try await proofKey(request, app: app, client: registered)
        let signedIn = try await oauth.upstreamSignIn.exchange(app: app, client: registered, idToken: subjectToken, origin: request.origin)
        return try await tokens(
            onSession: signedIn.sessionId, userId: signedIn.user.id, app: app, client: registered, scope: scope, jkt: jkt,
            proven: (signedIn.authTime, signedIn.amr), resource: resource, issuedTokenType: TokenTypeURI.accessToken)
    }
}
