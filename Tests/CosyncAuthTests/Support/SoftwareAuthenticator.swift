import CosyncAuth
import Crypto
import Foundation
import SwiftASN1
import X509
import _CryptoExtras

// A software WebAuthn authenticator for tests: it produces registration and assertion responses
// exactly as a browser or the AppKeySwift client would put them on the wire (base64url strings),
// plus hooks to break any part of them for negative tests. Test-only code: an impossible crypto
// failure stops the test run with fatalError instead of being threaded through every call.

/// A tiny CBOR encoder for the values `CBORValue` can hold (canonical, shortest-form heads).
enum TestCBOR {
    static func head(_ major: UInt8, _ value: UInt64) -> [UInt8] {
        let m = major << 5
        switch value {
        case 0..<24: return [m | UInt8(value)]
        case 24...0xFF: return [m | 24, UInt8(value)]
        case 0x100...0xFFFF: return [m | 25, UInt8(value >> 8), UInt8(value & 0xFF)]
        case 0x10000...0xFFFF_FFFF: return [m | 26] + (0..<4).reversed().map { UInt8((value >> (UInt64($0) * 8)) & 0xFF) }
        default: return [m | 27] + (0..<8).reversed().map { UInt8((value >> (UInt64($0) * 8)) & 0xFF) }
        }
    }

    static func encode(_ value: CBORValue) -> [UInt8] {
        switch value {
        case .unsigned(let n): return head(0, n)
        case .negative(let n): return head(1, n)
        case .bytes(let b): return head(2, UInt64(b.count)) + b
        case .text(let t): return head(3, UInt64(t.utf8.count)) + Array(t.utf8)
        case .array(let items): return head(4, UInt64(items.count)) + items.flatMap(encode)
        case .map(let entries): return head(5, UInt64(entries.count)) + entries.flatMap { encode($0.key) + encode($0.value) }
        case .bool(let b): return [b ? 0xF5 : 0xF4]
        case .null: return [0xF6]
        }
    }

    static func int(_ i: Int) -> CBORValue { i >= 0 ? .unsigned(UInt64(i)) : .negative(UInt64(-1 - i)) }

    /// A map from (key, value) pairs, in the given order.
    static func map(_ pairs: [(CBORValue, CBORValue)]) -> CBORValue {
        .map(pairs.map { CBORMapEntry(key: $0.0, value: $0.1) })
    }
}

/// A certificate authority for attestation tests: a self-signed P-256 root and, optionally, one
/// intermediate that issues the leaves.
final class TestCA: Sendable {
    let rootKey: P256.Signing.PrivateKey
    let root: Certificate
    let intermediateKey: P256.Signing.PrivateKey?
    let intermediate: Certificate?

    /// Options for a packed attestation leaf, to build broken ones for negative tests.
    struct LeafOptions: Sendable {
        var organizationalUnit: String = "Authenticator Attestation"
        /// Put the FIDO AAGUID extension in the leaf (with the authenticator's AAGUID unless `aaguid` is set).
        var includeAAGUID: Bool = true
        var aaguid: [UInt8]? = nil
        var aaguidCritical: Bool = false
        var isCA: Bool = false
        var version: Certificate.Version = .v3
        init(organizationalUnit: String = "Authenticator Attestation", includeAAGUID: Bool = true, aaguid: [UInt8]? = nil,
             aaguidCritical: Bool = false, isCA: Bool = false, version: Certificate.Version = .v3) {
            self.organizationalUnit = organizationalUnit
            self.includeAAGUID = includeAAGUID
            self.aaguid = aaguid
            self.aaguidCritical = aaguidCritical
            self.isCA = isCA
            self.version = version
        }
    }

    init(name: String = "CosyncAuth Test Attestation Root", withIntermediate: Bool = false) {
        rootKey = P256.Signing.PrivateKey()
        let rootName = Self.name(name)
        root = Self.make(
            key: Certificate.PublicKey(rootKey.publicKey), subject: rootName, issuer: rootName, signer: rootKey,
            extensions: Self.authorityExtensions())
        if withIntermediate {
            let key = P256.Signing.PrivateKey()
            intermediateKey = key
            intermediate = Self.make(
                key: Certificate.PublicKey(key.publicKey), subject: Self.name(name + " Intermediate"), issuer: rootName,
                signer: rootKey, extensions: Self.authorityExtensions())
        } else {
            intermediateKey = nil
            intermediate = nil
        }
    }

