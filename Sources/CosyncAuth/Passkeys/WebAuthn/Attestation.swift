import Crypto
import Foundation
import SwiftASN1
import X509
import _CryptoExtras

/// Checks of the attestation statement (WebAuthn §8) for the formats this server understands:
/// `none`, `packed` (self and with an attestation certificate) and `apple` (anonymous attestation).
/// Any other format is accepted unchecked and reported as `.unknown`; the relying-party policy
/// decides whether that is enough.
enum Attestation {
    struct Outcome {
        var type: WebAuthnAttestationType
        /// The statement's cryptography and certificate checks passed.
        var verified: Bool
        /// A certificate statement chained to a configured trust anchor.
        var trusted: Bool
    }

    /// FIDO extension carrying the authenticator model's AAGUID in an attestation certificate.
    static let fidoAAGUIDExtension: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]
    /// Apple extension carrying the nonce SHA-256(authenticatorData ‖ clientDataHash).
    static let appleNonceExtension: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 8, 2]
    /// Most certificates accepted in x5c (leaf plus intermediates).
    static let maximumChainLength = 5
    /// Largest single certificate accepted, in bytes.
    static let maximumCertificateBytes = 4096

    static func verify(
        format: String, statement: CBORValue, authData: [UInt8], clientDataHash: [UInt8],
        credential: AuthenticatorData.AttestedCredential, trustAnchorsDER: [[UInt8]], now: Date
    ) throws(WebAuthnError) -> Outcome {
        guard case .map(let entries) = statement else { throw .malformed("attStmt is not a map") }
        switch format {
        case "none":
            guard entries.isEmpty else { throw .attestationInvalid("fmt none with a non-empty statement") }
            return Outcome(type: .none, verified: false, trusted: false)
        case "packed":
            return try packed(statement, signedData: authData + clientDataHash, credential: credential, anchors: trustAnchorsDER, now: now)
        case "apple":
            return try apple(statement, signedData: authData + clientDataHash, credential: credential, anchors: trustAnchorsDER, now: now)
        default:
            return Outcome(type: .unknown, verified: false, trusted: false)
        }
    }

    // MARK: packed

    private static func packed(
        _ statement: CBORValue, signedData: [UInt8], credential: AuthenticatorData.AttestedCredential, anchors: [[UInt8]], now: Date
    ) throws(WebAuthnError) -> Outcome {
        guard case .map(let entries) = statement else { throw .malformed("attStmt is not a map") }
        for entry in entries {
            guard case .text(let name) = entry.key, ["alg", "sig", "x5c"].contains(name) else {
                throw .attestationInvalid("packed statement has an unexpected member")
            }
        }
        guard let algId = statement[text: "alg"]?.intValue else { throw .attestationInvalid("packed statement without alg") }
        guard case .bytes(let signature)? = statement[text: "sig"] else { throw .attestationInvalid("packed statement without sig") }

        guard let x5cValue = statement[text: "x5c"] else {
            // Self attestation: the credential key signs its own registration.
            guard algId == credential.publicKey.algorithm.rawValue else {
                throw .attestationInvalid("self attestation alg differs from the credential key")
            }
            guard credential.publicKey.isValidSignature(signature, for: signedData) else {
                throw .attestationInvalid("self attestation signature does not verify")
            }
            return Outcome(type: .selfAttestation, verified: true, trusted: false)
        }

        let chain = try certificates(x5cValue)
        guard let leaf = chain.first else { throw .attestationInvalid("x5c is empty") }
        guard let alg = COSEAlgorithm(rawValue: algId) else { throw .attestationInvalid("unsupported attestation alg") }
        guard let leafKey = key(of: leaf, algorithm: alg) else {
            throw .attestationInvalid("attestation certificate key does not match alg")
        }
        guard leafKey.isValidSignature(signature, for: signedData) else {
            throw .attestationInvalid("attestation signature does not verify")
        }
        try checkPackedLeaf(leaf, aaguid: credential.aaguid)
        let trusted = anchors.isEmpty ? false : chainIsTrusted(leaf: leaf, intermediates: Array(chain.dropFirst()), anchorsDER: anchors, now: now)
        return Outcome(type: .basic, verified: true, trusted: trusted)
    }

    /// The requirements on a packed attestation certificate (WebAuthn §8.2.1).
    private static func checkPackedLeaf(_ leaf: Certificate, aaguid: [UInt8]) throws(WebAuthnError) {
        guard leaf.version == .v3 else { throw .attestationInvalid("attestation certificate is not X.509 v3") }
        let constraints: BasicConstraints?
        do { constraints = try leaf.extensions.basicConstraints } catch { throw .attestationInvalid("unreadable basic constraints") }
        // Absent basic constraints mean "not a CA" in X.509; an explicit CA=true is refused.
        if case .isCertificateAuthority? = constraints { throw .attestationInvalid("attestation certificate is a CA") }
        let hasUnit = leaf.subject.contains { rdn in
            rdn.contains { attribute in
                attribute.type == .RDNAttributeType.organizationalUnitName
                    && String(attribute.value) == "Authenticator Attestation"
            }
        }
        guard hasUnit else { throw .attestationInvalid("attestation certificate subject lacks OU Authenticator Attestation") }
        if let ext = leaf.extensions[oid: fidoAAGUIDExtension] {
            guard !ext.critical else { throw .attestationInvalid("AAGUID extension is critical") }
            let inner: ASN1OctetString
            do { inner = try ASN1OctetString(derEncoded: ext.value) } catch { throw .attestationInvalid("unreadable AAGUID extension") }
            guard Array(inner.bytes) == aaguid else { throw .attestationInvalid("certificate AAGUID differs from authenticatorData") }
        }
    }

    // MARK: apple

    private static func apple(
        _ statement: CBORValue, signedData: [UInt8], credential: AuthenticatorData.AttestedCredential, anchors: [[UInt8]], now: Date
    ) throws(WebAuthnError) -> Outcome {
        guard let x5cValue = statement[text: "x5c"] else { throw .attestationInvalid("apple statement without x5c") }
        let chain = try certificates(x5cValue)
        guard let credentialCertificate = chain.first else { throw .attestationInvalid("x5c is empty") }
        let nonce = Array(SHA256.hash(data: signedData))
        guard let ext = credentialCertificate.extensions[oid: appleNonceExtension] else {
            throw .attestationInvalid("apple certificate without nonce extension")
        }
        let certified: [UInt8]
        do {
            let root = try DER.parse(ext.value)
            certified = try DER.sequence(root, identifier: .sequence) { nodes in
                try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { node in
                    Array(try ASN1OctetString(derEncoded: node).bytes)
                }
            }
        } catch {
            throw .attestationInvalid("unreadable apple nonce extension")
        }
        guard certified == nonce else { throw .attestationInvalid("apple nonce does not match") }
        guard credentialCertificate.publicKey == certificateKey(credential.publicKey) else {
            throw .attestationInvalid("apple certificate key differs from the credential key")
        }
        let trusted = anchors.isEmpty
            ? false : chainIsTrusted(leaf: credentialCertificate, intermediates: Array(chain.dropFirst()), anchorsDER: anchors, now: now)
        return Outcome(type: .anonymizationCA, verified: true, trusted: trusted)
    }

    // MARK: certificates

    /// Decodes x5c: an array of 1...maximumChainLength DER certificates.
    private static func certificates(_ value: CBORValue) throws(WebAuthnError) -> [Certificate] {
        guard case .array(let items) = value, !items.isEmpty, items.count <= maximumChainLength else {
            throw .attestationInvalid("x5c is not a short non-empty array")
        }
        var result: [Certificate] = []
        for item in items {
            guard case .bytes(let der) = item, der.count <= maximumCertificateBytes else {
                throw .attestationInvalid("x5c entry is not a certificate")
            }
            do { result.append(try Certificate(derEncoded: der)) } catch { throw .attestationInvalid("x5c entry is not a DER certificate") }
        }
        return result
    }

    /// The certificate's key as a signature checker for `algorithm`, or nil when they do not match.
    private static func key(of certificate: Certificate, algorithm: COSEAlgorithm) -> COSEKey? {
        switch algorithm {
        case .es256:
            return P256.Signing.PublicKey(certificate.publicKey).map { COSEKey(algorithm: .es256, key: .p256($0)) }
        case .rs256:
            return _RSA.Signing.PublicKey(certificate.publicKey).map { COSEKey(algorithm: .rs256, key: .rsa($0)) }
        case .edDSA:
            return Curve25519.Signing.PublicKey(certificate.publicKey).map { COSEKey(algorithm: .edDSA, key: .ed25519($0)) }
        }
    }

    private static func certificateKey(_ key: COSEKey) -> Certificate.PublicKey {
        switch key.key {
        case .p256(let k): return Certificate.PublicKey(k)
        case .rsa(let k): return Certificate.PublicKey(k)
        case .ed25519(let k): return Certificate.PublicKey(k)
        }
    }

    /// True when `der` parses as an X.509 certificate (for checking trust-anchor settings up front).
    static func isCertificate(_ der: [UInt8]) -> Bool {
        (try? Certificate(derEncoded: der)) != nil
    }

    /// A small synchronous path builder: from the leaf, follow issuer names through the presented
    /// intermediates (each a CA, in its validity period, with a valid signature on the one below)
    /// until a certificate is signed by, or is, a trust anchor. Anchors that do not parse are skipped.
    static func chainIsTrusted(leaf: Certificate, intermediates: [Certificate], anchorsDER: [[UInt8]], now: Date) -> Bool {
        let anchors = anchorsDER.compactMap { try? Certificate(derEncoded: $0) }
        func current(_ c: Certificate) -> Bool { c.notValidBefore <= now && now <= c.notValidAfter }
        func isAuthority(_ c: Certificate) -> Bool {
            if case .isCertificateAuthority? = try? c.extensions.basicConstraints { return true }
            return false
        }
        var certificate = leaf
        var pool = intermediates
        for _ in 0...maximumChainLength {
            guard current(certificate) else { return false }
            if anchors.contains(certificate) { return true }
            if anchors.contains(where: {
                $0.subject == certificate.issuer && current($0) && $0.publicKey.isValidSignature(certificate.signature, for: certificate)
            }) {
                return true
            }
            guard let index = pool.firstIndex(where: {
                $0.subject == certificate.issuer && isAuthority($0) && $0.publicKey.isValidSignature(certificate.signature, for: certificate)
            }) else { return false }
            certificate = pool.remove(at: index)
        }
        return false
    }
}
