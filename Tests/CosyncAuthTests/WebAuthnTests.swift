import CosyncAuth
import Crypto
import Foundation
import Testing

/// The WebAuthn verification core against a software authenticator: every accepted shape, and
/// every refusal the checklist names.
@Suite("WebAuthn verification")
struct WebAuthnTests {
    static let rpId = "example.com"
    static let origin = "https://example.com"
    static let androidOrigin = "android:apk-key-hash:Z2V0LWEtcmVhbC1rZXktaGFzaC1oZXJlLXBsZWFzZQ"
    static let iosOrigin = "ios:bundle-id:com.example.app"

    static func relyingParty(
        userVerification: WebAuthnUserVerification = .preferred, attestation: WebAuthnAttestationPolicy = .none,
        anchors: [[UInt8]] = []
    ) -> WebAuthnRelyingParty {
        WebAuthnRelyingParty(
            id: rpId, allowedOrigins: [origin, androidOrigin, iosOrigin], userVerification: userVerification,
            attestation: attestation, trustAnchorsDER: anchors)
    }

    static func challenge() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }

    static func authenticator(_ kind: SoftwareAuthenticator.KeyKind = .es256) -> SoftwareAuthenticator {
        SoftwareAuthenticator(kind: kind, rpId: rpId, origin: origin)
    }

    static func register(
        _ auth: SoftwareAuthenticator, attestation: SoftwareAuthenticator.Attestation = .none,
        rp: WebAuthnRelyingParty = WebAuthnTests.relyingParty(), clientData: SoftwareAuthenticator.ClientDataOverride = .init(),
        tamper: SoftwareAuthenticator.Tamper = .init()
    ) throws(WebAuthnError) -> VerifiedRegistration {
        let c = challenge()
        let response = auth.register(challenge: c, attestation: attestation, clientDataOverride: clientData, tamper: tamper)
        return try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: rp)
    }

    static func authenticate(
        _ auth: inout SoftwareAuthenticator, stored: StoredCredential? = nil, counter: UInt32? = nil,
        rp: WebAuthnRelyingParty = WebAuthnTests.relyingParty(), clientData: SoftwareAuthenticator.ClientDataOverride = .init(),
        tamper: SoftwareAuthenticator.Tamper = .init()
    ) throws(WebAuthnError) -> VerifiedAssertion {
        let c = challenge()
        let response = auth.assert(challenge: c, counter: counter, clientDataOverride: clientData, tamper: tamper)
        return try WebAuthn.verifyAssertion(response, expectedChallenge: c, rp: rp, credential: stored ?? auth.storedCredential)
    }

    // MARK: accepted ceremonies

    @Test("registration then assertion, per key type", arguments: [SoftwareAuthenticator.KeyKind.es256, .rs256, .ed25519])
    func roundTrip(kind: SoftwareAuthenticator.KeyKind) throws {
        var auth = Self.authenticator(kind)
        let c = Self.challenge()
        let response = auth.register(challenge: c, transports: ["internal", "hybrid"])
        let registered = try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: Self.relyingParty())
        #expect(registered.credentialId == auth.credentialId)
        #expect(registered.publicKeyCOSE == auth.publicKeyCOSE)
        #expect(registered.algorithm == auth.algorithm)
        #expect(registered.format == "none" && !registered.attestationVerified && registered.attestationType == .none)
        #expect(registered.userVerified && registered.backupEligible && registered.backupState)
        #expect(registered.aaguid == Array(repeating: 0, count: 16) && registered.signCount == 0)
        #expect(registered.transports == ["internal", "hybrid"])

        let stored = StoredCredential(
            credentialId: registered.credentialId, publicKeyCOSE: registered.publicKeyCOSE, signCount: registered.signCount,
            backupEligible: registered.backupEligible)
        let userHandle = WebAuthn.encodeBase64URL(Array("0123456789abcdef0123456789abcdef".utf8))
        let a = Self.challenge()
        let assertion = auth.assert(challenge: a, userHandle: userHandle)
        #expect(try WebAuthn.credentialId(of: assertion) == auth.credentialId)
        let verified = try WebAuthn.verifyAssertion(assertion, expectedChallenge: a, rp: Self.relyingParty(), credential: stored)
        #expect(verified.signCount == 0 && !verified.counterRegressed)
        #expect(verified.userVerified && verified.backupState && verified.backupEligible)
        #expect(verified.userHandle == Array("0123456789abcdef0123456789abcdef".utf8))
    }

    @Test("packed self attestation, per key type", arguments: [SoftwareAuthenticator.KeyKind.es256, .rs256, .ed25519])
    func packedSelf(kind: SoftwareAuthenticator.KeyKind) throws {
        let auth = Self.authenticator(kind)
        let registered = try Self.register(auth, attestation: .packedSelf)
        #expect(registered.format == "packed" && registered.attestationVerified && registered.attestationType == .selfAttestation)
        // Self attestation says nothing about the authenticator model: not enough when attestation is required.
        #expect(throws: WebAuthnError.attestationRequired) {
            try Self.register(auth, attestation: .packedSelf, rp: Self.relyingParty(attestation: .required))
        }
        // A self signature by some other key is refused.
        var tamper = SoftwareAuthenticator.Tamper()
        tamper.clientDataAfterSigning = { $0.append(0x20) }
        #expect(throws: WebAuthnError.attestationInvalid("self attestation signature does not verify")) {
            try Self.register(auth, attestation: .packedSelf, tamper: tamper)
        }
    }

    @Test("packed attestation with a certificate: without anchors, with anchors, through an intermediate, wrong anchor")
    func packedCertificate() throws {
        let ca = TestCA()
        var auth = Self.authenticator()
        auth.aaguid = (0..<16).map { UInt8($0 + 1) }
        let plain = try Self.register(auth, attestation: .packedCertificate(ca: ca))
        #expect(plain.attestationVerified && plain.attestationType == .basic && !plain.attestationTrusted)
        #expect(plain.aaguid == auth.aaguid)

        let anchored = try Self.register(auth, attestation: .packedCertificate(ca: ca), rp: Self.relyingParty(attestation: .required, anchors: [ca.rootDER]))
        #expect(anchored.attestationVerified && anchored.attestationTrusted)

        let chained = TestCA(name: "Chained Root", withIntermediate: true)
        let viaIntermediate = try Self.register(
            auth, attestation: .packedCertificate(ca: chained), rp: Self.relyingParty(attestation: .required, anchors: [chained.rootDER]))
        #expect(viaIntermediate.attestationVerified && viaIntermediate.attestationTrusted)

        let other = TestCA(name: "Someone Else")
        // Optional policy: an untrusted chain is accepted, but not reported as verified.
        let untrusted = try Self.register(auth, attestation: .packedCertificate(ca: ca), rp: Self.relyingParty(attestation: .optional, anchors: [other.rootDER]))
        #expect(!untrusted.attestationVerified && !untrusted.attestationTrusted && untrusted.attestationType == .basic)
        #expect(throws: WebAuthnError.attestationInvalid("certificate chain does not reach a trust anchor")) {
            try Self.register(auth, attestation: .packedCertificate(ca: ca), rp: Self.relyingParty(attestation: .required, anchors: [other.rootDER]))
        }
        // Without the intermediate in x5c the chain cannot be built.
        #expect(throws: WebAuthnError.self) {
            try Self.register(auth, attestation: .packedCertificate(ca: chained), rp: Self.relyingParty(attestation: .required, anchors: [other.rootDER]))
        }
    }

    @Test("packed attestation certificate requirements: OU, CA flag, AAGUID extension")
    func packedLeafRules() throws {
        let ca = TestCA()
        var auth = Self.authenticator()
        auth.aaguid = (0..<16).map { UInt8($0 + 100) }
        #expect(throws: WebAuthnError.attestationInvalid("attestation certificate subject lacks OU Authenticator Attestation")) {
            try Self.register(auth, attestation: .packedCertificate(ca: ca, leaf: .init(organizationalUnit: "Something Else")))
        }
        #expect(throws: WebAuthnError.attestationInvalid("attestation certificate is a CA")) {
            try Self.register(auth, attestation: .packedCertificate(ca: ca, leaf: .init(isCA: true)))
        }
        #expect(throws: WebAuthnError.attestationInvalid("certificate AAGUID differs from authenticatorData")) {
            try Self.register(auth, attestation: .packedCertificate(ca: ca, leaf: .init(aaguid: Array(repeating: 7, count: 16))))
        }
        #expect(throws: WebAuthnError.attestationInvalid("AAGUID extension is critical")) {
            try Self.register(auth, attestation: .packedCertificate(ca: ca, leaf: .init(aaguidCritical: true)))
        }
        // The AAGUID extension is optional.
        #expect(try Self.register(auth, attestation: .packedCertificate(ca: ca, leaf: .init(includeAAGUID: false))).attestationVerified)
        // A certificate statement signed over other data is refused.
        var tamper = SoftwareAuthenticator.Tamper()
        tamper.clientDataAfterSigning = { $0.append(0x20) }
        #expect(throws: WebAuthnError.attestationInvalid("attestation signature does not verify")) {
            try Self.register(auth, attestation: .packedCertificate(ca: ca), tamper: tamper)
        }
    }

    @Test("certificate chains: validity period, unreadable anchors, v1 leaves, credential id length bounds")
    func chainsAndBounds() throws {
        let ca = TestCA(withIntermediate: true)
        let auth = Self.authenticator()
        let strict = Self.relyingParty(attestation: .required, anchors: [[0x30, 0x03, 0x02, 0x01, 0x00], ca.rootDER])
        #expect(WebAuthn.isValidTrustAnchor(ca.rootDER) && !WebAuthn.isValidTrustAnchor([0x30, 0x03, 0x02, 0x01, 0x00]))
        // An unreadable anchor is skipped; the good one still anchors the chain.
        let c = Self.challenge()
        let response = auth.register(challenge: c, attestation: .packedCertificate(ca: ca))
        #expect(try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: strict).attestationTrusted)
        // Two years on, the certificates have expired: no longer trusted.
        let later = Date().addingTimeInterval(2 * 365 * 86400)
        #expect(throws: WebAuthnError.attestationInvalid("certificate chain does not reach a trust anchor")) {
            try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: strict, now: later)
        }
        var optional = strict
        optional.attestation = .optional
        let stale = try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: optional, now: later)
        #expect(!stale.attestationVerified && !stale.attestationTrusted)
        // A leaf that is not X.509 v3 is refused.
        do {
            _ = try Self.register(auth, attestation: .packedCertificate(ca: ca, leaf: .init(version: .v1)))
            Issue.record("a v1 attestation certificate was accepted")
        } catch {
            guard case .attestationInvalid = error else { Issue.record("unexpected \(error)"); return }
        }
        // Credential id length: 1023 bytes is the most accepted; 0 is refused.
        let longest = SoftwareAuthenticator(kind: .es256, rpId: Self.rpId, origin: Self.origin, credentialIdLength: 1023)
        #expect(try Self.register(longest).credentialId.count == 1023)
        var t = SoftwareAuthenticator.Tamper()
        t.authenticatorData = { bytes in
            bytes[53] = 0
            bytes[54] = 0
        }
        #expect(throws: WebAuthnError.malformed("credential id length out of range")) { try Self.register(auth, tamper: t) }
        t.authenticatorData = { bytes in
            bytes[53] = 0x04
            bytes[54] = 0x00
        }
        #expect(throws: WebAuthnError.malformed("credential id length out of range")) { try Self.register(auth, tamper: t) }
        t.authenticatorData = { bytes in bytes[54] = 0xFF }
        #expect(throws: WebAuthnError.malformed("credential id truncated")) { try Self.register(auth, tamper: t) }
    }

    @Test("apple anonymous attestation: nonce extension and key match, optional chain")
    func appleAttestation() throws {
        let ca = TestCA(name: "Test Apple WebAuthn Root", withIntermediate: true)
        let auth = Self.authenticator()
        let result = try Self.register(auth, attestation: .apple(ca: ca))
        #expect(result.format == "apple" && result.attestationVerified && result.attestationType == .anonymizationCA)
        let anchored = try Self.register(auth, attestation: .apple(ca: ca), rp: Self.relyingParty(attestation: .required, anchors: [ca.rootDER]))
        #expect(anchored.attestationTrusted)
        // The nonce covers clientDataJSON: changing it after the certificate was made is caught.
        var tamper = SoftwareAuthenticator.Tamper()
        tamper.clientDataAfterSigning = { $0.append(0x20) }
        #expect(throws: WebAuthnError.attestationInvalid("apple nonce does not match")) {
            try Self.register(auth, attestation: .apple(ca: ca), tamper: tamper)
        }
        // A certificate for another key (same nonce) is refused.
        let c = Self.challenge()
        let honest = auth.register(challenge: c, attestation: .apple(ca: ca))
        let impostor = Self.authenticator()
        var swap = SoftwareAuthenticator.Tamper()
        swap.coseKey = impostor.publicKeyCOSE
        let forged = auth.register(challenge: c, attestation: .apple(ca: ca), tamper: swap)
        _ = honest
        #expect(throws: WebAuthnError.attestationInvalid("apple certificate key differs from the credential key")) {
            try WebAuthn.verifyRegistration(forged, expectedChallenge: c, rp: Self.relyingParty())
        }
    }

    @Test("unknown attestation format: accepted unverified, refused when attestation is required; none with a statement refused")
    func unknownFormat() throws {
        let auth = Self.authenticator()
        let odd = SoftwareAuthenticator.Attestation.custom(fmt: "tpm", statement: TestCBOR.map([(.text("ver"), .text("2.0"))]))
        let result = try Self.register(auth, attestation: odd)
        #expect(result.format == "tpm" && !result.attestationVerified && result.attestationType == .unknown)
        #expect(throws: WebAuthnError.attestationRequired) { try Self.register(auth, attestation: odd, rp: Self.relyingParty(attestation: .required)) }
        #expect(throws: WebAuthnError.attestationRequired) { try Self.register(auth, rp: Self.relyingParty(attestation: .required)) }
        let noneWithStatement = SoftwareAuthenticator.Attestation.custom(fmt: "none", statement: TestCBOR.map([(.text("x"), .null)]))
        #expect(throws: WebAuthnError.attestationInvalid("fmt none with a non-empty statement")) { try Self.register(auth, attestation: noneWithStatement) }
        let packedJunk = SoftwareAuthenticator.Attestation.custom(fmt: "packed", statement: TestCBOR.map([(.text("alg"), TestCBOR.int(-7))]))
        #expect(throws: WebAuthnError.attestationInvalid("packed statement without sig")) { try Self.register(auth, attestation: packedJunk) }
        // An unknown format is stored with the passkey: only a WebAuthn format identifier is (a NUL
        // made the signup's INSERT fail with 22021, a 500, found by the end-user fuzz).
        for fmt in ["pa\u{0}cked", "", String(repeating: "x", count: 33), "Packed", "t\u{301}pm", "fido u2f"] {
            let bad = SoftwareAuthenticator.Attestation.custom(fmt: fmt, statement: TestCBOR.map([]))
            #expect(throws: WebAuthnError.malformed("fmt is not a format identifier")) { try Self.register(auth, attestation: bad) }
        }
        #expect(try Self.register(auth, attestation: .custom(fmt: "android-safetynet", statement: TestCBOR.map([]))).format == "android-safetynet")
    }

    @Test("native origins are compared verbatim: Android apk-key-hash and iOS bundle id")
    func nativeOrigins() throws {
        for origin in [Self.androidOrigin, Self.iosOrigin] {
            var auth = SoftwareAuthenticator(kind: .es256, rpId: Self.rpId, origin: origin)
            _ = try Self.register(auth)
            _ = try Self.authenticate(&auth)
        }
        var near = SoftwareAuthenticator(kind: .es256, rpId: Self.rpId, origin: Self.androidOrigin + "x")
        #expect(throws: WebAuthnError.originNotAllowed) { try Self.register(near) }
        #expect(throws: WebAuthnError.originNotAllowed) { try Self.authenticate(&near) }
    }

    @Test("challenge tolerance: padded and standard-alphabet encodings of the same bytes match")
    func challengeEncodings() throws {
        let auth = Self.authenticator()
        // Bytes whose base64 contains both + and / (and needs padding).
        let c: [UInt8] = [0xFB, 0xFF, 0xBF, 0xFB, 0xEF] + Array(repeating: 0x3E, count: 26)
        let standard = Data(c).base64EncodedString()
        #expect(standard.contains("+") || standard.contains("/"))
        #expect(standard.hasSuffix("="))
        let response = auth.register(challenge: c, clientDataOverride: .init(challenge: standard))
        _ = try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: Self.relyingParty())
        #expect(WebAuthn.decodeBase64URL(standard) == c)
        #expect(WebAuthn.encodeBase64URL(c).allSatisfy { $0 != "=" && $0 != "+" && $0 != "/" })
        for text in ["", "A", "AAAAA", "AA=A", "AA===", "AA AA", "AA\nA", "é"] where !text.isEmpty {
            #expect(WebAuthn.decodeBase64URL(text) == nil, "\(text)")
        }
        #expect(WebAuthn.decodeBase64URL("") == [])
        #expect(WebAuthn.decodeBase64URL("AA==") == [0] && WebAuthn.decodeBase64URL("AA") == [0])
    }

    @Test("counter: 0/0 accepted, increases accepted, regression reported (not thrown)")
    func counter() throws {
        var auth = Self.authenticator()
        var stored = auth.storedCredential
        #expect(try !Self.authenticate(&auth, stored: stored, counter: 0).counterRegressed)
        #expect(try !Self.authenticate(&auth, stored: stored, counter: 1).counterRegressed)
        stored.signCount = 5
        let equal = try Self.authenticate(&auth, stored: stored, counter: 5)
        #expect(equal.counterRegressed && equal.signCount == 5)
        #expect(try Self.authenticate(&auth, stored: stored, counter: 3).counterRegressed)
        #expect(try Self.authenticate(&auth, stored: stored, counter: 0).counterRegressed)
        #expect(try !Self.authenticate(&auth, stored: stored, counter: 6).counterRegressed)
        auth.countsSignatures = true
        stored.signCount = 0
        let first = try Self.authenticate(&auth, stored: stored)
        #expect(first.signCount == 1 && !first.counterRegressed)
    }

    // MARK: refusals: clientDataJSON

    @Test("clientDataJSON refusals: origin, challenge, type, cross-origin, tampering, JSON")
    func clientDataRefusals() throws {
        var auth = Self.authenticator()
        #expect(throws: WebAuthnError.originNotAllowed) { try Self.register(auth, clientData: .init(origin: "https://evil.example")) }
        #expect(throws: WebAuthnError.originNotAllowed) { try Self.authenticate(&auth, clientData: .init(origin: "https://example.com:443")) }
        #expect(throws: WebAuthnError.challengeMismatch) { try Self.register(auth, clientData: .init(challenge: WebAuthn.encodeBase64URL(Self.challenge()))) }
        #expect(throws: WebAuthnError.challengeMismatch) { try Self.authenticate(&auth, clientData: .init(challenge: WebAuthn.encodeBase64URL(Self.challenge()))) }
        #expect(throws: WebAuthnError.wrongType) { try Self.register(auth, clientData: .init(type: "webauthn.get")) }
        #expect(throws: WebAuthnError.wrongType) { try Self.authenticate(&auth, clientData: .init(type: "webauthn.create")) }
        #expect(throws: WebAuthnError.crossOrigin) { try Self.register(auth, clientData: .init(crossOrigin: true)) }
        #expect(throws: WebAuthnError.crossOrigin) { try Self.authenticate(&auth, clientData: .init(topOrigin: "https://example.com")) }
        _ = try Self.register(auth, clientData: .init(crossOrigin: false))

        var tamper = SoftwareAuthenticator.Tamper()
        tamper.clientDataAfterSigning = { bytes in bytes.insert(0x20, at: 1) }
        #expect(throws: WebAuthnError.badSignature) { try Self.authenticate(&auth, tamper: tamper) }

        for raw in ["", "[]", "{\"type\":\"webauthn.create\"}", "{\"type\":1,\"challenge\":\"AA\",\"origin\":\"x\"}", "{\"type\":\"webauthn.create\",",
                    "{\"type\":\"webauthn.create\",\"challenge\":\"!!\",\"origin\":\"https://example.com\"}"] {
            #expect(throws: WebAuthnError.self, "\(raw)") { try Self.register(auth, clientData: .init(raw: raw)) }
        }
        // Deep nesting inside the size limit ends in an error, not in a deep recursion.
        let deep = "{\"a\":" + String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000) + "}"
        #expect(throws: WebAuthnError.malformed("clientDataJSON is not valid JSON with type, challenge and origin")) {
            try Self.register(auth, clientData: .init(raw: deep))
        }
        let huge = "{\"type\":\"webauthn.create\",\"pad\":\"" + String(repeating: "a", count: 5000) + "\"}"
        #expect(throws: WebAuthnError.malformed("clientDataJSON is not base64url or is larger than 4096 bytes")) {
            try Self.register(auth, clientData: .init(raw: huge))
        }
    }

    // MARK: refusals: authenticatorData

    @Test("authenticatorData refusals: RP ID, UP, UV, BE/BS, AT, trailing bytes, extensions")
    func authenticatorDataRefusals() throws {
        var auth = Self.authenticator()
        var t = SoftwareAuthenticator.Tamper()
        t.rpId = "evil.com"
        #expect(throws: WebAuthnError.rpIdMismatch) { try Self.register(auth, tamper: t) }
        #expect(throws: WebAuthnError.rpIdMismatch) { try Self.authenticate(&auth, tamper: t) }

        t = .init()
        t.flags = 0x40 | 0x04  // AT|UV, no UP
        #expect(throws: WebAuthnError.userNotPresent) { try Self.register(auth, tamper: t) }
        t.flags = 0x04
        #expect(throws: WebAuthnError.userNotPresent) { try Self.authenticate(&auth, tamper: t) }

        let strict = Self.relyingParty(userVerification: .required)
        t.flags = 0x40 | 0x01 | 0x08 | 0x10  // no UV
        #expect(throws: WebAuthnError.userNotVerified) { try Self.register(auth, rp: strict, tamper: t) }
        let lenient = try Self.register(auth, tamper: t)
        #expect(!lenient.userVerified)
        t.flags = 0x01 | 0x08 | 0x10
        #expect(throws: WebAuthnError.userNotVerified) { try Self.authenticate(&auth, rp: strict, tamper: t) }

        t.flags = 0x40 | 0x01 | 0x04 | 0x10  // BS without BE
        #expect(throws: WebAuthnError.backupFlagsInvalid) { try Self.register(auth, tamper: t) }
        t.flags = 0x01 | 0x04 | 0x10
        #expect(throws: WebAuthnError.backupFlagsInvalid) { try Self.authenticate(&auth, tamper: t) }
        // BE must stay what it was at registration.
        t.flags = 0x01 | 0x04
        #expect(throws: WebAuthnError.backupFlagsInvalid) { try Self.authenticate(&auth, tamper: t) }
        var notEligible = auth.storedCredential
        notEligible.backupEligible = false
        #expect(throws: WebAuthnError.backupFlagsInvalid) { try Self.authenticate(&auth, stored: notEligible) }

        t.flags = 0x01 | 0x04 | 0x08 | 0x10  // registration without AT: the key bytes become trailing bytes
        #expect(throws: WebAuthnError.malformed("authenticatorData has trailing bytes")) { try Self.register(auth, tamper: t) }

        t = .init()
        t.authenticatorData = { $0.append(0x00) }
        #expect(throws: WebAuthnError.malformed("authenticatorData has trailing bytes")) { try Self.register(auth, tamper: t) }
        #expect(throws: WebAuthnError.malformed("authenticatorData has trailing bytes")) { try Self.authenticate(&auth, tamper: t) }
        t.authenticatorData = { $0.removeLast($0.count - 36) }
        #expect(throws: WebAuthnError.malformed("authenticatorData too short")) { try Self.authenticate(&auth, tamper: t) }

        // A well-formed extensions map is parsed and ignored; a flagged but missing or broken one is refused.
        t = .init()
        t.extensions = TestCBOR.encode(TestCBOR.map([(.text("credProtect"), TestCBOR.int(2)), (.text("hmac-secret"), .bool(true))]))
        _ = try Self.register(auth, tamper: t)
        _ = try Self.authenticate(&auth, tamper: t)
        t.extensions = []
        #expect(throws: WebAuthnError.malformed("extensions flagged but absent")) { try Self.authenticate(&auth, tamper: t) }
        t.extensions = TestCBOR.encode(.array([]))
        #expect(throws: WebAuthnError.malformed("extensions are not a map")) { try Self.authenticate(&auth, tamper: t) }
        // A depth bomb in the extensions.
        t.extensions = Array(repeating: 0xA1, count: 12).flatMap { [$0, 0x61, 0x61] } + [0x00]
        #expect(throws: WebAuthnError.malformed("CBOR: nested too deeply")) { try Self.authenticate(&auth, tamper: t) }
    }

    // MARK: refusals: identifiers and types

    @Test("credential id and type refusals")
    func identifierRefusals() throws {
        var auth = Self.authenticator()
        var t = SoftwareAuthenticator.Tamper()
        t.id = WebAuthn.encodeBase64URL([1, 2, 3])
        #expect(throws: WebAuthnError.credentialIdMismatch) { try Self.register(auth, tamper: t) }
        #expect(throws: WebAuthnError.credentialIdMismatch) { try Self.authenticate(&auth, tamper: t) }
        t = .init()
        t.rawId = WebAuthn.encodeBase64URL([1, 2, 3])
        #expect(throws: WebAuthnError.credentialIdMismatch) { try Self.register(auth, tamper: t) }
        #expect(throws: WebAuthnError.credentialIdMismatch) { try Self.authenticate(&auth, tamper: t) }
        t = .init()
        t.id = "not base64!"
        #expect(throws: WebAuthnError.malformed("credential id")) { try Self.register(auth, tamper: t) }
        t = .init()
        t.type = "password"
        #expect(throws: WebAuthnError.wrongType) { try Self.register(auth, tamper: t) }
        #expect(throws: WebAuthnError.wrongType) { try Self.authenticate(&auth, tamper: t) }
        // AppKeySwift sends neither rawId nor type.
        let c = Self.challenge()
        var response = auth.register(challenge: c)
        response.rawId = nil
        response.type = nil
        _ = try WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: Self.relyingParty())
        // A stored credential of another authenticator does not match.
        let other = Self.authenticator()
        #expect(throws: WebAuthnError.credentialIdMismatch) { try Self.authenticate(&auth, stored: other.storedCredential) }
        // Same id, but the stored key is someone else's: the signature fails.
        var swapped = other.storedCredential
        swapped.credentialId = auth.credentialId
        #expect(throws: WebAuthnError.badSignature) { try Self.authenticate(&auth, stored: swapped) }
    }

    @Test("signature refusals")
    func signatureRefusals() throws {
        for kind in [SoftwareAuthenticator.KeyKind.es256, .rs256, .ed25519] {
            var auth = Self.authenticator(kind)
            var t = SoftwareAuthenticator.Tamper()
            t.signature = { $0[$0.count / 2] ^= 0x01 }
            #expect(throws: WebAuthnError.badSignature) { try Self.authenticate(&auth, tamper: t) }
            t.signature = { $0 = [] }
            #expect(throws: WebAuthnError.malformed("signature is empty")) { try Self.authenticate(&auth, tamper: t) }
            t.signature = nil
            t.authenticatorDataAfterSigning = { $0[33] ^= 0x01 }
            #expect(throws: WebAuthnError.badSignature) { try Self.authenticate(&auth, tamper: t) }
        }
    }

    // MARK: refusals: keys

    @Test("COSE key refusals: weak RSA, point off the curve, algorithms, inconsistent keys")
    func keyRefusals() throws {
        let auth = Self.authenticator()
        func withKey(_ pairs: [(CBORValue, CBORValue)]) -> SoftwareAuthenticator.Tamper {
            var t = SoftwareAuthenticator.Tamper()
            t.coseKey = TestCBOR.encode(TestCBOR.map(pairs))
            return t
        }
        let i = TestCBOR.int
        // RSA with a 1024-bit modulus.
        let small = [UInt8(0xC1)] + (0..<127).map { _ in UInt8.random(in: 0...255) }
        #expect(throws: WebAuthnError.invalidPublicKey) {
            try Self.register(auth, tamper: withKey([(i(1), i(3)), (i(3), i(-257)), (i(-1), .bytes(small)), (i(-2), .bytes([1, 0, 1]))]))
        }
        // An EC point that is not on P-256, and one with a short coordinate.
        let x = Array(repeating: UInt8(0x11), count: 32)
        var y = Array(repeating: UInt8(0x22), count: 32)
        let ec: (CBORValue, CBORValue) -> [(CBORValue, CBORValue)] = { xv, yv in [(i(1), i(2)), (i(3), i(-7)), (i(-1), i(1)), (i(-2), xv), (i(-3), yv)] }
        #expect(throws: WebAuthnError.invalidPublicKey) { try Self.register(auth, tamper: withKey(ec(.bytes(x), .bytes(y)))) }
        y.removeLast()
        #expect(throws: WebAuthnError.invalidPublicKey) { try Self.register(auth, tamper: withKey(ec(.bytes(x), .bytes(y)))) }
        // Wrong curve / kty for the algorithm.
        let real = try COSEKey.parse(auth.publicKeyCOSE)
        guard case .p256(let p) = real.key else { Issue.record("not P-256"); return }
        let raw = Array(p.rawRepresentation)
        let rx = CBORValue.bytes(Array(raw[0..<32])), ry = CBORValue.bytes(Array(raw[32..<64]))
        _ = try Self.register(auth, tamper: withKey(ec(rx, ry)))
        // Extra map entries are allowed, but the whole key may not pass the stored 2048 bytes (the
        // column's CHECK; longer once gave a 500 at the insert).
        let padded: (Int) -> [(CBORValue, CBORValue)] = { n in ec(rx, ry) + [(i(-100), .bytes(Array(repeating: 0x5A, count: n)))] }
        #expect(try Self.register(auth, tamper: withKey(padded(1900))).publicKeyCOSE.count <= AuthenticatorData.maximumPublicKeyLength)
        #expect(throws: WebAuthnError.malformed("credential public key too long")) { try Self.register(auth, tamper: withKey(padded(2100))) }
        #expect(throws: WebAuthnError.invalidPublicKey) {
            try Self.register(auth, tamper: withKey([(i(1), i(2)), (i(3), i(-7)), (i(-1), i(2)), (i(-2), rx), (i(-3), ry)]))
        }
        #expect(throws: WebAuthnError.invalidPublicKey) {
            try Self.register(auth, tamper: withKey([(i(1), i(1)), (i(3), i(-7)), (i(-1), i(1)), (i(-2), rx), (i(-3), ry)]))
        }
        #expect(throws: WebAuthnError.unsupportedAlgorithm) {
            try Self.register(auth, tamper: withKey([(i(1), i(2)), (i(3), i(-35)), (i(-1), i(2)), (i(-2), rx), (i(-3), ry)]))
        }
        #expect(throws: WebAuthnError.malformed("COSE key without alg")) {
            try Self.register(auth, tamper: withKey([(i(1), i(2)), (i(-1), i(1)), (i(-2), rx), (i(-3), ry)]))
        }
        #expect(throws: WebAuthnError.malformed("CBOR: duplicate map key")) {
            try Self.register(auth, tamper: withKey([(i(1), i(2)), (i(3), i(-7)), (i(3), i(-7)), (i(-1), i(1)), (i(-2), rx), (i(-3), ry)]))
        }
        // Ed25519 must say crv 6.
        let ed = Self.authenticator(.ed25519)
        let edKey = try COSEKey.parse(ed.publicKeyCOSE)
        guard case .ed25519(let e) = edKey.key else { Issue.record("not Ed25519"); return }
        #expect(throws: WebAuthnError.invalidPublicKey) {
            try Self.register(ed, tamper: withKey([(i(1), i(1)), (i(3), i(-8)), (i(-1), i(7)), (i(-2), .bytes(Array(e.rawRepresentation)))]))
        }
        // The relying party may narrow the algorithms.
        var onlyES256 = Self.relyingParty()
        onlyES256.allowedAlgorithms = [-7]
        #expect(throws: WebAuthnError.unsupportedAlgorithm) { try Self.register(ed, rp: onlyES256) }
        var edAuth = ed
        #expect(throws: WebAuthnError.unsupportedAlgorithm) { try Self.authenticate(&edAuth, rp: onlyES256) }
        // A stored key that no longer parses.
        var broken = auth.storedCredential
        broken.publicKeyCOSE = [0xA0]
        var a = auth
        #expect(throws: WebAuthnError.invalidPublicKey) { try Self.authenticate(&a, stored: broken) }
    }

    // MARK: refusals: CBOR

    @Test("attestationObject CBOR refusals: truncated, oversized, trailing, duplicate keys, depth, missing members")
    func cborRefusals() throws {
        let auth = Self.authenticator()
        var t = SoftwareAuthenticator.Tamper()
        t.attestationObject = { $0.removeLast(10) }
        #expect(throws: WebAuthnError.malformed("CBOR: length beyond input")) { try Self.register(auth, tamper: t) }
        t.attestationObject = { $0.removeLast($0.count - 3) }
        #expect(throws: WebAuthnError.self) { try Self.register(auth, tamper: t) }
        t.attestationObject = { $0.append(0x00) }
        #expect(throws: WebAuthnError.malformed("CBOR: trailing bytes")) { try Self.register(auth, tamper: t) }
        t.attestationObject = { $0 += Array(repeating: 0, count: WebAuthn.maxAttestationObjectBytes) }
        #expect(throws: WebAuthnError.malformed("attestationObject is not base64url or is larger than 16384 bytes")) { try Self.register(auth, tamper: t) }
        // Duplicate fmt: the map header says 4 entries, and a second "fmt" follows.
        t.attestationObject = { bytes in
            bytes[0] = 0xA4
            bytes += TestCBOR.encode(.text("fmt")) + TestCBOR.encode(.text("none"))
        }
        #expect(throws: WebAuthnError.malformed("CBOR: duplicate map key")) { try Self.register(auth, tamper: t) }
        let missing = TestCBOR.encode(TestCBOR.map([(.text("fmt"), .text("none")), (.text("attStmt"), .map([]))]))
        t.attestationObject = { $0 = missing }
        #expect(throws: WebAuthnError.malformed("attestationObject without authData")) { try Self.register(auth, tamper: t) }
        let notMap = TestCBOR.encode(.array([]))
        t.attestationObject = { $0 = notMap }
        #expect(throws: WebAuthnError.malformed("attestationObject is not a map")) { try Self.register(auth, tamper: t) }
        let bomb = Array(repeating: UInt8(0x81), count: 40) + [0x00]
        t.attestationObject = { $0 = bomb }
        #expect(throws: WebAuthnError.malformed("CBOR: nested too deeply")) { try Self.register(auth, tamper: t) }
    }

    @Test("CBOR decoder: accepted subset and refusals")
    func cborDecoder() throws {
        func d(_ bytes: [UInt8]) throws(WebAuthnError) -> CBORValue { try CBOR.decode(bytes) }
        #expect(try d([0x00]) == .unsigned(0))
        #expect(try d([0x18, 0x18]) == .unsigned(24))
        #expect(try d([0x19, 0x00, 0x01]) == .unsigned(1))  // non-minimal: accepted
        #expect(try d([0x1B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) == .unsigned(.max))
        #expect(try d([0x38, 0x63]).intValue == -100)
        #expect(try d([0x3B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).intValue == nil)
        #expect(try d([0x43, 1, 2, 3]) == .bytes([1, 2, 3]))
        #expect(try d([0x62, 0x68, 0x69]) == .text("hi"))
        #expect(try d([0xF4, ]) == .bool(false) && d([0xF5]) == .bool(true) && d([0xF6]) == .null)
        #expect(try d([0xA2, 0x01, 0x02, 0x61, 0x61, 0x80]) == TestCBOR.map([(.unsigned(1), .unsigned(2)), (.text("a"), .array([]))]))
        let (value, consumed) = try CBOR.decodePrefix([0x01, 0x02][...])
        #expect(value == .unsigned(1) && consumed == 1)
        let refusals: [([UInt8], String)] = [
            ([], "CBOR: truncated"),
            ([0x18], "CBOR: length beyond input"),
            ([0x1C], "CBOR: reserved additional information"),
            ([0x1D], "CBOR: reserved additional information"),
            ([0x1E], "CBOR: reserved additional information"),
            ([0x5F, 0xFF], "CBOR: indefinite length"),
            ([0x9F, 0xFF], "CBOR: indefinite length"),
            ([0xC0, 0x00], "CBOR: tags are not accepted"),
            ([0xF9, 0x00, 0x00], "CBOR: unsupported simple value or float"),
            ([0xFB, 0, 0, 0, 0, 0, 0, 0, 0], "CBOR: unsupported simple value or float"),
            ([0xF7], "CBOR: unsupported simple value or float"),
            ([0x44, 1, 2], "CBOR: length beyond input"),
            ([0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00], "CBOR: length beyond input"),
            ([0x9B, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00], "CBOR: length beyond input"),
            ([0x62, 0xC3, 0x28], "CBOR: invalid UTF-8 text"),
            ([0xA1, 0x41, 0x00, 0x00], "CBOR: map key is not an integer or text"),
            ([0xA2, 0x01, 0x00, 0x01, 0x00], "CBOR: duplicate map key"),
            ([0x00, 0x00], "CBOR: trailing bytes"),
            (Array(repeating: 0x81, count: 8) + [0x00], "CBOR: nested too deeply"),
            ([0x98, 65] + Array(repeating: 0x00, count: 65), "CBOR: too many array items"),
            ([0xB8, 65] + (0..<65).flatMap { TestCBOR.encode(TestCBOR.int($0)) + [0x00] }, "CBOR: too many map entries"),
        ]
        for (bytes, message) in refusals {
            #expect(throws: WebAuthnError.malformed(message), "\(bytes.prefix(12))") { try d(bytes) }
        }
        // Depth 8 is still fine.
        _ = try d(Array(repeating: 0x81, count: 7) + [0x00])
    }

    // MARK: wire forms

    @Test("wire forms: the standard JSON and AppKeySwift's hand-built response string carry the same credential")
    func wireForms() throws {
        var auth = Self.authenticator()
        let registration = auth.register(challenge: Self.challenge())
        let json = try JSONSerialization.jsonObject(with: Data(SoftwareAuthenticator.registrationJSON(registration).utf8)) as? [String: Any]
        #expect(json?["id"] as? String == registration.id && json?["type"] as? String == "public-key")
        let inner = json?["response"] as? [String: String]
        #expect(inner?["attestationObject"] == registration.attestationObject && inner?["clientDataJSON"] == registration.clientDataJSON)
        let aks = SoftwareAuthenticator.appKeySwiftResponse(registration)
        #expect(aks.hasPrefix("{\"attestationObject\": \""))
        let aksObject = try JSONSerialization.jsonObject(with: Data(aks.utf8)) as? [String: String]
        #expect(aksObject?["clientDataJSON"] == registration.clientDataJSON)
        let body = SoftwareAuthenticator.appKeySwiftFormBody(handle: "+1 555 1234", registration)
        #expect(body.hasPrefix("handle=%2B1 555 1234&id=\(registration.id)&response={\"attestationObject\": "))

        let assertion = auth.assert(challenge: Self.challenge(), userHandle: "dXNlcg")
        let aksAssertion = try JSONSerialization.jsonObject(with: Data(SoftwareAuthenticator.appKeySwiftResponse(assertion).utf8)) as? [String: String]
        #expect(aksAssertion?.keys.sorted() == ["authenticatorData", "clientDataJSON", "signature", "userHandle"])
        let web = try JSONSerialization.jsonObject(with: Data(SoftwareAuthenticator.assertionJSON(assertion).utf8)) as? [String: Any]
        #expect((web?["response"] as? [String: String])?["signature"] == assertion.signature)
    }

    // MARK: independent cross-check

    @Test("cross-check: the fido2 Python package accepts and refuses the same fixtures, and reads the same key")
    func fido2CrossCheck() throws {
        guard let python = ProcessInfo.processInfo.environment["COSYNC_TEST_PYTHON"], !python.isEmpty else {
            Issue.record("COSYNC_TEST_PYTHON is not set: run the tests with Tests/test.sh")
            return
        }
        let ca = TestCA(withIntermediate: true)
        struct Case {
            var json: String
            var kind: String
            var challenge: [UInt8]
            var ours: Bool
            var registration: VerifiedRegistration?
            var stored: StoredCredential?
            var expectedAttestation: String?
        }
        var cases: [Case] = []
        func addRegistration(_ auth: SoftwareAuthenticator, _ attestation: SoftwareAuthenticator.Attestation, _ expected: String?) {
            let c = Self.challenge()
            let response = auth.register(challenge: c, attestation: attestation)
            let ours = try? WebAuthn.verifyRegistration(response, expectedChallenge: c, rp: Self.relyingParty())
            cases.append(Case(json: SoftwareAuthenticator.registrationJSON(response), kind: "registration", challenge: c, ours: ours != nil,
                              registration: ours, expectedAttestation: expected))
        }
        func addAssertion(_ auth: inout SoftwareAuthenticator, tamper: SoftwareAuthenticator.Tamper = .init(), origin: String? = nil) {
            let c = Self.challenge()
            let response = auth.assert(challenge: c, counter: 3, clientDataOverride: .init(origin: origin), tamper: tamper)
            let ours = (try? WebAuthn.verifyAssertion(response, expectedChallenge: c, rp: Self.relyingParty(), credential: auth.storedCredential)) != nil
            cases.append(Case(json: SoftwareAuthenticator.assertionJSON(response), kind: "assertion", challenge: c, ours: ours, stored: auth.storedCredential))
        }
        for kind in [SoftwareAuthenticator.KeyKind.es256, .rs256, .ed25519] {
            var auth = Self.authenticator(kind)
            addRegistration(auth, .none, nil)
            addRegistration(auth, .packedSelf, "SELF")
            addAssertion(&auth)
            var bad = SoftwareAuthenticator.Tamper()
            bad.signature = { $0[$0.count / 2] ^= 0x40 }
            addAssertion(&auth, tamper: bad)
        }
        var auth = Self.authenticator()
        auth.aaguid = (0..<16).map { UInt8($0 * 3) }
        addRegistration(auth, .packedCertificate(ca: ca), "BASIC")
        addRegistration(auth, .apple(ca: ca), "ANON_CA")
        addAssertion(&auth, origin: "https://evil.example")

        func b64(_ bytes: [UInt8]) -> String { WebAuthn.encodeBase64URL(bytes) }
        let body = cases.map { c -> String in
            var item = "{\"kind\":\"\(c.kind)\",\"challenge\":\"\(b64(c.challenge))\",\"credential\":\(c.json)"
            if let stored = c.stored {
                item += ",\"credentialId\":\"\(b64(stored.credentialId))\",\"publicKeyCOSE\":\"\(b64(stored.publicKeyCOSE))\""
            }
            return item + "}"
        }
        let input = "{\"rpId\":\"\(Self.rpId)\",\"origin\":\"\(Self.origin)\",\"cases\":[\(body.joined(separator: ","))]}"
        let inputFile = FileManager.default.temporaryDirectory.appendingPathComponent("fido2-\(UUID().uuidString).json")
        try Data(input.utf8).write(to: inputFile)
        defer { try? FileManager.default.removeItem(at: inputFile) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/system/webauthn/fido2_check.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path]
        process.standardInput = try FileHandle(forReadingFrom: inputFile)
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let results = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
        #expect(results.count == cases.count)
        for (c, result) in zip(cases, results) {
            let theirs = result["ok"] as? Bool ?? false
            #expect(theirs == c.ours, "\(c.kind): fido2 \(result), ours \(c.ours)")
            if let ours = c.registration, theirs {
                #expect(result["credentialId"] as? String == b64(ours.credentialId))
                #expect(result["publicKeyCOSE"] as? String == b64(ours.publicKeyCOSE))
                #expect(result["alg"] as? Int == ours.algorithm)
                #expect(result["attestation"] as? String == c.expectedAttestation)
            }
        }
        // The fixture set has both outcomes.
        #expect(cases.contains { $0.ours } && cases.contains { !$0.ours })
    }

    @Test("error messages are short and distinct")
    func messages() {
        let all: [WebAuthnError] = [
            .malformed("x"), .wrongType, .challengeMismatch, .originNotAllowed, .crossOrigin, .rpIdMismatch, .userNotPresent,
            .userNotVerified, .backupFlagsInvalid, .credentialIdMismatch, .unsupportedAlgorithm, .invalidPublicKey, .badSignature,
            .attestationInvalid("y"), .attestationRequired,
        ]
        #expect(Set(all.map(\.message)).count == all.count)
        #expect(all.allSatisfy { !$0.message.isEmpty && $0.message.count < 80 })
    }
}
