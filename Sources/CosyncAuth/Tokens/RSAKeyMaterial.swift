import Crypto
import Foundation
import _CryptoExtras

/// An RSA-2048 key pair in the legacy text layout: PKCS#1 PEM private key, SPKI PEM public key, both
/// with 64-character lines, `\n` breaks and no trailing newline (<doc:LegacyImport> §1.4). The
/// `kid` is the RFC 7638 JWK thumbprint of the public key.
public struct RSAKeyMaterial: Sendable {
    public let kid: String
    public let privateKeyPEM: String
    public let publicKeyPEM: String

    public enum Failure: Error, CustomStringConvertible {
        case badPrivateKey, badPublicKey, keyPairMismatch
        public var description: String {
            switch self {
            case .badPrivateKey: "the private key is not an RSA PEM key of 2048 bits or more"
            case .badPublicKey: "the public key is not an RSA SPKI PEM key"
            case .keyPairMismatch: "the public key does not belong to the private key"
            }
        }
    }

    /// A fresh RSA-2048 key pair (e = 65537).
    public static func generate() throws -> RSAKeyMaterial {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return try RSAKeyMaterial(privateKeyPEM: key.pemRepresentation)
    }

    /// From a PKCS#1 or PKCS#8 private key PEM; the public half is derived from it.
    public init(privateKeyPEM: String, expectedPublicKeyPEM: String? = nil) throws {
        guard let key = try? _RSA.Signing.PrivateKey(pemRepresentation: privateKeyPEM) else { throw Failure.badPrivateKey }
        let publicPEM = Self.legacyLayout(key.publicKey.pemRepresentation)
        if let expected = expectedPublicKeyPEM {
            guard let given = try? _RSA.Signing.PublicKey(pemRepresentation: expected) else { throw Failure.badPublicKey }
            guard given.derRepresentation == key.publicKey.derRepresentation else { throw Failure.keyPairMismatch }
        }
        self.privateKeyPEM = Self.legacyLayout(Self.pkcs1PEM(key))
        self.publicKeyPEM = expectedPublicKeyPEM.map(Self.legacyLayout) ?? publicPEM
        self.kid = try Self.thumbprint(key.publicKey)
    }

    /// Throws unless `pem` is an RSA public key (SPKI PEM).
    public static func publicKeyCheck(_ pem: String) throws {
        guard (try? _RSA.Signing.PublicKey(pemRepresentation: pem)) != nil else { throw Failure.badPublicKey }
    }

    /// `rawPublicKey`: base64 of the SPKI PEM text, what the SDKs' `configure(rawPublicKey:)` takes.
    public var rawPublicKey: String { Data(publicKeyPEM.utf8).base64EncodedString() }

    /// The public key as a JWK (RFC 7517) for the JWKS endpoint.
    public static func jwk(publicKeyPEM: String, kid: String) throws -> [String: String] {
        let key = try _RSA.Signing.PublicKey(pemRepresentation: publicKeyPEM)
        let primitives = try key.getKeyPrimitives()
        return [
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent),
        ]
    }

    static func thumbprint(_ key: _RSA.Signing.PublicKey) throws -> String {
        let primitives = try key.getKeyPrimitives()
        let canonical = #"{"e":"\#(Base64URL.encode(primitives.publicExponent))","kty":"RSA","n":"\#(Base64URL.encode(primitives.modulus))"}"#
        return Base64URL.encode(SHA256.hash(data: Data(canonical.utf8)))
    }

    /// PKCS#1 (`BEGIN RSA PRIVATE KEY`), whatever form the key was read from.
    static func pkcs1PEM(_ key: _RSA.Signing.PrivateKey) -> String {
        let pem = key.pemRepresentation
        if pem.contains("BEGIN RSA PRIVATE KEY") { return pem }
        // swift-crypto gives PKCS#1 DER through derRepresentation for private keys.
        let body = key.derRepresentation.base64EncodedString()
        return "-----BEGIN RSA PRIVATE KEY-----\n" + wrap(body) + "\n-----END RSA PRIVATE KEY-----"
    }

    static func wrap(_ body: String) -> String {
        var lines: [Substring] = []
        var rest = Substring(body)
        while !rest.isEmpty {
            lines.append(rest.prefix(64))
            rest = rest.dropFirst(64)
        }
        return lines.joined(separator: "\n")
    }

    /// Normalises a PEM text: `\n` line breaks, no trailing newline.
    static func legacyLayout(_ pem: String) -> String {
        pem.replacingOccurrences(of: "\r\n", with: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
