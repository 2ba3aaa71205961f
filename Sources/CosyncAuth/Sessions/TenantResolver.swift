import Foundation
import Logging
import PostgresNIO

/// Turns the credential of an end-user request into the app, and for an access token into the
/// caller (app, user, session), before a flow runs. The HTTP edge calls it; flows take the resolved
/// `App` / `AuthenticatedCaller` and never see a header string.
///
/// The app comes from the node's `AppCache` (no query on a hit); an access token costs one query,
/// which loads the user together with its live session or, for a session-less token, with its
/// token version.
public struct TenantResolver: Sendable {
    let client: PostgresClient
    let apps: AppAdministration
    let tokens: TokenIssuer
    let logger: Logger

    public init(client: PostgresClient, apps: AppAdministration, tokens: TokenIssuer, logger: Logger) {
        self.client = client
        self.apps = apps
        self.tokens = tokens
        self.logger = logger
    }

    /// The app of an app token (exact string, through its hash), or `invalidAppToken`; no token at
    /// all is `whenMissing` (the contract's code differs per endpoint).
    public func app(token: String?, whenMissing: EndUserError) async throws -> App {
        guard let token, !token.isEmpty else { throw whenMissing }
        // An AppKey app's token names no app of this API (<doc:AppKeyAPI> §1.1).
        guard let app = try await apps.app(forToken: token), app.product == .cosyncAuth else { throw EndUserError.invalidAppToken }
        return app
    }

    /// The caller of an access token. One rule for every token that no longer authenticates: invalid,
    /// expired, its session ended, its user deleted or its token version moved on, the answer is
    /// `invalidAccessToken` (405); the app gone → `appNotFound`.
    ///
    /// A token with a session (`sid`) is checked in one query that loads the user together with its
    /// live session. A token without one (issued before sessions existed) is judged by the user's token
    /// version, or by `keptTokenHash` when a changePassword kept it alive.
    public func caller(accessToken: String?, whenMissing: EndUserError) async throws -> AuthenticatedCaller {
        guard let accessToken, !accessToken.isEmpty else { throw whenMissing }
        guard let claims = await tokens.verifyAccessToken(accessToken) else {
            return try await legacyCaller(accessToken: accessToken)
        }
        guard AppAdministration.isAppId(claims.appId),
            let app = try await apps.cachedApp(appId: claims.appId)
        else { throw EndUserError.appNotFound }
        guard app.product == .cosyncAuth else { throw EndUserError.invalidAppToken }
        guard let userId = UUID(uuidString: claims.uid) else { throw EndUserError.invalidAccessToken }
        if let sid = claims.sid {
            guard let sessionId = UUID(uuidString: sid),
                let (user, proof) = try await client.withConnection({
                    try await SessionStore.liveUser($0, sessionId: sessionId, appRef: app.ref, userId: userId, logger: logger)
                })
            else { throw EndUserError.invalidAccessToken }
            return AuthenticatedCaller(app: app, user: user, sessionId: sessionId, tokenHash: Secrets.sha256(accessToken), sessionProof: proof)
        }
        guard let user = try await client.withConnection({
            try await UserStore.user($0, appRef: app.ref, handle: claims.handle, exact: true, logger: logger)
        }), user.id == userId, user.tokenVersion == claims.ver || Self.isKept(accessToken, by: user) else {
            throw EndUserError.invalidAccessToken
        }
        return AuthenticatedCaller(app: app, user: user, sessionId: nil, tokenHash: Secrets.sha256(accessToken))
    }

    /// Whether `token` is the session-less token a changePassword kept alive for `user`.
    static func isKept(_ token: String, by user: User) -> Bool {
        guard let kept = user.keptTokenHash else { return false }
        return Secrets.constantTimeEquals(kept, Secrets.sha256(token))
    }

    /// A legacy access token (see `TokenIssuer.verifyLegacyAccessToken`) names an imported user
    /// whose token version never moved (or the one token a changePassword kept): a password change,
    /// reset, suspension or deletion on this server ends it, as it ends this server's tokens.
    func legacyCaller(accessToken: String) async throws -> AuthenticatedCaller {
        guard let claims = await tokens.verifyLegacyAccessToken(accessToken), AppAdministration.isAppId(claims.appId),
            let app = try await apps.cachedApp(appId: claims.appId)
        else { throw EndUserError.invalidAccessToken }
        let handle = Identifiers.handle(claims.handle)  // as the import normalised it
        guard let user = try await client.withConnection({
            try await UserStore.importedUser($0, appRef: app.ref, handle: handle, logger: logger)
        }), user.tokenVersion == 0 || Self.isKept(accessToken, by: user) else { throw EndUserError.invalidAccessToken }
        return AuthenticatedCaller(app: app, user: user, sessionId: nil, tokenHash: Secrets.sha256(accessToken))
    }
}
