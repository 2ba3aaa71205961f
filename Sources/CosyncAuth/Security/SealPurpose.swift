import Foundation

/// What a sealed secret is for. `SecretBox` binds the label into the ciphertext (AES-GCM associated
/// data), so a value sealed for one purpose and owner never opens as another. The labels are stored
/// with every sealed value: they must never change.
public enum SealPurpose: Sendable, Equatable {
    case appKey(kid: String)
    case appToken(appId: String)
    case appCredentials(appId: String)
    case serverKey(kid: String)
    case webhookSecret(UUID)
    case totp(userId: UUID)
    case resetCode(appId: String, identifier: String)
    case signupCode(UUID)
    case inviteCode(UUID)
    case phoneCode(userId: UUID)
    case loginChallenge(UUID)
    case appKeySignupCode(UUID)
    /// The successor of a rotated OAuth refresh token, kept for the grant's grace window.
    case refreshSuccessor(grant: UUID)
    /// An upstream OpenID provider's client secret (by the provider's row id).
    case upstreamClientSecret(UUID)
    /// A Portal account's TOTP secret (by the account's id).
    case portalTOTP(accountId: UUID)

    public var label: String {
        switch self {
        case .appKey(let kid): "app-key:\(kid)"
        case .appToken(let appId): "app-token:\(appId)"
        case .appCredentials(let appId): "app-credentials:\(appId)"
        case .serverKey(let kid): "server-key:\(kid)"
        case .webhookSecret(let id): "webhook-secret:\(id.uuidString.lowercased())"
        case .totp(let userId): "totp:\(userId)"
        case .resetCode(let appId, let identifier): "reset-code:\(appId):\(identifier)"
        case .signupCode(let id): "signup-code:\(id)"
        case .inviteCode(let id): "invite-code:\(id)"
        case .phoneCode(let userId): "phone-code:\(userId)"
        case .loginChallenge(let id): "login-challenge:\(id)"
        case .appKeySignupCode(let id): "appkey-signup-code:\(id)"
        case .refreshSuccessor(let grant): "refresh-successor:\(grant)"
        case .upstreamClientSecret(let id): "upstream-client-secret:\(id)"
        case .portalTOTP(let accountId): "portal-totp:\(accountId.uuidString.lowercased())"
        }
    }
}
