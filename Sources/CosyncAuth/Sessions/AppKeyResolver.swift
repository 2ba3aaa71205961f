import Foundation
import JWTKit
import Logging
import PostgresNIO

/// Turns the credentials of an AppKey request (<doc:AppKeyAPI> §1.5) into the app, the signed-in
/// caller or the pending signup, before a flow runs. The HTTP edge calls it; the AppKey flows take
/// the resolved `App` / `AppKeyCaller` and never see a header string. The AppKey counterpart of
/// `TenantResolver`.
public struct AppKeyResolver: Sendable {
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

    /// The app an app-scope request names: by app-token first, else by an access token (its
    /// signature alone: an expired or revoked one still names its app), else by a signup-token.
    /// `gates` applies the status gates (GET app answers for a migrated app). `resolved`: the app
    /// product dispatch already found for this request's app-token (not resolved again).
    public func app(_ credentials: AppKeyCredentials, gates: Bool = true, resolved: App? = nil) async throws -> App {
        let app: App
        if let token = credentials.appToken {
            if let resolved {
                app = resolved
            } else {
                guard let found = try await apps.app(forToken: token) else { throw AppKeyError.invalidAppToken }
                app = found
            }
        } else if let token = credentials.accessToken {
            guard let claims = try? await apps.serverKeys.verify(token, as: AppKeyTokenIdentity.self) else {
                throw AppKeyError.invalidAccessToken
            }
            guard AppAdministration.isAppId(claims.appId),
                let found = try await apps.cachedApp(appId: claims.appId)
            else { throw AppKeyError.appNotFound }
            app = found
        } else if let token = credentials.signupToken {
            guard token.utf8.count <= 512,
                let found = try await client.withConnection({ db -> App? in
                    guard let ref = try await PasskeyStore.signupAppRef(db, tokenHash: Secrets.sha256(token), logger: logger) else { return nil }
                    return try await AppStore.app(db, ref: ref, logger: logger)
                })
            else { throw AppKeyError.invalidToken }
            app = found
        } else {
            throw AppKeyError.invalidAppToken
        }
        guard app.product == .appKey else { throw AppKeyError.invalidAppToken.with("this app does not serve the AppKey API") }
        if gates { try Self.requireActive(app) }
        return app
    }

    static func requireActive(_ app: App) throws(AppKeyError) {
        switch app.status {
        case .active: return
        case .migrated: throw .appMigrated
        default: throw .appSuspended
        }
    }

    /// The pending signup a signup-token names (K5 `signupComplete`): the header is required (E403),
    /// and the app comes from the token alone, whatever other credentials came along.
    public func signup(_ credentials: AppKeyCredentials) async throws -> AppKeySignupToken {
        guard let token = credentials.signupToken else { throw AppKeyError.missingParameter.with("missing header: signup-token") }
        let app = try await app(AppKeyCredentials(signupToken: token))
        return AppKeySignupToken(app: app, tokenHash: Secrets.sha256(token))
    }

    /// The signed-in caller of a user-scope request (access-token). With `allowReset`, a passkey-reset
    /// token also makes a caller (one that may only add a passkey).
    public func caller(_ credentials: AppKeyCredentials, allowReset: Bool = false) async throws -> AppKeyCaller {
        guard let token = credentials.accessToken else {
            throw AppKeyError.invalidAccessToken.with("an access-token is required")
        }
        if allowReset, let reset = try? await apps.serverKeys.verify(token, as: ResetPasskeyClaims.self) {
            return try await resetCaller(reset, token: token)
        }
        guard let claims = await tokens.verifyAccessToken(token), let sid = claims.sid, let sessionId = UUID(uuidString: sid),
            let userId = UUID(uuidString: claims.uid)
        else { throw AppKeyError.invalidAccessToken }
        guard AppAdministration.isAppId(claims.appId),
            let app = try await apps.cachedApp(appId: claims.appId)
        else { throw AppKeyError.appNotFound }
        guard app.product == .appKey else { throw AppKeyError.invalidAppToken.with("this app does not serve the AppKey API") }
        try Self.requireActive(app)
        let found = try await client.withConnection { db in
            try await SessionStore.liveUser(db, sessionId: sessionId, appRef: app.ref, userId: userId, logger: logger)
        }
        guard let (user, proof) = found else { throw AppKeyError.invalidAccessToken }
        guard user.status == .active else { throw AppKeyError.accountSuspended }
        return AppKeyCaller(app: app, user: user, sessionId: sessionId, proof: proof, accessToken: token)
    }

    /// The caller of a live, unused passkey-reset token.
    func resetCaller(_ claims: ResetPasskeyClaims, token: String) async throws -> AppKeyCaller {
        guard AppAdministration.isAppId(claims.appId), let resetId = UUID(uuidString: claims.jti), let userId = UUID(uuidString: claims.uid),
            let app = try await apps.cachedApp(appId: claims.appId)
        else { throw AppKeyError.invalidAccessToken }
        guard app.product == .appKey else { throw AppKeyError.invalidAppToken.with("this app does not serve the AppKey API") }
        try Self.requireActive(app)
        guard let user = try await client.withConnection({ db -> User? in
            guard try await PasskeyStore.liveReset(db, id: resetId, userId: userId, logger: logger) != nil else { return nil }
            return try await UserStore.find(db, appRef: app.ref, id: userId, logger: logger)
        }) else { throw AppKeyError.invalidAccessToken.with("the reset token is unknown, used or expired") }
        guard user.status == .active else { throw AppKeyError.accountSuspended }
        // The live reset token, presented with this request, is the proof (it only allows adding a passkey).
        let proof = AuthProof(method: .passkeyReset, at: Date(), source: .request)
        return AppKeyCaller(app: app, user: user, sessionId: resetId, proof: proof, accessToken: token, resetId: resetId)
    }

    /// An optional access token, verified (signature, scope, expiry) but not yet judged: K18
    /// `verifySocialAccount` judges it against the social token's user, after that token is verified.
    public func presentedAccess(_ credentials: AppKeyCredentials) async -> AppKeyPresentedAccess {
        guard let token = credentials.accessToken else { return .none }
        guard let claims = await tokens.verifyAccessToken(token) else { return .invalid }
        return .claims(claims)
    }
}

/// The signed-in caller of an AppKey user-scope request: app, user, session, and how and when the
/// session was last proven (for a passkey-reset token: the token itself).
public struct AppKeyCaller: Sendable {
    public let app: App
    public let user: User
    public let sessionId: UUID
    public let proof: AuthProof
    /// The access token as presented: answered back in the user body's `access-token`.
    public let accessToken: String
    /// Set when the token is a passkey-reset token (<doc:AppKeyAPI> §5.4): it may only add a passkey.
    public var resetId: UUID? = nil
}

/// A signup-token resolved: the app of its pending signup and the token's hash (the signup's key).
public struct AppKeySignupToken: Sendable {
    public let app: App
    public let tokenHash: Data
}

/// An access token that came with a request where it is optional.
public enum AppKeyPresentedAccess: Sendable {
    /// None came.
    case none
    /// One came and does not verify.
    case invalid
    /// One came and verifies.
    case claims(AccessTokenClaims)
}

/// An access token read for the app it names only: its signature and scope are checked, not its
/// expiry (<doc:AppKeyAPI> §1.5).
struct AppKeyTokenIdentity: JWTPayload {
    var appId: String
    var scope: String

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try requireScope(scope, "user")
    }
}