    /// The root as a DER certificate (what a relying party configures as a trust anchor).
    var rootDER: [UInt8] { Self.der(root) }
    /// Certificates between the leaf and the root, leaf side first (they follow the leaf in x5c).
    var intermediatesDER: [[UInt8]] { intermediate.map { [Self.der($0)] } ?? [] }

    /// A packed attestation leaf for `publicKey`.
    func issueAttestationLeaf(publicKey: Certificate.PublicKey, aaguid: [UInt8], options: LeafOptions = LeafOptions()) -> [UInt8] {
        let subject = Self.name("Test Authenticator", unit: options.organizationalUnit)
        var extensions: [Certificate.Extension] = []
        do {
            let constraints: BasicConstraints = options.isCA ? .isCertificateAuthority(maxPathLength: nil) : .notCertificateAuthority
            extensions.append(try Certificate.Extension(constraints, critical: true))
        } catch {
            fatalError("basic constraints: \(error)")
        }
        if options.includeAAGUID {
            let value = options.aaguid ?? aaguid
            extensions.append(Certificate.Extension(
                oid: [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4], critical: options.aaguidCritical, value: ([0x04, UInt8(value.count)] + value)[...]))
        }
        return Self.der(issue(publicKey: publicKey, subject: subject, extensions: extensions, version: options.version))
    }

    /// An Apple anonymous attestation credential certificate carrying `nonce`.
    func issueAppleCertificate(publicKey: Certificate.PublicKey, nonce: [UInt8]) -> [UInt8] {
        // SEQUENCE { [1] EXPLICIT OCTET STRING nonce }
        let octet: [UInt8] = [0x04, UInt8(nonce.count)] + nonce
        let tagged: [UInt8] = [0xA1, UInt8(octet.count)] + octet
        let value: [UInt8] = [0x30, UInt8(tagged.count)] + tagged
        let ext = Certificate.Extension(oid: [1, 2, 840, 113635, 100, 8, 2], critical: false, value: value[...])
        return Self.der(issue(publicKey: publicKey, subject: Self.name("Test Apple Credential"), extensions: [ext], version: .v3))
    }

    private func issue(publicKey: Certificate.PublicKey, subject: DistinguishedName, extensions: [Certificate.Extension], version: Certificate.Version) -> Certificate {
        let issuerCertificate = intermediate ?? root
        let signer = intermediateKey ?? rootKey
        let built: Certificate.Extensions
        do { built = try Certificate.Extensions(extensions) } catch { fatalError("extensions: \(error)") }
        return Self.make(key: publicKey, subject: subject, issuer: issuerCertificate.subject, signer: signer, extensions: built, version: version)
    }

    private static func make(
        key: Certificate.PublicKey, subject: DistinguishedName, issuer: DistinguishedName, signer: P256.Signing.PrivateKey,
        extensions: Certificate.Extensions, version: Certificate.Version = .v3
    ) -> Certificate {
        let now = Date()
        do {
            return try Certificate(
                version: version, serialNumber: Certificate.SerialNumber(), publicKey: key,
                notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86400 * 365),
                issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
                issuerPrivateKey: Certificate.PrivateKey(signer))
        } catch {
            fatalError("certificate: \(error)")
        }
    }

    private static func authorityExtensions() -> Certificate.Extensions {
        do {
            return try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            }
        } catch {
            fatalError("extensions: \(error)")
        }
    }

    private static func name(_ common: String, unit: String? = nil) -> DistinguishedName {
        do {
            if let unit {
                return try DistinguishedName {
                    CountryName("US")
                    OrganizationName("CosyncAuth Tests")
                    OrganizationalUnitName(unit)
                    CommonName(common)
                }
            }
            return try DistinguishedName {
                CountryName("US")
                OrganizationName("CosyncAuth Tests")
                CommonName(common)
            }
        } catch {
            fatalError("name: \(error)")
        }
    }

    static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        do { try serializer.serialize(certificate) } catch { fatalError("serialize: \(error)") }
        return serializer.serializedBytes
    }
}

