import CosyncAuth
import Foundation
import Testing

/// A deterministic mutation fuzzer for the WebAuthn parsers and verifiers, run in-process. Seeds
/// are fixed so a failure reproduces; every mutant must end in a value or a `WebAuthnError` (the
/// typed `throws` makes any other error impossible, and a trap would end the test run), and no
/// mutant of a signed input may verify.
@Suite("WebAuthn fuzzing")
struct WebAuthnFuzzTests {
    /// SplitMix64: small, fast, reproducible.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Bytes that mean something to a CBOR or JSON reader.
    static let interesting: [UInt8] = [
        0x00, 0x01, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1F, 0x20, 0x38, 0x40, 0x58, 0x5B, 0x5F, 0x60, 0x7B, 0x7F, 0x80, 0x98,
        0x9F, 0xA0, 0xB8, 0xBF, 0xC0, 0xD8, 0xF4, 0xF5, 0xF6, 0xF7, 0xF9, 0xFB, 0xFF, 0x22, 0x2C, 0x3A, 0x5B, 0x5C, 0x5D, 0x7D,
    ]

    /// One to four stacked mutations of `input`: bit flips, interesting bytes, truncation, insertion,
    /// deletion, CBOR length-field inflation, duplication and splicing from `corpus`.
    static func mutate(_ input: [UInt8], corpus: [[UInt8]], rng: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<9, using: &rng) {
            case 0 where !bytes.isEmpty:
                bytes[position] ^= UInt8(1) << UInt8.random(in: 0...7, using: &rng)
            case 1 where !bytes.isEmpty:
                bytes[position] = interesting.randomElement(using: &rng) ?? 0
            case 2:
                bytes.removeLast(bytes.isEmpty ? 0 : Int.random(in: 1...bytes.count, using: &rng))
            case 3:
                let count = Int.random(in: 1...8, using: &rng)
                bytes.insert(contentsOf: (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }, at: position)
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &rng))
                bytes.removeSubrange(position..<end)
            case 5 where !bytes.isEmpty:
                // Inflate a CBOR head: keep the major type, make the argument huge or longer than the rest.
                let major = bytes[position] & 0xE0
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes[position] = major | 0x1B; bytes.insert(contentsOf: [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], at: min(bytes.count, position + 1))
                case 1: bytes[position] = major | 0x1A; bytes.insert(contentsOf: [0x00, 0x01, 0x00, 0x00], at: min(bytes.count, position + 1))
                default: bytes[position] = major | UInt8.random(in: 0...23, using: &rng)
                }
            case 6 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...32, using: &rng))
                bytes.insert(contentsOf: Array(bytes[position..<end]), at: Int.random(in: 0...bytes.count, using: &rng))
            case 7:
                if let donor = corpus.randomElement(using: &rng), !donor.isEmpty {
                    let start = Int.random(in: 0..<donor.count, using: &rng)
                    let end = min(donor.count, start + Int.random(in: 1...64, using: &rng))
                    if Bool.random(using: &rng) || bytes.isEmpty {
                        bytes.insert(contentsOf: donor[start..<end], at: position)
                    } else {
                        let stop = min(bytes.count, position + (end - start))
                        bytes.replaceSubrange(position..<stop, with: donor[start..<end])
                    }
                }
            default:
                if !bytes.isEmpty { bytes[position] = UInt8.random(in: 0...255, using: &rng) }
            }
        }
        return bytes
    }

    /// A mutant that differs from the original (retrying a few times, then forcing a change).
    static func mutant(_ input: [UInt8], corpus: [[UInt8]], rng: inout SeededGenerator) -> [UInt8] {
        for _ in 0..<4 {
            let m = mutate(input, corpus: corpus, rng: &rng)
            if m != input { return m }
        }
        return input + [0x00]
    }

    struct Tally {
        var inputs = 0
        var accepted = 0
        var slowest: Duration = .zero
    }

    /// Runs `body` on `count` inputs, timing each.
    static func run(_ count: Int, _ tally: inout Tally, _ body: (Int) -> Bool) {
        let clock = ContinuousClock()
        for index in 0..<count {
            let start = clock.now
            if body(index) { tally.accepted += 1 }
            let took = clock.now - start
            if took > tally.slowest { tally.slowest = took }
        }
        tally.inputs += count
    }

    static let rp = WebAuthnRelyingParty(id: "example.com", allowedOrigins: ["https://example.com"])

    @Test("100,000+ mutated inputs: parsers and verifiers only return or throw WebAuthnError")
    func fuzz() async throws {
        // The loop is long and synchronous: it runs on a thread of its own, not on one of the (two, on
        // this machine) threads of the cooperative pool that the rest of the suite's servers share.
        let outcome = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<FuzzOutcome, any Error>) in
            Thread.detachNewThread { continuation.resume(with: Result { try Self.fuzzRun() }) }
        }
        #expect(outcome.total >= 100_000)
        #expect(outcome.signedAssertionsAccepted == 0, "a mutant of signed assertion data verified")
        #expect(outcome.signedMutantsAccepted == 0, "a mutant of signed registration data verified")
        #expect(outcome.slowest < .seconds(1))
    }

    struct FuzzOutcome: Sendable {
        let total: Int
        let signedAssertionsAccepted: Int
        let signedMutantsAccepted: Int
        let slowest: Duration
    }

    static func fuzzRun() throws -> FuzzOutcome {
        let clock = ContinuousClock()
        let started = clock.now
        var rng = SeededGenerator(seed: 0xC0FF_EE12_3456_789A)

        // Seed corpus from the three key types and the attestation formats.
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }
        var authenticators = [SoftwareAuthenticator.KeyKind.es256, .rs256, .ed25519].map {
            SoftwareAuthenticator(kind: $0, rpId: "example.com", origin: "https://example.com")
        }
        var extensionTamper = SoftwareAuthenticator.Tamper()
        extensionTamper.extensions = TestCBOR.encode(TestCBOR.map([(.text("credProtect"), TestCBOR.int(2)), (.text("x"), .array([.bool(true), .null]))]))
        let ca = TestCA(withIntermediate: true)
        var registrations: [RegistrationResponse] = []
        for auth in authenticators {
            registrations.append(auth.register(challenge: challenge, attestation: .packedSelf))
            registrations.append(auth.register(challenge: challenge, attestation: .none, tamper: extensionTamper))
        }
        registrations.append(authenticators[0].register(challenge: challenge, attestation: .packedCertificate(ca: ca)))
        registrations.append(authenticators[0].register(challenge: challenge, attestation: .apple(ca: ca)))
        var assertions: [(AssertionResponse, StoredCredential)] = []
        for index in authenticators.indices {
            let stored = authenticators[index].storedCredential
            assertions.append((authenticators[index].assert(challenge: challenge, counter: 7), stored))
            assertions.append((authenticators[index].assert(challenge: challenge, counter: 9, tamper: extensionTamper), stored))
        }
        func bytes(_ s: String) -> [UInt8] { WebAuthn.decodeBase64URL(s) ?? [] }
        let objects = registrations.map { bytes($0.attestationObject) }
        let keys = authenticators.map(\.publicKeyCOSE)
        var authDatas = assertions.map { bytes($0.0.authenticatorData) }
        for object in objects {
            if case .bytes(let authData)? = try CBOR.decode(object)[text: "authData"] { authDatas.append(authData) }
        }
        let clientDatas = registrations.map { bytes($0.clientDataJSON) } + assertions.map { bytes($0.0.clientDataJSON) }
        let corpus = objects + keys + authDatas + clientDatas

        // The unmutated inputs verify.
        for r in registrations { _ = try WebAuthn.verifyRegistration(r, expectedChallenge: challenge, rp: Self.rp) }
        for (a, s) in assertions { _ = try WebAuthn.verifyAssertion(a, expectedChallenge: challenge, rp: Self.rp, credential: s) }

        var cbor = Tally(), cose = Tally(), authData = Tally(), clientData = Tally(), registration = Tally(), assertion = Tally()
        Self.run(40_000, &cbor) { i in
            let input = Self.mutant(corpus[i % corpus.count], corpus: corpus, rng: &rng)
            return (try? CBOR.decode(input)) != nil
        }
        Self.run(15_000, &cose) { i in
            let input = Self.mutant(keys[i % keys.count], corpus: corpus, rng: &rng)
            return (try? COSEKey.parse(input)) != nil
        }
        Self.run(20_000, &authData) { i in
            let input = Self.mutant(authDatas[i % authDatas.count], corpus: corpus, rng: &rng)
            return (try? AuthenticatorData(input)) != nil
        }
        Self.run(10_000, &clientData) { i in
            let input = Self.mutant(clientDatas[i % clientDatas.count], corpus: corpus, rng: &rng)
            return (try? ClientData(input)) != nil
        }
        // Registrations: mutate the attestationObject, the authData inside it, or clientDataJSON.
        // Only mutants of signed data are required to fail (fmt none signs nothing).
        var signedMutantsAccepted = 0
        Self.run(20_000, &registration) { i in
            var r = registrations[i % registrations.count]
            let signed = (try? CBOR.decode(objects[i % objects.count])[text: "fmt"]) != .text("none")
            var touchedSignedData = false
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                r.attestationObject = WebAuthn.encodeBase64URL(Self.mutant(objects[i % objects.count], corpus: corpus, rng: &rng))
            case 1:
                guard case .map(var entries) = try? CBOR.decode(objects[i % objects.count]),
                      let index = entries.firstIndex(where: { $0.key == .text("authData") }),
                      case .bytes(let original) = entries[index].value else { return false }
                entries[index].value = .bytes(Self.mutant(original, corpus: corpus, rng: &rng))
                r.attestationObject = WebAuthn.encodeBase64URL(TestCBOR.encode(.map(entries)))
                touchedSignedData = true
            case 2:
                r.clientDataJSON = WebAuthn.encodeBase64URL(Self.mutant(bytes(r.clientDataJSON), corpus: corpus, rng: &rng))
                touchedSignedData = true
            default:
                r.id = String(decoding: Self.mutant(Array(r.id.utf8), corpus: corpus, rng: &rng), as: UTF8.self)
            }
            let ok = (try? WebAuthn.verifyRegistration(r, expectedChallenge: challenge, rp: Self.rp)) != nil
            if ok && signed && touchedSignedData { signedMutantsAccepted += 1 }
            return ok
        }
        // Assertions: every byte of authenticatorData, clientDataJSON and the signature is signed, so
        // no mutant of them may verify. (A mutated stored key that still encodes the same key could.)
        var signedAssertionsAccepted = 0
        Self.run(20_000, &assertion) { i in
            var (a, stored) = assertions[i % assertions.count]
            var touchedSignedData = true
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: a.authenticatorData = WebAuthn.encodeBase64URL(Self.mutant(bytes(a.authenticatorData), corpus: corpus, rng: &rng))
            case 1: a.clientDataJSON = WebAuthn.encodeBase64URL(Self.mutant(bytes(a.clientDataJSON), corpus: corpus, rng: &rng))
            case 2: a.signature = WebAuthn.encodeBase64URL(Self.mutant(bytes(a.signature), corpus: corpus, rng: &rng))
            default:
                stored.publicKeyCOSE = Self.mutant(stored.publicKeyCOSE, corpus: corpus, rng: &rng)
                touchedSignedData = false
            }
            let ok = (try? WebAuthn.verifyAssertion(a, expectedChallenge: challenge, rp: Self.rp, credential: stored)) != nil
            if ok && touchedSignedData { signedAssertionsAccepted += 1 }
            return ok
        }

        let tallies = [("CBOR", cbor), ("COSE key", cose), ("authenticatorData", authData), ("clientDataJSON", clientData),
                       ("verifyRegistration", registration), ("verifyAssertion", assertion)]
        let total = tallies.reduce(0) { $0 + $1.1.inputs }
        let elapsed = clock.now - started
        for (name, tally) in tallies {
            print("WebAuthn fuzz \(name): \(tally.inputs) inputs, \(tally.accepted) accepted, slowest \(tally.slowest)")
        }
        print("WebAuthn fuzz total: \(total) mutated inputs in \(elapsed)")
        return FuzzOutcome(
            total: total, signedAssertionsAccepted: signedAssertionsAccepted, signedMutantsAccepted: signedMutantsAccepted,
            slowest: tallies.map(\.1.slowest).max() ?? .zero)
    }
}
