import Foundation

/// A grant (`oauth_grants`): what one client holds on one session, the family of its refresh tokens
/// (<doc:OAuth> §5). It ends with its session, when revoked, or at `absoluteExpiresAt`.
struct OAuthGrant: Sendable {
    let ref: UUID
    let appRef: Int64
    let clientRef: UUID
    let sessionId: UUID
    let userId: UUID
    let scope: String
    /// The DPoP key the grant is bound to (its refresh needs a proof by it).
    let dpopJKT: String?
    /// When the user last proved itself on the session, as the sign-in behind the grant saw it.
    let authTime: Date
    let amr: [String]
    let absoluteExpiresAt: Date
}