struct SoftwareAuthenticator {
    enum KeyKind: Sendable { case es256, rs256, ed25519 }

    enum Attestation {
        case none
        case packedSelf
        case packedCertificate(ca: TestCA, leaf: TestCA.LeafOptions = TestCA.LeafOptions())
        case apple(ca: TestCA)
        /// Any fmt and statement, e.g. an unknown format.
        case custom(fmt: String, statement: CBORValue)
    }

    /// What to put in clientDataJSON instead of the honest values.
    struct ClientDataOverride {
        var type: String? = nil
        var origin: String? = nil
        /// The challenge member verbatim (instead of base64url of the real challenge).
        var challenge: String? = nil
        var crossOrigin: Bool? = nil
        var topOrigin: String? = nil
        /// The whole clientDataJSON verbatim.
        var raw: String? = nil
        init(type: String? = nil, origin: String? = nil, challenge: String? = nil, crossOrigin: Bool? = nil,
             topOrigin: String? = nil, raw: String? = nil) {
            self.type = type
            self.origin = origin
            self.challenge = challenge
            self.crossOrigin = crossOrigin
            self.topOrigin = topOrigin
            self.raw = raw
        }
    }

    /// Hooks for negative tests. Byte hooks run in ceremony order: authData is built, then
    /// `authenticatorData` edits it, then it is signed, then the post-signing hooks run.
    struct Tamper {
        /// The flags byte, verbatim (instead of UP|UV?|BE?|BS? (+AT/ED)).
        var flags: UInt8? = nil
        /// Hash this RP ID instead of the authenticator's.
        var rpId: String? = nil
        /// The COSE key bytes put in attested credential data (registration).
        var coseKey: [UInt8]? = nil
        /// Raw CBOR appended as the extensions map (sets ED).
        var extensions: [UInt8]? = nil
        /// Edit authenticatorData before it is signed.
        var authenticatorData: ((inout [UInt8]) -> Void)? = nil
        /// Edit clientDataJSON after it was signed / hashed.
        var clientDataAfterSigning: ((inout [UInt8]) -> Void)? = nil
        /// Edit authenticatorData after signing.
        var authenticatorDataAfterSigning: ((inout [UInt8]) -> Void)? = nil
        /// Edit the signature.
        var signature: ((inout [UInt8]) -> Void)? = nil
        /// Edit the encoded attestationObject.
        var attestationObject: ((inout [UInt8]) -> Void)? = nil
        /// Response `id`, `rawId`, `type` verbatim.
        var id: String? = nil
        var rawId: String? = nil
        var type: String? = nil
        init() {}
    }

    enum PrivateKey {
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
        case ed25519(Curve25519.Signing.PrivateKey)
    }

    let kind: KeyKind
    let privateKey: PrivateKey
    var rpId: String
    var origin: String
    var backupEligible: Bool
    var backedUp: Bool
    var userVerified: Bool
    var credentialId: [UInt8]
    var aaguid: [UInt8] = Array(repeating: 0, count: 16)
    /// The counter the next assertion reports when no counter is given: 0 forever (like Apple
    /// passkeys) unless `countsSignatures` is set, then it increases by one per assertion.
    var counter: UInt32 = 0
    var countsSignatures = false

    init(kind: KeyKind = .es256, rpId: String, origin: String, backupEligible: Bool = true, backedUp: Bool = true,
         userVerified: Bool = true, credentialIdLength: Int = 20) {
        self.kind = kind
        switch kind {
        case .es256: privateKey = .p256(P256.Signing.PrivateKey())
        case .rs256:
            do { privateKey = .rsa(try _RSA.Signing.PrivateKey(keySize: .bits2048)) } catch { fatalError("RSA key: \(error)") }
        case .ed25519: privateKey = .ed25519(Curve25519.Signing.PrivateKey())
        }
        self.rpId = rpId
        self.origin = origin
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.userVerified = userVerified
        credentialId = (0..<credentialIdLength).map { _ in UInt8.random(in: 0...255) }
    }

