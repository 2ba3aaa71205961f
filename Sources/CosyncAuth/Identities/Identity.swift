import Foundation

/// A way to sign in to one user account.
public enum IdentityKind: String, Sendable, CaseIterable {
    /// The handle and the password (the hash stays on the user).
    case password
    case apple
    case google
    /// The `ANON_` handle of `loginAnonymous`, matched exactly.
    case anonymous
    /// A WebAuthn credential (the passkey API); the subject is the credential id, base64url.
    case passkey
    /// An account the app's own backend vouches for (the JWT-bearer grant); the subject is the
    /// assertion's `sub`.
    case custom
    /// An account of an upstream OpenID provider; the subject is `<provider issuer>|<sub>`.
    case oidc

    public init(_ provider: SocialProvider) {
        switch provider {
        case .apple: self = .apple
        case .google: self = .google
        }
    }
}

public struct Identity: Sendable, Equatable {
    public let id: UUID
    public let userId: UUID
    public let kind: IdentityKind
    public let subject: String
    public let email: String?
    public let createdAt: Date
    public let lastUsedAt: Date?

}
