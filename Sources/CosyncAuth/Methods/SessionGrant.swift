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

    /// Opens a session for `user` in the caller's transaction, proven by `method` now, from `origin`,
    /// as the sign-in saw the user: only while it is active and its token version is still the one the
    /// sign-in read, and only while the identity it signed in with still exists. A password change,
    /// reset, suspension or "sign out everywhere" that committed while the sign-in was checking moved
    /// the version on (`userRevoked`); a detach or passkey removal took the identity (`identityGone`).
    /// Either way no session is opened and the sign-in must fail, or it would outlive the revocation.
    ///
    /// The user row is locked first, until the transaction ends. A revocation or an identity removal
    /// locks that row before it deletes sessions, so it either waits for this session to commit (and
    /// then deletes it) or has committed first (and the checks refuse).
    ///
    /// `identityId` names the identity it signed in with when the caller knows it (a passkey's); else
    /// the user's one identity of the method's kind (see `SessionStore.insert`). `lifetimeSeconds`
    /// overrides the app's session lifetime (an OAuth sign-in lives as long as its refresh tokens may).
    /// Answers the session id.
    func open(
        _ db: PostgresConnection, app: App, user: User, method: SessionMethod, identityId: UUID? = nil, origin: ClientOrigin,
        lifetimeSeconds: Int? = nil
    ) async throws -> UUID {
        guard try await UserStore.lockLive(db, appRef: app.ref, userId: user.id, tokenVersion: user.tokenVersion, logger: logger) else {
            throw Refused.userRevoked
        }
        let sessionId = UUID()
        guard try await SessionStore.insert(
            db, id: sessionId, appRef: app.ref, userId: user.id, method: method, identityId: identityId, origin: origin,
            lifetimeSeconds: lifetimeSeconds ?? lifetime(app), logger: logger)
        else { throw Refused.identityGone }
        return sessionId
    }

    /// The access token naming an open session (no database work).
    func accessToken(app: App, user: User, sessionId: UUID) async throws -> String {
        try await tokens.accessToken(user: user, appId: app.appId, userJWTExpirationHours: app.settings.userJWTExpiration, sessionId: sessionId)
    }

    /// How long a session of `app` lives: as long as its access token.
    func lifetime(_ app: App) -> Int { tokens.accessTokenSeconds(userJWTExpirationHours: app.settings.userJWTExpiration) }
}