    var algorithm: Int {
        switch kind {
        case .es256: return -7
        case .rs256: return -257
        case .ed25519: return -8
        }
    }

    /// The credential public key as a COSE_Key (what the server stores).
    var publicKeyCOSE: [UInt8] {
        switch privateKey {
        case .p256(let key):
            let raw = Array(key.publicKey.rawRepresentation)
            return TestCBOR.encode(TestCBOR.map([
                (TestCBOR.int(1), TestCBOR.int(2)), (TestCBOR.int(3), TestCBOR.int(-7)), (TestCBOR.int(-1), TestCBOR.int(1)),
                (TestCBOR.int(-2), .bytes(Array(raw[0..<32]))), (TestCBOR.int(-3), .bytes(Array(raw[32..<64]))),
            ]))
        case .rsa(let key):
            let (n, e) = Self.rsaComponents(key.publicKey)
            return TestCBOR.encode(TestCBOR.map([
                (TestCBOR.int(1), TestCBOR.int(3)), (TestCBOR.int(3), TestCBOR.int(-257)), (TestCBOR.int(-1), .bytes(n)), (TestCBOR.int(-2), .bytes(e)),
            ]))
        case .ed25519(let key):
            return TestCBOR.encode(TestCBOR.map([
                (TestCBOR.int(1), TestCBOR.int(1)), (TestCBOR.int(3), TestCBOR.int(-8)), (TestCBOR.int(-1), TestCBOR.int(6)),
                (TestCBOR.int(-2), .bytes(Array(key.publicKey.rawRepresentation))),
            ]))
        }
    }

    var certificatePublicKey: Certificate.PublicKey {
        switch privateKey {
        case .p256(let key): return Certificate.PublicKey(key.publicKey)
        case .rsa(let key): return Certificate.PublicKey(key.publicKey)
        case .ed25519(let key): return Certificate.PublicKey(key.publicKey)
        }
    }

    /// What the server keeps after registering this authenticator.
    var storedCredential: StoredCredential {
        StoredCredential(credentialId: credentialId, publicKeyCOSE: publicKeyCOSE, signCount: 0, backupEligible: backupEligible)
    }

    /// The flags an honest authenticator sets for an assertion (UP, and UV/BE/BS as configured).
    var baseFlags: UInt8 {
        var flags: UInt8 = 0x01
        if userVerified { flags |= 0x04 }
        if backupEligible { flags |= 0x08 }
        if backedUp { flags |= 0x10 }
        return flags
    }

    // MARK: ceremonies

    func register(
        challenge: [UInt8], attestation: Attestation = .none, clientDataOverride: ClientDataOverride = ClientDataOverride(),
        tamper: Tamper = Tamper(), transports: [String]? = nil
    ) -> RegistrationResponse {
        var clientData = clientDataJSON(type: "webauthn.create", challenge: challenge, override: clientDataOverride)
        let clientDataHash = Array(SHA256.hash(data: clientData))

        var authData = Array(SHA256.hash(data: Array((tamper.rpId ?? rpId).utf8)))
        var flags = tamper.flags ?? (baseFlags | 0x40)
        if tamper.extensions != nil && tamper.flags == nil { flags |= 0x80 }
        authData.append(flags)
        authData += Self.bigEndian(counter)
        authData += aaguid
        authData += [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xFF)]
        authData += credentialId
        authData += tamper.coseKey ?? publicKeyCOSE
        if let extensions = tamper.extensions { authData += extensions }
        tamper.authenticatorData?(&authData)

