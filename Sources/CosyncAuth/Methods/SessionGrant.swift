import Foundation
import Logging
import PostgresNIO

/// The last step of every sign-in, in both products: opens the session and signs the access token
/// that names it. The sign-in's other writes (last login, audit, event) share the session's
/// transaction; each product maps a refusal to its own wire error.
public struct SessionGrant: Sendable {
    let tokens: TokenIssuer
    let logger: Logger

    public init(tokens: TokenIssuer, logger: Logger) {
        self.tokens = tokens
        self.logger = logger
    }

    /// Why no session was opened.
    public enum Refused: Error, Sendable, Equatable {
        /// The user was suspended, deleted or signed out everywhere while the sign-in ran.
        case userRevoked
        /// The identity the sign-in went through (provider account, anonymous handle, passkey) was
        /// removed meanwhile.
        case identityGone
    }

    /// Opens a session for `user` in the caller's transaction, proven by `method` now, from `origin`.
    /// `identityId` names the identity it signed in with when the caller knows it (a passkey's); else
    /// the user's one identity of the method's kind (see `SessionStore.insert`). Answers the session id.
    func open(
        _ db: PostgresConnection, app: App, user: User, method: SessionMethod, identityId: UUID? = nil, origin: ClientOrigin
    ) async throws -> UUID {
        let sessionId = UUID()
        let opening = try await SessionStore.insert(
            db, id: sessionId, appRef: app.ref, userId: user.id, tokenVersion: user.tokenVersion, method: method, identityId: identityId,
            origin: origin, lifetimeSeconds: lifetime(app), logger: logger)
        switch opening {
        case .opened: return sessionId
        case .userRevoked: throw Refused.userRevoked
        case .identityGone: throw Refused.identityGone
        }
    }

    /// The access token naming an open session (no database work).
    func accessToken(app: App, user: User, sessionId: UUID) async throws -> String {
        try await tokens.accessToken(user: user, appId: app.appId, userJWTExpirationHours: app.settings.userJWTExpiration, sessionId: sessionId)
    }

    /// How long a session of `app` lives: as long as its access token.
    func lifetime(_ app: App) -> Int { tokens.accessTokenSeconds(userJWTExpirationHours: app.settings.userJWTExpiration) }
}
