import Crypto
import _CryptoExtras

/// COSE algorithm identifiers this verifier can check signatures for.
public enum COSEAlgorithm: Int, Sendable, CaseIterable {
    /// ECDSA P-256 with SHA-256 (signatures DER-encoded, as WebAuthn sends them).
    case es256 = -7
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = -257
    /// Ed25519.
    case edDSA = -8
}

/// A credential public key read from its COSE_Key encoding (RFC 9052/9053). Only the three
/// WebAuthn key shapes are accepted, and every one is validated while it is built.
public struct COSEKey: Sendable {
    public enum Key: Sendable {
        case p256(P256.Signing.PublicKey)
        case rsa(_RSA.Signing.PublicKey)
        case ed25519(Curve25519.Signing.PublicKey)
    }

    public let algorithm: COSEAlgorithm
    public let key: Key

    /// Smallest and largest RSA moduli accepted, in bits.
    public static let minimumRSABits = 2048
    public static let maximumRSABits = 8192

    /// Reads the COSE_Key at the start of `bytes`; returns it with the number of bytes it took.
    public static func parsePrefix(_ bytes: ArraySlice<UInt8>) throws(WebAuthnError) -> (key: COSEKey, consumed: Int) {
        let (value, consumed) = try CBOR.decodePrefix(bytes)
        return (try COSEKey(value), consumed)
    }

    /// Reads a COSE_Key that must fill `bytes` exactly.
    public static func parse(_ bytes: [UInt8]) throws(WebAuthnError) -> COSEKey {
        try COSEKey(CBOR.decode(bytes[...]))
    }

    /// Builds the key from a decoded COSE_Key map.
    public init(_ map: CBORValue) throws(WebAuthnError) {
        guard case .map(let entries) = map else { throw .malformed("COSE key is not a map") }
        // COSE key labels are integers; text labels have no meaning for WebAuthn keys.
        for entry in entries where entry.key.intValue == nil { throw .malformed("COSE key label is not an integer") }
        guard let kty = map[int: 1]?.intValue else { throw .malformed("COSE key without kty") }
        guard let algId = map[int: 3]?.intValue else { throw .malformed("COSE key without alg") }
        guard let alg = COSEAlgorithm(rawValue: algId) else { throw .unsupportedAlgorithm }
        func bytes(_ label: Int) throws(WebAuthnError) -> [UInt8] {
            guard case .bytes(let b)? = map[int: label] else { throw .invalidPublicKey }
            return b
        }
        switch alg {
        case .es256:
            guard kty == 2, map[int: -1]?.intValue == 1 else { throw .invalidPublicKey }
            let x = try bytes(-2), y = try bytes(-3)
            guard x.count == 32, y.count == 32 else { throw .invalidPublicKey }
            // The x9.63 initializer refuses points that are not on the curve.
            guard let key = try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y) else { throw .invalidPublicKey }
            self.key = .p256(key)
        case .rs256:
            guard kty == 3 else { throw .invalidPublicKey }
            let n = Array(try bytes(-1).drop(while: { $0 == 0 }))
            let e = Array(try bytes(-2).drop(while: { $0 == 0 }))
            guard let top = n.first else { throw .invalidPublicKey }
            let bits = (n.count - 1) * 8 + (8 - top.leadingZeroBitCount)
            guard bits >= Self.minimumRSABits, bits <= Self.maximumRSABits else { throw .invalidPublicKey }
            // Public exponent: odd, at least 3, at most 4 bytes (what BoringSSL accepts for verification).
            guard let eLast = e.last, e.count <= 4, eLast & 1 == 1, e.count > 1 || eLast >= 3 else { throw .invalidPublicKey }
            guard let key = try? _RSA.Signing.PublicKey(n: n, e: e) else { throw .invalidPublicKey }
            self.key = .rsa(key)
        case .edDSA:
            guard kty == 1, map[int: -1]?.intValue == 6 else { throw .invalidPublicKey }
            let x = try bytes(-2)
            guard x.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: x) else { throw .invalidPublicKey }
            self.key = .ed25519(key)
        }
        self.algorithm = alg
    }

    /// Wraps an already validated key (used for keys taken from certificates).
    init(algorithm: COSEAlgorithm, key: Key) {
        self.algorithm = algorithm
        self.key = key
    }

    /// Checks a WebAuthn signature over `data` (the verifier hashes it as the algorithm says).
    public func isValidSignature(_ signature: [UInt8], for data: [UInt8]) -> Bool {
        switch key {
        case .p256(let key):
            guard let sig = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(sig, for: data)
        case .rsa(let key):
            let sig = _RSA.Signing.RSASignature(rawRepresentation: signature)
            return key.isValidSignature(sig, for: data, padding: .insecurePKCS1v1_5)
        case .ed25519(let key):
            return key.isValidSignature(signature, for: data)
        }
    }
}
