/// The authenticatorData structure (WebAuthn §6.1): RP ID hash, flags, counter, then optionally the
/// attested credential data and an extensions map. Parsing is strict: every structure the flags
/// announce must be present and well-formed, and nothing may follow the last one.
public struct AuthenticatorData: Sendable {
    /// Flag bits of byte 32.
    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let userPresent = Flags(rawValue: 0x01)
        public static let userVerified = Flags(rawValue: 0x04)
        public static let backupEligible = Flags(rawValue: 0x08)
        public static let backupState = Flags(rawValue: 0x10)
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// The part present when AT is set.
    public struct AttestedCredential: Sendable {
        public let aaguid: [UInt8]
        public let credentialId: [UInt8]
        /// The COSE_Key bytes exactly as encoded.
        public let publicKeyCOSE: [UInt8]
        public let publicKey: COSEKey
    }

    /// Fixed part: 32 + 1 + 4 bytes.
    public static let minimumLength = 37
    /// Credential ids longer than this are refused (WebAuthn caps them at 1023 bytes).
    public static let maximumCredentialIdLength = 1023
    /// COSE public keys longer than this are refused: the store holds at most 2048 bytes, and no key
    /// this server accepts (P-256, Ed25519, RSA up to 8192 bits) comes near it.
    public static let maximumPublicKeyLength = 2048

    public let rpIdHash: [UInt8]
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredential: AttestedCredential?
    public let extensions: CBORValue?

    public init(_ bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= WebAuthn.maxAuthenticatorDataBytes else { throw .malformed("authenticatorData too large") }
        guard bytes.count >= Self.minimumLength else { throw .malformed("authenticatorData too short") }
        rpIdHash = Array(bytes[0..<32])
        flags = Flags(rawValue: bytes[32])
        signCount = UInt32(bytes[33]) << 24 | UInt32(bytes[34]) << 16 | UInt32(bytes[35]) << 8 | UInt32(bytes[36])
        var position = Self.minimumLength
        if flags.contains(.attestedCredentialData) {
            // aaguid (16) + length (2)
            guard bytes.count - position >= 18 else { throw .malformed("attested credential data truncated") }
            let aaguid = Array(bytes[position..<(position + 16)])
            let length = Int(bytes[position + 16]) << 8 | Int(bytes[position + 17])
            position += 18
            guard length >= 1, length <= Self.maximumCredentialIdLength else { throw .malformed("credential id length out of range") }
            guard bytes.count - position >= length else { throw .malformed("credential id truncated") }
            let credentialId = Array(bytes[position..<(position + length)])
            position += length
            let (key, consumed) = try COSEKey.parsePrefix(bytes[position...])
            guard consumed <= Self.maximumPublicKeyLength else { throw .malformed("credential public key too long") }
            let keyBytes = Array(bytes[position..<(position + consumed)])
            position += consumed
            attestedCredential = AttestedCredential(aaguid: aaguid, credentialId: credentialId, publicKeyCOSE: keyBytes, publicKey: key)
        } else {
            attestedCredential = nil
        }
        if flags.contains(.extensionData) {
            guard position < bytes.count else { throw .malformed("extensions flagged but absent") }
            let (value, consumed) = try CBOR.decodePrefix(bytes[position...])
            guard case .map = value else { throw .malformed("extensions are not a map") }
            extensions = value
            position += consumed
        } else {
            extensions = nil
        }
        guard position == bytes.count else { throw .malformed("authenticatorData has trailing bytes") }
    }
}
