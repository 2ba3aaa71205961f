import ArgumentParser
import CosyncAuth
import Crypto
import Foundation

/// `cosyncauth bench-passkey`: passkey assertion verifications per second (ES256, what `loginComplete`
/// and `verifyComplete` run: base64url decoding, clientDataJSON and authenticatorData parsing, the
/// checks of spec <doc:AppKeyAPI> §7.5 and the P-256 signature) next to the raw P-256 verify ceiling of this machine,
/// both measured in this run with the same number of workers (one per core by default).
struct BenchPasskey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-passkey", abstract: "Measure WebAuthn assertion verifications per second next to raw P-256 verifies.")

    @Option(help: "Seconds per measurement") var seconds: Double = 5
    @Option(help: "Workers (default: one per core)") var workers: Int = ProcessInfo.processInfo.activeProcessorCount

    func run() async throws {
        guard seconds > 0, seconds <= 600, (1...256).contains(workers) else { throw ValidationError("seconds 0-600, workers 1-256") }
        let rpId = "bench.example.com"
        let origin = "https://bench.example.com"
        let key = P256.Signing.PrivateKey()
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let credentialId = (0..<20).map { _ in UInt8.random(in: 0...255) }

        // authenticatorData: rpIdHash, flags UP|UV, counter 0 (as iCloud Keychain passkeys send).
        let authData = Array(SHA256.hash(data: Data(rpId.utf8))) + [0x05, 0, 0, 0, 0]
        let clientData = Array(
            #"{"type":"webauthn.get","challenge":"\#(WebAuthn.encodeBase64URL(challenge))","origin":"\#(origin)"}"#.utf8)
        let signed = Data(authData + Array(SHA256.hash(data: Data(clientData))))
        let signature = try key.signature(for: signed)
        let der = signature.derRepresentation
        let raw = key.publicKey.rawRepresentation  // x ‖ y
        let cose: [UInt8] = [0xA5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20] + Array(raw.prefix(32)) + [0x22, 0x58, 0x20]
            + Array(raw.suffix(32))
        let assertion = AssertionResponse(
            id: WebAuthn.encodeBase64URL(credentialId), rawId: nil, type: "public-key", clientDataJSON: WebAuthn.encodeBase64URL(clientData),
            authenticatorData: WebAuthn.encodeBase64URL(authData), signature: WebAuthn.encodeBase64URL(Array(der)), userHandle: nil)
        let stored = StoredCredential(credentialId: credentialId, publicKeyCOSE: cose, signCount: 0, backupEligible: false)
        let rp = WebAuthnRelyingParty(id: rpId, allowedOrigins: [origin])
        _ = try WebAuthn.verifyAssertion(assertion, expectedChallenge: challenge, rp: rp, credential: stored)
        let publicKey = key.publicKey

        let ceiling = try await measure {
            guard publicKey.isValidSignature(signature, for: signed) else { throw ValidationError("raw verify failed") }
        }
        let full = try await measure {
            _ = try WebAuthn.verifyAssertion(assertion, expectedChallenge: challenge, rp: rp, credential: stored)
        }
        print(String(format: "raw P-256 verify (ceiling):          %9.0f /s (%d workers)", ceiling, workers))
        print(String(format: "WebAuthn assertion verify (ES256):   %9.0f /s = %.2f of the ceiling (goal >= 0.5)", full, full / ceiling))
    }

    /// Operations per second of `body` on `workers` tasks for `seconds`.
    func measure(_ body: @escaping @Sendable () throws -> Void) async throws -> Double {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let start = ContinuousClock.now
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var count = 0
                    while ContinuousClock.now < deadline {
                        for _ in 0..<16 { try body() }
                        count += 16
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        return Double(total) / ((ContinuousClock.now - start) / .seconds(1))
    }
}
