import Crypto
import Foundation

/// Server-side verification of WebAuthn registration and authentication responses (WebAuthn
/// Level 3 §7.1 and §7.2, narrowed to what passkey clients send). Everything here is synchronous
/// and pure: the caller loads and consumes the challenge, looks up and stores credentials, and
/// applies its own policies (for example what to do with a regressed counter).
///
/// All entry points throw only `WebAuthnError`; hostile input never traps.
public enum WebAuthn {
    /// Largest attestationObject accepted, decoded.
    public static let maxAttestationObjectBytes = 16 * 1024
    /// Largest clientDataJSON accepted, decoded.
    public static let maxClientDataJSONBytes = 4 * 1024
    /// Largest authenticatorData accepted, decoded.
    public static let maxAuthenticatorDataBytes = 4 * 1024
    /// Largest signature accepted (an 8192-bit RSA signature is 1024 bytes).
    public static let maxSignatureBytes = 1024
    /// Largest user handle accepted (WebAuthn caps user.id at 64 bytes).
    public static let maxUserHandleBytes = 64
    /// Most transports entries accepted, and their longest length.
    public static let maxTransports = 16
    public static let maxTransportLength = 64

    /// COSE algorithms this verifier implements: ES256, RS256, EdDSA.
    public static let supportedAlgorithms: [Int] = COSEAlgorithm.allCases.map(\.rawValue)

    public static func decodeBase64URL(_ s: String) -> [UInt8]? { WebAuthnBase64URL.decode(s) }

    public static func encodeBase64URL(_ bytes: [UInt8]) -> String { WebAuthnBase64URL.encode(bytes) }

    /// True when `der` is a readable X.509 certificate, for validating trust-anchor settings when
    /// they are saved (unreadable anchors are ignored at verification time).
    public static func isValidTrustAnchor(_ der: [UInt8]) -> Bool { Attestation.isCertificate(der) }

    /// The credential id of an assertion, decoded, so the caller can look the credential up first.
    /// `rawId`, when present, must decode to the same bytes.
    public static func credentialId(of response: AssertionResponse) throws(WebAuthnError) -> [UInt8] {
        try credentialId(id: response.id, rawId: response.rawId)
    }

    /// The credential id of a registration response, decoded (`rawId` must agree when present).
    public static func credentialId(of response: RegistrationResponse) throws(WebAuthnError) -> [UInt8] {
        try credentialId(id: response.id, rawId: response.rawId)
    }

    // MARK: registration

