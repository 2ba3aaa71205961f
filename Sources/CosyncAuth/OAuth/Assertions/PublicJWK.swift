import Foundation
import JWTKit

/// Public keys from outside the server as JWKs (RFC 7517): what an app registers for its backend's
/// assertions (a JWK, or a PEM turned into one), and what a JWK set (a backend's, an upstream
/// provider's) holds. Three kinds, each with the algorithms it may verify:
/// - `RSA` (2048–8192 bits): RS256, PS256;
/// - `EC` on P-256: ES256;
/// - `OKP` on Ed25519: EdDSA.
///
/// A key that names `alg` verifies only that algorithm; one with `use` other than `sig` nothing. A
/// private key is refused outright: whoever sent it has leaked it.
enum PublicJWK {
    struct Invalid: Error, Sendable, Equatable { let reason: String }

    /// The members that only a private or symmetric key has.
    static let secretMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// The key reduced to its public members (`kty`, the key's numbers, `alg`, `use`, `kid`), once
    /// checked: the right members for its type, valid base64url, a usable key.
    static func normalized(_ jwk: [String: JSONValue]) throws(Invalid) -> [String: JSONValue] {
        if let member = secretMembers.first(where: { jwk[$0] != nil }) {
            throw Invalid(reason: "holds private key material (\(member)); register the public key only")
        }
        guard let kty = jwk["kty"]?.stringValue else { throw Invalid(reason: "has no kty") }
        func text(_ name: String, maxBytes: Int = 2048) throws(Invalid) -> String {
            guard let value = jwk[name]?.stringValue, !value.isEmpty, value.utf8.count <= maxBytes,
                  value.utf8.allSatisfy(isBase64URL)
            else { throw Invalid(reason: "needs \(name) in base64url") }
            return value
        }
        var out: [String: JSONValue] = ["kty": .string(kty)]
        switch kty {
        case "RSA":
            out["n"] = .string(try text("n"))
            out["e"] = .string(try text("e", maxBytes: 16))
        case "EC":
            guard jwk["crv"]?.stringValue == "P-256" else { throw Invalid(reason: "an EC key must be on P-256 (ES256)") }
            out["crv"] = .string("P-256")
            out["x"] = .string(try text("x", maxBytes: 64))
            out["y"] = .string(try text("y", maxBytes: 64))
        case "OKP":
            guard jwk["crv"]?.stringValue == "Ed25519" else { throw Invalid(reason: "an OKP key must be on Ed25519 (EdDSA)") }
            out["crv"] = .string("Ed25519")
            out["x"] = .string(try text("x", maxBytes: 64))
        default:
            throw Invalid(reason: "kty must be RSA, EC or OKP")
        }
        if let alg = jwk["alg"] {
            guard let name = alg.stringValue, algorithms(kty: kty).contains(name) else {
                throw Invalid(reason: "alg must be one of \(algorithms(kty: kty).joined(separator: ", ")) for a \(kty) key")
            }
            out["alg"] = .string(name)
        }
        if let use = jwk["use"] {
            guard use.stringValue == "sig" else { throw Invalid(reason: "use must be sig") }
            out["use"] = .string("sig")
        }
        if let kid = jwk["kid"] {
            guard let text = kid.stringValue, SignedJWT.isPlainText(text, max: 256) else { throw Invalid(reason: "kid must be 1-256 characters") }
            out["kid"] = .string(text)
        }
        guard usable(out) else { throw Invalid(reason: "is not a usable \(kty) public key") }
        return out
    }

