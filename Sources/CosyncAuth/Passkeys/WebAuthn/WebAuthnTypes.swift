/// How much user verification (biometrics, PIN, passcode) the relying party demands.
public enum WebAuthnUserVerification: String, Sendable, Codable {
    /// UV must be set; otherwise the response is refused.
    case required
    /// UV is asked for but not demanded.
    case preferred
    /// UV is not asked for (and not demanded).
    case discouraged
}

/// What the relying party does with attestation statements.
public enum WebAuthnAttestationPolicy: String, Sendable, Codable {
    /// Not asked for. A statement that is present is still checked; an unknown format is accepted.
    case none
    /// Checked when present; a missing, unknown or untrusted one is accepted (`attestationVerified` false).
    case optional
    /// A certificate-based statement (packed with x5c, apple) must verify, and chain to one of the
    /// trust anchors when any are configured. `none`, self attestation and unknown formats are refused.
    case required
}

/// The per-app relying-party settings the checks run against.
public struct WebAuthnRelyingParty: Sendable {
    /// The RP ID, e.g. `example.com`; authenticatorData must carry SHA-256 of it.
    public var id: String
    /// Exact origins accepted from clientDataJSON (web origins and native ones such as
    /// `android:apk-key-hash:...` or `ios:bundle-id:...`, compared verbatim).
    public var allowedOrigins: [String]
    public var userVerification: WebAuthnUserVerification
    public var attestation: WebAuthnAttestationPolicy
    /// DER-encoded X.509 certificates that packed/apple attestation chains may end in. Empty: chains
    /// are not validated.
    public var trustAnchorsDER: [[UInt8]]
    /// COSE algorithm ids accepted for credential keys (default: ES256, RS256, EdDSA).
    public var allowedAlgorithms: [Int]

    public init(
        id: String, allowedOrigins: [String], userVerification: WebAuthnUserVerification = .preferred,
        attestation: WebAuthnAttestationPolicy = .none, trustAnchorsDER: [[UInt8]] = [],
        allowedAlgorithms: [Int] = WebAuthn.supportedAlgorithms
    ) {
        self.id = id
        self.allowedOrigins = allowedOrigins
        self.userVerification = userVerification
        self.attestation = attestation
        self.trustAnchorsDER = trustAnchorsDER
        self.allowedAlgorithms = allowedAlgorithms
    }
}

/// A registration (attestation) credential as the client sent it: every binary field is still a
/// base64url (or base64) string.
public struct RegistrationResponse: Sendable {
    public var id: String
    public var rawId: String?
    public var type: String?
    public var clientDataJSON: String
    public var attestationObject: String
    public var transports: [String]?

    public init(
        id: String, rawId: String? = nil, type: String? = nil, clientDataJSON: String, attestationObject: String,
        transports: [String]? = nil
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.transports = transports
    }
}

/// An authentication (assertion) credential as the client sent it: binary fields still encoded.
public struct AssertionResponse: Sendable {
    public var id: String
    public var rawId: String?
    public var type: String?
    public var clientDataJSON: String
    public var authenticatorData: String
    public var signature: String
    public var userHandle: String?

    public init(
        id: String, rawId: String? = nil, type: String? = nil, clientDataJSON: String, authenticatorData: String,
        signature: String, userHandle: String? = nil
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
    }
}

/// How an attestation statement vouches for the credential (WebAuthn §6.5.4 attestation types).
public enum WebAuthnAttestationType: String, Sendable, Codable {
    /// fmt `none`.
    case none
    /// packed without x5c: signed by the credential key itself.
    case selfAttestation = "self"
    /// packed with an attestation certificate.
    case basic
    /// apple anonymous attestation.
    case anonymizationCA
    /// A format this verifier does not know; nothing was checked.
    case unknown
}

/// What a successful registration yields; the caller stores it.
public struct VerifiedRegistration: Sendable {
    public var credentialId: [UInt8]
    /// The COSE_Key exactly as it appeared in authenticatorData.
    public var publicKeyCOSE: [UInt8]
    public var algorithm: Int
    public var signCount: UInt32
    /// 16 bytes.
    public var aaguid: [UInt8]
    /// The attestation `fmt` as sent.
    public var format: String
    /// True when the statement was cryptographically checked (self, packed x5c or apple) and, if trust
    /// anchors are configured, a certificate statement chains to one of them.
    public var attestationVerified: Bool
    public var userVerified: Bool
    public var backupEligible: Bool
    public var backupState: Bool
    /// `transports` from the response (empty when absent; the caller picks a default).
    public var transports: [String]
    /// The attestation type behind `attestationVerified`.
    public var attestationType: WebAuthnAttestationType
    /// True when a certificate statement chained to one of the relying party's trust anchors.
    public var attestationTrusted: Bool

    public init(
        credentialId: [UInt8], publicKeyCOSE: [UInt8], algorithm: Int, signCount: UInt32, aaguid: [UInt8], format: String,
        attestationVerified: Bool, userVerified: Bool, backupEligible: Bool, backupState: Bool, transports: [String],
        attestationType: WebAuthnAttestationType = .none, attestationTrusted: Bool = false
    ) {
        self.credentialId = credentialId
        self.publicKeyCOSE = publicKeyCOSE
        self.algorithm = algorithm
        self.signCount = signCount
        self.aaguid = aaguid
        self.format = format
        self.attestationVerified = attestationVerified
        self.userVerified = userVerified
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.transports = transports
        self.attestationType = attestationType
        self.attestationTrusted = attestationTrusted
    }
}

/// The server's record of a credential, as needed to check an assertion.
public struct StoredCredential: Sendable {
    public var credentialId: [UInt8]
    public var publicKeyCOSE: [UInt8]
    public var signCount: UInt32
    public var backupEligible: Bool

    public init(credentialId: [UInt8], publicKeyCOSE: [UInt8], signCount: UInt32, backupEligible: Bool) {
        self.credentialId = credentialId
        self.publicKeyCOSE = publicKeyCOSE
        self.signCount = signCount
        self.backupEligible = backupEligible
    }
}

/// What a successful assertion yields; the caller updates the stored credential with it.
public struct VerifiedAssertion: Sendable {
    /// The counter the authenticator reported (store it unless the counter regressed).
    public var signCount: UInt32
    /// True when the counter did not increase although it is in use (not both 0): a possible cloned
    /// authenticator. Not an error here: the caller's policy refuses or flags.
    public var counterRegressed: Bool
    public var userVerified: Bool
    public var backupState: Bool
    public var backupEligible: Bool
    /// The decoded `userHandle`, nil when absent or empty.
    public var userHandle: [UInt8]?

    public init(
        signCount: UInt32, counterRegressed: Bool, userVerified: Bool, backupState: Bool, backupEligible: Bool,
        userHandle: [UInt8]? = nil
    ) {
        self.signCount = signCount
        self.counterRegressed = counterRegressed
        self.userVerified = userVerified
        self.backupState = backupState
        self.backupEligible = backupEligible
        self.userHandle = userHandle
    }
}