        let signed = authData + clientDataHash
        let format: String
        var statement: CBORValue
        switch attestation {
        case .none:
            format = "none"
            statement = .map([])
        case .packedSelf:
            format = "packed"
            statement = TestCBOR.map([(.text("alg"), TestCBOR.int(algorithm)), (.text("sig"), .bytes(sign(signed)))])
        case .packedCertificate(let ca, let leaf):
            format = "packed"
            let attestationKey = P256.Signing.PrivateKey()
            let leafDER = ca.issueAttestationLeaf(publicKey: Certificate.PublicKey(attestationKey.publicKey), aaguid: aaguid, options: leaf)
            let sig: [UInt8]
            do { sig = Array(try attestationKey.signature(for: signed).derRepresentation) } catch { fatalError("sign: \(error)") }
            statement = TestCBOR.map([
                (.text("alg"), TestCBOR.int(-7)), (.text("sig"), .bytes(sig)),
                (.text("x5c"), .array(([leafDER] + ca.intermediatesDER).map { CBORValue.bytes($0) })),
            ])
        case .apple(let ca):
            format = "apple"
            let nonce = Array(SHA256.hash(data: signed))
            let cert = ca.issueAppleCertificate(publicKey: certificatePublicKey, nonce: nonce)
            statement = TestCBOR.map([(.text("x5c"), .array(([cert] + ca.intermediatesDER).map { CBORValue.bytes($0) }))])
        case .custom(let fmt, let custom):
            format = fmt
            statement = custom
        }
        tamper.authenticatorDataAfterSigning?(&authData)
        if case .map = statement {} else { statement = .map([]) }
        var object = TestCBOR.encode(TestCBOR.map([
            (.text("fmt"), .text(format)), (.text("attStmt"), statement), (.text("authData"), .bytes(authData)),
        ]))
        tamper.attestationObject?(&object)
        tamper.clientDataAfterSigning?(&clientData)
        let id = tamper.id ?? WebAuthn.encodeBase64URL(credentialId)
        return RegistrationResponse(
            id: id, rawId: tamper.rawId ?? id, type: tamper.type ?? "public-key",
            clientDataJSON: WebAuthn.encodeBase64URL(clientData), attestationObject: WebAuthn.encodeBase64URL(object),
            transports: transports)
    }

    /// An assertion. `counter` overrides the reported counter; otherwise see `countsSignatures`.
    mutating func assert(
        challenge: [UInt8], counter: UInt32? = nil, userHandle: String? = nil,
        clientDataOverride: ClientDataOverride = ClientDataOverride(), tamper: Tamper = Tamper()
    ) -> AssertionResponse {
        if counter == nil && countsSignatures { self.counter &+= 1 }
        var clientData = clientDataJSON(type: "webauthn.get", challenge: challenge, override: clientDataOverride)
        let clientDataHash = Array(SHA256.hash(data: clientData))
        var authData = Array(SHA256.hash(data: Array((tamper.rpId ?? rpId).utf8)))
        var flags = tamper.flags ?? baseFlags
        if tamper.extensions != nil && tamper.flags == nil { flags |= 0x80 }
        authData.append(flags)
        authData += Self.bigEndian(counter ?? self.counter)
        if let extensions = tamper.extensions { authData += extensions }
        tamper.authenticatorData?(&authData)
        var signature = sign(authData + clientDataHash)
        tamper.signature?(&signature)
        tamper.authenticatorDataAfterSigning?(&authData)
        tamper.clientDataAfterSigning?(&clientData)
        let id = tamper.id ?? WebAuthn.encodeBase64URL(credentialId)
        return AssertionResponse(
            id: id, rawId: tamper.rawId ?? id, type: tamper.type ?? "public-key",
            clientDataJSON: WebAuthn.encodeBase64URL(clientData), authenticatorData: WebAuthn.encodeBase64URL(authData),
            signature: WebAuthn.encodeBase64URL(signature), userHandle: userHandle)
    }

    /// Signs as the credential key does in WebAuthn (ES256: DER; RS256: PKCS#1 v1.5; Ed25519: raw).
    func sign(_ data: [UInt8]) -> [UInt8] {
        do {
            switch privateKey {
            case .p256(let key): return Array(try key.signature(for: data).derRepresentation)
            case .rsa(let key): return Array(try key.signature(for: data, padding: .insecurePKCS1v1_5).rawRepresentation)
            case .ed25519(let key): return Array(try key.signature(for: data))
            }
        } catch {
            fatalError("sign: \(error)")
        }
    }

    func clientDataJSON(type: String, challenge: [UInt8], override: ClientDataOverride) -> [UInt8] {
        if let raw = override.raw { return Array(raw.utf8) }
        var json = "{\"type\":\(Self.jsonString(override.type ?? type))"
        json += ",\"challenge\":\(Self.jsonString(override.challenge ?? WebAuthn.encodeBase64URL(challenge)))"
        json += ",\"origin\":\(Self.jsonString(override.origin ?? origin))"
        if let crossOrigin = override.crossOrigin { json += ",\"crossOrigin\":\(crossOrigin)" }
        if let topOrigin = override.topOrigin { json += ",\"topOrigin\":\(Self.jsonString(topOrigin))" }
        return Array((json + "}").utf8)
    }

    // MARK: wire forms

    /// The standard WebAuthn JSON the web clients send (JS / Flutter): `response` is an object.
    static func registrationJSON(_ r: RegistrationResponse) -> String {
        var response = "{\"clientDataJSON\":\(jsonString(r.clientDataJSON)),\"attestationObject\":\(jsonString(r.attestationObject))"
        if let transports = r.transports { response += ",\"transports\":[\(transports.map(jsonString).joined(separator: ","))]" }
        response += "}"
        return "{\"id\":\(jsonString(r.id)),\"rawId\":\(jsonString(r.rawId ?? r.id)),\"type\":\(jsonString(r.type ?? "public-key")),\"response\":\(response)}"
    }

    static func assertionJSON(_ a: AssertionResponse) -> String {
        var response = "{\"clientDataJSON\":\(jsonString(a.clientDataJSON)),\"authenticatorData\":\(jsonString(a.authenticatorData))"
        response += ",\"signature\":\(jsonString(a.signature))"
        if let userHandle = a.userHandle { response += ",\"userHandle\":\(jsonString(userHandle))" }
        response += "}"
        return "{\"id\":\(jsonString(a.id)),\"rawId\":\(jsonString(a.rawId ?? a.id)),\"type\":\(jsonString(a.type ?? "public-key")),\"response\":\(response)}"
    }

    /// The `response` string AppKeySwift builds by hand for an attestation (note the spaces).
    static func appKeySwiftResponse(_ r: RegistrationResponse) -> String {
        "{\"attestationObject\": \"\(r.attestationObject)\", \"clientDataJSON\": \"\(r.clientDataJSON)\"}"
    }

    /// The `response` string AppKeySwift builds by hand for an assertion (it always sends userHandle).
    static func appKeySwiftResponse(_ a: AssertionResponse) -> String {
        "{\"authenticatorData\": \"\(a.authenticatorData)\", \"clientDataJSON\": \"\(a.clientDataJSON)\", \"signature\": \"\(a.signature)\", \"userHandle\": \"\(a.userHandle ?? "")\"}"
    }

    /// AppKeySwift's raw form body `handle=…&id=…&response=…` (no percent-encoding; `+` in the handle
    /// becomes `%2B` unless `escapePlus` is false, as for loginAnonymousComplete).
    static func appKeySwiftFormBody(handle: String, _ r: RegistrationResponse, escapePlus: Bool = true) -> String {
        "handle=\(escapePlus ? handle.replacingOccurrences(of: "+", with: "%2B") : handle)&id=\(r.id)&response=\(appKeySwiftResponse(r))"
    }

    static func appKeySwiftFormBody(handle: String, _ a: AssertionResponse, escapePlus: Bool = true) -> String {
        "handle=\(escapePlus ? handle.replacingOccurrences(of: "+", with: "%2B") : handle)&id=\(a.id)&response=\(appKeySwiftResponse(a))"
    }

    // MARK: helpers

    static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    /// Modulus and exponent of an RSA public key, read from its PKCS#1 DER form.
    static func rsaComponents(_ key: _RSA.Signing.PublicKey) -> (n: [UInt8], e: [UInt8]) {
        do {
            let spki = Certificate.PublicKey(key).subjectPublicKeyInfoBytes
            let root = try DER.parse(spki)
            return try DER.sequence(root, identifier: .sequence) { nodes in
                guard let nNode = nodes.next(), let eNode = nodes.next(),
                      case .primitive(let n) = nNode.content, case .primitive(let e) = eNode.content
                else { throw ASN1Error.invalidASN1Object(reason: "RSA key") }
                return (Array(n.drop(while: { $0 == 0 })), Array(e))
            }
        } catch {
            fatalError("RSA components: \(error)")
        }
    }
}