    public static func verifyRegistration(
        _ response: RegistrationResponse, expectedChallenge: [UInt8], rp: WebAuthnRelyingParty, now: Date = Date()
    ) throws(WebAuthnError) -> VerifiedRegistration {
        try checkCredentialType(response.type)
        let responseId = try credentialId(id: response.id, rawId: response.rawId)
        let clientDataBytes = try decode(response.clientDataJSON, limit: maxClientDataJSONBytes, what: "clientDataJSON")
        let clientData = try ClientData(clientDataBytes)
        try checkClientData(clientData, type: "webauthn.create", expectedChallenge: expectedChallenge, rp: rp)
        let clientDataHash = Array(SHA256.hash(data: clientDataBytes))

        let objectBytes = try decode(response.attestationObject, limit: maxAttestationObjectBytes, what: "attestationObject")
        let object = try CBOR.decode(objectBytes)
        guard case .map = object else { throw .malformed("attestationObject is not a map") }
        guard case .text(let format)? = object[text: "fmt"] else { throw .malformed("attestationObject without fmt") }
        // A format identifier is lower-case letters, digits and hyphens, at most 32 (WebAuthn §8.1). An
        // unknown one is kept with the passkey, so anything else (a NUL, a mark bomb) is refused here.
        guard (1...32).contains(format.utf8.count),
            format.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D })
        else { throw .malformed("fmt is not a format identifier") }
        guard let statement = object[text: "attStmt"], case .map = statement else { throw .malformed("attestationObject without attStmt") }
        guard case .bytes(let authDataBytes)? = object[text: "authData"] else { throw .malformed("attestationObject without authData") }

        let authData = try AuthenticatorData(authDataBytes)
        try checkAuthenticatorData(authData, rp: rp)
        guard let attested = authData.attestedCredential else { throw .malformed("registration without attested credential data") }
        guard constantTimeEqual(attested.credentialId, responseId) else { throw .credentialIdMismatch }
        guard rp.allowedAlgorithms.contains(attested.publicKey.algorithm.rawValue) else { throw .unsupportedAlgorithm }

        let outcome = try Attestation.verify(
            format: format, statement: statement, authData: authDataBytes, clientDataHash: clientDataHash,
            credential: attested, trustAnchorsDER: rp.trustAnchorsDER, now: now)
        // Verified means: the statement checked out, and a certificate statement also chained to an
        // anchor when anchors are configured.
        let certificateBased = outcome.type == .basic || outcome.type == .anonymizationCA
        let verified = outcome.verified && (!certificateBased || rp.trustAnchorsDER.isEmpty || outcome.trusted)
        if rp.attestation == .required {
            guard certificateBased else { throw .attestationRequired }
            guard verified else { throw .attestationInvalid("certificate chain does not reach a trust anchor") }
        }

        let transports = response.transports ?? []
        guard transports.count <= maxTransports, transports.allSatisfy({ $0.utf8.count <= maxTransportLength }) else {
            throw .malformed("transports")
        }
        return VerifiedRegistration(
            credentialId: attested.credentialId, publicKeyCOSE: attested.publicKeyCOSE, algorithm: attested.publicKey.algorithm.rawValue,
            signCount: authData.signCount, aaguid: attested.aaguid, format: format, attestationVerified: verified,
            userVerified: authData.flags.contains(.userVerified), backupEligible: authData.flags.contains(.backupEligible),
            backupState: authData.flags.contains(.backupState), transports: transports, attestationType: outcome.type,
            attestationTrusted: outcome.trusted)
    }

    // MARK: assertion

    public static func verifyAssertion(
        _ response: AssertionResponse, expectedChallenge: [UInt8], rp: WebAuthnRelyingParty, credential: StoredCredential
    ) throws(WebAuthnError) -> VerifiedAssertion {
        try checkCredentialType(response.type)
        let responseId = try credentialId(id: response.id, rawId: response.rawId)
        guard constantTimeEqual(responseId, credential.credentialId) else { throw .credentialIdMismatch }
        let userHandle: [UInt8]?
        if let text = response.userHandle, !text.isEmpty {
            guard let decoded = WebAuthnBase64URL.decode(text, maxBytes: maxUserHandleBytes) else { throw .malformed("userHandle") }
            userHandle = decoded.isEmpty ? nil : decoded
        } else {
            userHandle = nil
        }

        let clientDataBytes = try decode(response.clientDataJSON, limit: maxClientDataJSONBytes, what: "clientDataJSON")
        let clientData = try ClientData(clientDataBytes)
        try checkClientData(clientData, type: "webauthn.get", expectedChallenge: expectedChallenge, rp: rp)

        let authDataBytes = try decode(response.authenticatorData, limit: maxAuthenticatorDataBytes, what: "authenticatorData")
        let authData = try AuthenticatorData(authDataBytes)
        try checkAuthenticatorData(authData, rp: rp)
        guard authData.flags.contains(.backupEligible) == credential.backupEligible else { throw .backupFlagsInvalid }

        let signature = try decode(response.signature, limit: maxSignatureBytes, what: "signature")
        let key: COSEKey
        do throws(WebAuthnError) {
            key = try COSEKey.parse(credential.publicKeyCOSE)
        } catch {
            throw error == .unsupportedAlgorithm ? .unsupportedAlgorithm : .invalidPublicKey
        }
        guard rp.allowedAlgorithms.contains(key.algorithm.rawValue) else { throw .unsupportedAlgorithm }
        let clientDataHash = Array(SHA256.hash(data: clientDataBytes))
        guard key.isValidSignature(signature, for: authDataBytes + clientDataHash) else { throw .badSignature }

        let new = authData.signCount, old = credential.signCount
        let regressed = !(new == 0 && old == 0) && new <= old
        return VerifiedAssertion(
            signCount: new, counterRegressed: regressed, userVerified: authData.flags.contains(.userVerified),
            backupState: authData.flags.contains(.backupState), backupEligible: authData.flags.contains(.backupEligible),
            userHandle: userHandle)
    }

    // MARK: shared checks

    private static func checkCredentialType(_ type: String?) throws(WebAuthnError) {
        if let type, !type.isEmpty, type != "public-key" { throw .wrongType }
    }

    private static func credentialId(id: String, rawId: String?) throws(WebAuthnError) -> [UInt8] {
        guard let decoded = WebAuthnBase64URL.decode(id, maxBytes: AuthenticatorData.maximumCredentialIdLength), !decoded.isEmpty else {
            throw .malformed("credential id")
        }
        if let rawId, !rawId.isEmpty {
            guard let raw = WebAuthnBase64URL.decode(rawId, maxBytes: AuthenticatorData.maximumCredentialIdLength) else {
                throw .malformed("credential rawId")
            }
            guard raw == decoded else { throw .credentialIdMismatch }
        }
        return decoded
    }

    private static func decode(_ text: String, limit: Int, what: String) throws(WebAuthnError) -> [UInt8] {
        guard let bytes = WebAuthnBase64URL.decode(text, maxBytes: limit) else {
            throw .malformed("\(what) is not base64url or is larger than \(limit) bytes")
        }
        guard !bytes.isEmpty else { throw .malformed("\(what) is empty") }
        return bytes
    }

    private static func checkClientData(
        _ clientData: ClientData, type: String, expectedChallenge: [UInt8], rp: WebAuthnRelyingParty
    ) throws(WebAuthnError) {
        guard clientData.type == type else { throw .wrongType }
        guard constantTimeEqual(clientData.challenge, expectedChallenge) else { throw .challengeMismatch }
        guard rp.allowedOrigins.contains(clientData.origin) else { throw .originNotAllowed }
        guard clientData.crossOrigin != true, clientData.topOrigin == nil else { throw .crossOrigin }
    }

    private static func checkAuthenticatorData(_ authData: AuthenticatorData, rp: WebAuthnRelyingParty) throws(WebAuthnError) {
        let expected = Array(SHA256.hash(data: Array(rp.id.utf8)))
        guard constantTimeEqual(authData.rpIdHash, expected) else { throw .rpIdMismatch }
        guard authData.flags.contains(.userPresent) else { throw .userNotPresent }
        if rp.userVerification == .required, !authData.flags.contains(.userVerified) { throw .userNotVerified }
        if authData.flags.contains(.backupState), !authData.flags.contains(.backupEligible) { throw .backupFlagsInvalid }
    }

    /// Compares without an early exit, so timing does not reveal how long a matching prefix is.
    /// (Lengths are not secret.)
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