    /// A PEM public key (SubjectPublicKeyInfo: RSA, P-256 or Ed25519) as a JWK.
    static func fromPEM(_ pem: String) throws(Invalid) -> [String: JSONValue] {
        guard pem.utf8.count <= 16_384, pem.contains("-----BEGIN PUBLIC KEY-----") || pem.contains("-----BEGIN RSA PUBLIC KEY-----") else {
            throw Invalid(reason: pem.contains("PRIVATE KEY") ? "is a private key; register the public key only" : "is not a PEM public key")
        }
        if let rsa = try? Insecure.RSA.PublicKey(pem: pem), let numbers = try? rsa.getKeyPrimitives() {
            return try normalized([
                "kty": .string("RSA"), "n": .string(Base64URL.encode(numbers.modulus)), "e": .string(Base64URL.encode(numbers.publicExponent)),
            ])
        }
        if let ec = try? ES256PublicKey(pem: pem), let point = ec.parameters {
            return try normalized(["kty": .string("EC"), "crv": .string("P-256"), "x": .string(point.x), "y": .string(point.y)])
        }
        if let ed = try? EdDSA.PublicKey(pem: pem) {
            return try normalized(["kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string(Base64URL.encode(ed.rawRepresentation))])
        }
        throw Invalid(reason: "is not an RSA (2048 bits or more), P-256 or Ed25519 public key")
    }

    static func algorithms(kty: String) -> [String] {
        switch kty {
        case "RSA": ["RS256", "PS256"]
        case "EC": ["ES256"]
        case "OKP": ["EdDSA"]
        default: []
        }
    }

    /// What a normalised key may verify: its `alg` alone when it names one.
    static func algorithms(of jwk: [String: JSONValue]) -> [String] {
        guard jwk["use"] == nil || jwk["use"]?.stringValue == "sig" else { return [] }
        let all = algorithms(kty: jwk["kty"]?.stringValue ?? "")
        if let alg = jwk["alg"] { return all.filter { $0 == alg.stringValue } }
        return all
    }

    /// Whether JWTKit can build the verifier of every algorithm the key allows.
    static func usable(_ jwk: [String: JSONValue]) -> Bool {
        if jwk["kty"]?.stringValue == "RSA" {
            // At most 8192 bits: a bigger modulus only makes every check slower.
            guard let n = jwk["n"]?.stringValue, let bytes = Base64URL.decodeLenient(n), bytes.count <= 1025 else { return false }
        }
        return (try? verifier(jwk, algorithm: algorithms(of: jwk).first ?? "")) != nil
    }

    /// Adds the key to `keys` as the verifier of `algorithm` (the collection's only key).
    static func add(_ jwk: [String: JSONValue], algorithm: String, to keys: JWTKeyCollection) async throws {
        switch try verifier(jwk, algorithm: algorithm) {
        case .rsa(let key): await keys.add(rsa: key, digestAlgorithm: .sha256)
        case .pss(let key): await keys.add(pss: key, digestAlgorithm: .sha256)
        case .ecdsa(let key): await keys.add(ecdsa: key)
        case .eddsa(let key): await keys.add(eddsa: key)
        }
    }

    enum Verifier {
        case rsa(Insecure.RSA.PublicKey), pss(Insecure.RSA.PublicKey), ecdsa(ES256PublicKey), eddsa(EdDSA.PublicKey)
    }

    struct Unsupported: Error {}

    static func verifier(_ jwk: [String: JSONValue], algorithm: String) throws -> Verifier {
        let member = { (name: String) throws -> String in
            guard let value = jwk[name]?.stringValue else { throw Unsupported() }
            return value
        }
        switch (jwk["kty"]?.stringValue ?? "", algorithm) {
        case ("RSA", "RS256"): return .rsa(try Insecure.RSA.PublicKey(modulus: try member("n"), exponent: try member("e")))
        case ("RSA", "PS256"): return .pss(try Insecure.RSA.PublicKey(modulus: try member("n"), exponent: try member("e")))
        case ("EC", "ES256") where jwk["crv"]?.stringValue == "P-256":
            return .ecdsa(try ES256PublicKey(parameters: (try member("x"), try member("y"))))
        case ("OKP", "EdDSA") where jwk["crv"]?.stringValue == "Ed25519":
            return .eddsa(try EdDSA.PublicKey(x: try member("x"), curve: .ed25519))
        default: throw Unsupported()
        }
    }

    /// A character of the base64url alphabet (RFC 4648 §5), without padding.
    static func isBase64URL(_ c: UInt8) -> Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
    }
}
