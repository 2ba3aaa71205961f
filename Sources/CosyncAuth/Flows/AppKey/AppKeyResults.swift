import Foundation

// What the AppKey flows answer, as typed values (<doc:AppKeyAPI> §2). The HTTP module writes their
// JSON (CosyncAuthHTTP/AppKeyAPI/AppKeyWireShapes.swift); none of these knows about the wire.

/// A user as an AppKey answer shows it (<doc:AppKeyAPI> §2.3, §2.4): the user, its AppKey profile and
/// passkeys, and the session keys that come with this answer.
public struct AppKeyUserResult: Sendable {
    public let appId: String
    public let user: User
    public let profile: AppKeyProfile?
    public let passkeys: [Passkey]
    /// The session's access token, when the answer carries one.
    public let accessToken: String?
    /// A freshly signed user JWT (<doc:AppKeyAPI> §2.7), when the answer carries one.
    public let jwt: String?
    /// verifyComplete's confirmation (true); nil in every other answer.
    public let valid: Bool?

    /// The name shown: the profile's display name, else its first and last names, else the handle.
    public var displayName: String {
        if let name = profile?.displayName, !name.isEmpty { return name }
        let joined = [profile?.firstName, profile?.lastName].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
        return joined.isEmpty ? user.handle : joined
    }

    /// How the user signs in: `handle` (passkeys), `apple` or `google`.
    public var loginProvider: String { AppKeyFlows.loginProvider(user) }

    public var isAnonymous: Bool { profile?.isAnonymous ?? false }
}

/// The user a WebAuthn ceremony names.
public struct PasskeyUserEntity: Sendable, Equatable {
    public let id: UUID
    /// `<handle>(<displayAppId>)`: the account name a passkey sheet shows.
    public let name: String
    public let displayName: String
    public let handle: String
}

/// A credential a ceremony excludes or allows, with the transports to try.
public struct PasskeyDescriptor: Sendable, Equatable {
    public let credentialId: [UInt8]
    public let transports: [String]

    /// A stored passkey's; one stored without transports is offered as `internal`, `hybrid`.
    init(_ passkey: Passkey) {
        credentialId = passkey.credentialId
        transports = passkey.transports.isEmpty ? ["internal", "hybrid"] : passkey.transports
    }
}

/// The options of a registration ceremony (<doc:AppKeyAPI> §2.5 AKSignupChallenge).
public struct PasskeyCreationOptions: Sendable {
    /// 32 random bytes, base64url.
    public let challenge: String
    public let rpName: String
    public let rpId: String
    public let user: PasskeyUserEntity
    /// The COSE algorithms accepted, in order of preference.
    public let algorithms: [Int]
    /// Milliseconds.
    public let timeout: Int
    /// The attestation conveyance asked for: `none` or `direct`.
    public let attestation: String
    public let excludeCredentials: [PasskeyDescriptor]
    public let residentKey: String
    public let requireResidentKey: Bool
    public let userVerification: String
    /// Whether the credProps extension is asked for.
    public let credProps: Bool
}

/// The options of an authentication ceremony (<doc:AppKeyAPI> §2.5 AKLoginChallenge).
public struct PasskeyRequestOptions: Sendable {
    public let rpId: String
    /// 32 random bytes, base64url.
    public let challenge: String
    /// Milliseconds.
    public let timeout: Int
    public let userVerification: String
    public let allowCredentials: [PasskeyDescriptor]
    public let user: PasskeyUserEntity
    /// The account waits for a new passkey after an admin reset (<doc:AppKeyAPI> §5.4).
    public let requireAddPasskey: Bool
}

/// An app's public description (<doc:AppKeyAPI> §2.1, K1 `GET app`).
public struct AppKeyAppDescription: Sendable {
    public let app: App
    /// `<name>-<first 8 of appId>`.
    public let displayAppId: String
    /// The app's raw public key (verifies its user JWTs), when it has one.
    public let publicKey: String?
    /// The app's own token, only when the caller presented it.
    public let appToken: String?
    /// The first of the app's Google client ids, when it has one.
    public let googleClientId: String?
    /// The first of the app's Apple bundle ids, when it has one.
    public let appleBundleId: String?
}

/// A signup waiting for its code (<doc:AppKeyAPI> K4): the code went to `handle`.
public struct AppKeyPendingSignup: Sendable {
    public let handle: String
    /// The signup-token that signupComplete presents.
    public let signupToken: String
}
