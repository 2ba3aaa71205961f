import Crypto
import Foundation
import _CryptoExtras

/// The public key in a DPoP proof's `jwk` header (RFC 9449 §4.2), checked and turned into a swift-crypto
/// key, with its RFC 7638 thumbprint. Only the members a public key needs are read; a JWK that carries
/// private members is refused, as is an RSA key below 2048 bits.
struct DPoPKey: Sendable {
    enum Kind: Sendable {
        case p256(P256.Signing.PublicKey)
        case ed25519(Curve25519.Signing.PublicKey)
        case rsa(_RSA.Signing.PublicKey, modulusBytes: Int)
    }

    let kind: Kind
    /// base64url(SHA-256) of the key's canonical JSON (RFC 7638 §3): the `jkt` tokens are bound to.
    let thumbprint: String

    /// Members that only a private (or symmetric) key has: RFC 7518 §6.2.2, §6.3.2, §6.4 and RFC 8037 §2.
    static let privateMembers: Set<String> = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]
    static let rsaMinimumBits = 2048
    /// Larger keys buy nothing here and make every check slower.
    static let rsaMaximumBits = 8192

    /// Reads `jwk` for a proof signed with `alg` (one of `DPoPVerifier.algorithms`).
    init(jwk: [String: JSONValue], alg: String) throws(DPoPRefusal) {
        if let member = jwk.keys.first(where: { Self.privateMembers.contains($0) }) {
            throw DPoPRefusal("the jwk header holds a private key member (\(member)); send the public key only")
        }
        guard let kty = jwk["kty"]?.stringValue else { throw DPoPRefusal("the jwk header has no kty") }
        switch (alg, kty) {
        case ("ES256", "EC"):
            guard jwk["crv"]?.stringValue == "P-256" else { throw DPoPRefusal("ES256 needs a P-256 key (crv)") }
            let x = try Self.member(jwk, "x"), y = try Self.member(jwk, "y")
            guard x.bytes.count == 32, y.bytes.count == 32 else { throw DPoPRefusal("a P-256 key has 32-byte x and y") }
            guard let key = try? P256.Signing.PublicKey(rawRepresentation: x.bytes + y.bytes) else {
                throw DPoPRefusal("the jwk is not a point on P-256")
            }
            kind = .p256(key)
            thumbprint = Self.thumbprint(#"{"crv":"P-256","kty":"EC","x":"\#(x.text)","y":"\#(y.text)"}"#)
        case ("EdDSA", "OKP"):
            guard let crv = jwk["crv"]?.stringValue else { throw DPoPRefusal("the jwk header has no crv") }
            guard crv == "Ed25519" else { throw DPoPRefusal("EdDSA proofs must use an Ed25519 key (crv \(crv) is not supported)") }
            let x = try Self.member(jwk, "x")
            guard x.bytes.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: x.bytes) else {
                throw DPoPRefusal("an Ed25519 key has a 32-byte x")
            }
            kind = .ed25519(key)
            thumbprint = Self.thumbprint(#"{"crv":"Ed25519","kty":"OKP","x":"\#(x.text)"}"#)
        case ("RS256", "RSA"), ("PS256", "RSA"):
            let n = try Self.member(jwk, "n"), e = try Self.member(jwk, "e")
            // RFC 7518 §6.3.1: both are unsigned big-endian integers in their shortest form.
            guard let top = n.bytes.first, top != 0 else { throw DPoPRefusal("the RSA modulus (n) has a leading zero octet") }
            let bits = (n.bytes.count - 1) * 8 + (8 - top.leadingZeroBitCount)
            guard bits >= Self.rsaMinimumBits else { throw DPoPRefusal("the RSA key has \(bits) bits; at least \(Self.rsaMinimumBits) are required") }
            guard bits <= Self.rsaMaximumBits else { throw DPoPRefusal("the RSA key has \(bits) bits; at most \(Self.rsaMaximumBits) are accepted") }
            guard let eTop = e.bytes.first, eTop != 0, e.bytes.count <= 4, let eLast = e.bytes.last, eLast & 1 == 1,
                  e.bytes.count > 1 || eTop >= 3
            else { throw DPoPRefusal("the RSA public exponent (e) is not a small odd integer in shortest form") }
            guard let key = try? _RSA.Signing.PublicKey(n: n.bytes, e: e.bytes) else { throw DPoPRefusal("the RSA key is not valid") }
            kind = .rsa(key, modulusBytes: n.bytes.count)
            thumbprint = Self.thumbprint(#"{"e":"\#(e.text)","kty":"RSA","n":"\#(n.text)"}"#)
        default:
            throw DPoPRefusal("alg \(alg) does not go with a key of type \(kty)")
        }
    }

    /// Whether `signature` signs `input` (the JWS signing input) with this key under `alg`.
    func isValidSignature(_ signature: [UInt8], for input: [UInt8], alg: String) -> Bool {
        switch (kind, alg) {
        case (.p256(let key), "ES256"):
            // JWS carries ECDSA signatures as r ‖ s (RFC 7518 §3.4), 64 bytes for P-256.
            guard signature.count == 64, let sig = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
            return key.isValidSignature(sig, for: input)
        case (.ed25519(let key), "EdDSA"):
            guard signature.count == 64 else { return false }
            return key.isValidSignature(signature, for: input)
        case (.rsa(let key, let modulusBytes), "RS256"), (.rsa(let key, let modulusBytes), "PS256"):
            guard signature.count == modulusBytes else { return false }
            let padding: _RSA.Signing.Padding = alg == "RS256" ? .insecurePKCS1v1_5 : .PSS
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input, padding: padding)
        default:
            return false
        }
    }

    /// A base64url member of the JWK, decoded strictly: its text is then already canonical, which is
    /// what the thumbprint hashes.
    private static func member(_ jwk: [String: JSONValue], _ name: String) throws(DPoPRefusal) -> (text: String, bytes: [UInt8]) {
        guard let text = jwk[name]?.stringValue else { throw DPoPRefusal("the jwk header has no \(name)") }
        guard let bytes = StrictBase64URL.decode(text) else { throw DPoPRefusal("jwk member \(name) is not unpadded base64url") }
        return (text, bytes)
    }

    private static func thumbprint(_ canonical: String) -> String {
        Base64URL.encode(SHA256.hash(data: Data(canonical.utf8)))
    }
}

/// Why a DPoP proof is refused, in a sentence for the client's developer.
struct DPoPRefusal: Error, Sendable {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// base64url without padding (RFC 7515 §2), strictly: only the URL-safe alphabet, and no stray bits in
/// the last character, so that every byte string has exactly one accepted text.
enum StrictBase64URL {
    static func decode(_ text: String) -> [UInt8]? { decode(bytes: text.utf8) }

    static func decode(bytes: some Collection<UInt8>) -> [UInt8]? {
        let utf8 = Array(bytes)
        guard utf8.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = (buffer << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        // What is left over must be zero bits (otherwise a second text would decode to the same bytes).
        guard buffer == 0 else { return nil }
        return out
    }
}
