/// Every way a WebAuthn ceremony response can be refused. The verifier throws nothing else: any
/// byte sequence a client sends ends in one of these cases, never in a trap.
public enum WebAuthnError: Error, Sendable, Equatable {
    /// Undecodable input: bad base64url, bad JSON, bad CBOR (truncated, oversized, trailing bytes,
    /// nesting too deep, duplicate keys, ...), a structure missing a field or with a wrong type.
    /// The associated text says which part.
    case malformed(String)
    /// The credential `type` is not `public-key`, or clientData `type` is not the ceremony's type.
    case wrongType
    /// The challenge in clientDataJSON is not the one the server issued.
    case challengeMismatch
    /// clientDataJSON `origin` is not in the relying party's allow-list.
    case originNotAllowed
    /// clientDataJSON says the ceremony ran in a cross-origin frame (`crossOrigin: true` or `topOrigin`).
    case crossOrigin
    /// authenticatorData `rpIdHash` is not SHA-256 of the relying party id.
    case rpIdMismatch
    /// The UP flag is not set.
    case userNotPresent
    /// The UV flag is not set although the relying party requires user verification.
    case userNotVerified
    /// BS without BE, or (on assertion) BE differs from the value stored at registration.
    case backupFlagsInvalid
    /// The credential id in authenticatorData, `id`, `rawId` and the stored credential disagree.
    case credentialIdMismatch
    /// The key's algorithm is not one the relying party accepts.
    case unsupportedAlgorithm
    /// The COSE key is inconsistent, too weak, or not a valid point / modulus.
    case invalidPublicKey
    /// The assertion signature does not verify.
    case badSignature
    /// The attestation statement is present but wrong; the text says what is wrong.
    case attestationInvalid(String)
    /// The relying party demands a verified attestation and this response has none.
    case attestationRequired

    /// A short human-readable explanation, safe to show to a client (it never echoes input).
    public var message: String {
        switch self {
        case .malformed(let what): return "malformed WebAuthn data: \(what)"
        case .wrongType: return "wrong credential or ceremony type"
        case .challengeMismatch: return "challenge does not match"
        case .originNotAllowed: return "origin is not allowed"
        case .crossOrigin: return "cross-origin ceremonies are not accepted"
        case .rpIdMismatch: return "relying party id does not match"
        case .userNotPresent: return "user presence flag not set"
        case .userNotVerified: return "user verification required"
        case .backupFlagsInvalid: return "backup flags are inconsistent"
        case .credentialIdMismatch: return "credential id does not match"
        case .unsupportedAlgorithm: return "unsupported public key algorithm"
        case .invalidPublicKey: return "invalid public key"
        case .badSignature: return "signature does not verify"
        case .attestationInvalid(let what): return "attestation statement invalid: \(what)"
        case .attestationRequired: return "a verified attestation is required"
        }
    }
}

extension WebAuthnError: CustomStringConvertible {
    public var description: String { message }
}
