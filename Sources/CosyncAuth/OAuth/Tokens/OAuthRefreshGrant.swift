import Foundation
import Logging
import PostgresNIO

// The refresh_token grant (RFC 6749 §6, <doc:OAuth> §5): rotation on every use, a grace window in
// which a retried or racing refresh answers the same successor, and reuse detection after it.
extension OAuthTokenEndpoint {
    /// Every use of a refresh token runs in one transaction that locks the user row, the session and
    /// then the token's row (`FOR UPDATE`), so PostgreSQL alone decides, whichever node serves:
    /// - a live token not rotated yet: a successor is minted, the token is marked rotated and the
    ///   successor kept sealed beside it (`SealPurpose.refreshSuccessor`);
    /// - a token rotated no more than the client's `refreshGraceSeconds` ago: the same successor is
    ///   answered again, with a fresh access token (concurrent refreshes queue on the row lock and all
    ///   land here);
    /// - a token rotated before that: reuse. The session is deleted (which ends every grant and token
    ///   on it), `session.revoked` is recorded with reason `refresh_token_reuse` in the same
    ///   transaction, and the answer is `invalid_grant`.
    /// A token expires after the client's sliding lifetime without use, and never outlives its grant's
    /// absolute expiry. `scope` may narrow the access token's scope, never widen it; the family keeps
    /// the grant's.
    func refresh(app: App, client registered: OAuthClient, _ request: OAuthTokenRequest) async throws -> OAuthTokenResponse {
        let fields = request.fields
        guard let presented = fields["refresh_token"], !presented.isEmpty, presented.utf8.count <= 512 else {
            throw OAuthError.invalidRequest("refresh_token is missing")
        }
        var narrowed: [String]?
        if let asked = fields["scope"] {
            guard let parsed = Self.scopes(asked) else { throw OAuthError.invalidScope("scope is malformed") }
            narrowed = parsed
        }
        let resource = try Self.resource(fields)
        let jkt = try await proofKey(request, app: app, client: registered)
        let tokenHash = Secrets.sha256(presented)
        let (box, logger) = (oauth.box, logger)
        let decision: Decision = try await client.transaction(logger: logger) { db in
            guard let owner = try await OAuthRefreshTokenStore.owner(db, appRef: app.ref, tokenHash: tokenHash, logger: logger) else {
                return .refuse(.invalidGrant("the refresh token is invalid"))
            }
            let user = try await UserStore.lockExisting(db, appRef: app.ref, userId: owner.userId, logger: logger)
            let proof = try await SessionStore.lockLive(db, sessionId: owner.sessionId, appRef: app.ref, userId: owner.userId, logger: logger)
            guard let locked = try await OAuthRefreshTokenStore.lock(
                db, appRef: app.ref, tokenHash: tokenHash, graceSeconds: registered.refreshGraceSeconds, logger: logger)
            else { return .refuse(.invalidGrant("the refresh token is invalid")) }
            let grant = locked.grant
            guard grant.clientRef == registered.ref else { return .refuse(.invalidGrant("the refresh token was issued to another client")) }
            guard let user, user.status == .active, proof != nil else { return .refuse(.invalidGrant("the session of this refresh token has ended")) }
            if let bound = grant.dpopJKT, bound != jkt {
                return .refuse(jkt == nil
                    ? .invalidDPoPProof("the refresh token is bound to a DPoP key: send a proof signed with it")
                    : .invalidGrant("the DPoP proof is signed with another key than the refresh token's"))
            }
            let granted = Self.scopes(grant.scope) ?? []
            if let narrowed, !narrowed.allSatisfy(granted.contains) {
                return .refuse(.invalidScope("scope may only narrow what the grant holds"))
            }
            let scope = narrowed?.joined(separator: " ") ?? grant.scope
            if locked.rotated {
                guard locked.withinGrace, let sealed = locked.successorSealed else {
                    _ = try await SessionStore.delete(db, appRef: app.ref, userId: owner.userId, sessionId: owner.sessionId, logger: logger)
                    try await Events.record(
                        db, app: app, type: .sessionRevoked, userId: owner.userId,
                        data: [
                            "sessionIds": .array([.string(owner.sessionId.uuidString.lowercased())]), "reason": .string("refresh_token_reuse"),
                            "clientId": .string(registered.clientId),
                        ], logger: logger)
                    return .refuse(.invalidGrant("the refresh token was already used; its session is revoked"))
                }
                let successor = try box.openString(sealed, purpose: .refreshSuccessor(grant: grant.ref))
                return .issue(Issuance(user: user, grant: grant, scope: scope, refreshToken: successor, nonce: nil, jkt: grant.dpopJKT ?? jkt))
            }
            guard locked.live else { return .refuse(.invalidGrant("the refresh token has expired")) }
            let successor = Secrets.token(prefix: Self.refreshTokenPrefix)
            let successorHash = Secrets.sha256(successor)
            _ = try await OAuthRefreshTokenStore.insert(
                db, tokenHash: successorHash, grantRef: grant.ref, slidingSeconds: registered.refreshSlidingSeconds,
                absoluteExpiresAt: grant.absoluteExpiresAt, logger: logger)
            try await OAuthRefreshTokenStore.rotate(
                db, tokenHash: tokenHash, successorHash: successorHash,
                successorSealed: try box.seal(successor, purpose: .refreshSuccessor(grant: grant.ref)), logger: logger)
            return .issue(Issuance(user: user, grant: grant, scope: scope, refreshToken: successor, nonce: nil, jkt: grant.dpopJKT ?? jkt))
        }
        switch decision {
        case .refuse(let error): throw error
        case .issue(let issuance): return try await sign(issuance, app: app, client: registered, resource: resource, withNonce: false)
        }
    }
}
