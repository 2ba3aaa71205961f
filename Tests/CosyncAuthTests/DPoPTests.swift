import CosyncAuth
import Crypto
import Foundation
import Logging
import PostgresNIO
import Testing
import _CryptoExtras

/// DPoP proofs (RFC 9449) made here with swift-crypto keys and checked by `DPoPVerifier` against the
/// test database (the `jti` replay table is real): every rule of the verifier, one test each.
@Suite struct DPoPTests {
    static let url = "https://auth.example.test/apps/app-1/oauth/token"
    static let appRef: Int64 = 4_242

    /// A key that signs proofs: its JWS `alg`, its public JWK, and the signing function.
    struct Signer: Sendable {
        let alg: String
        let jwk: [String: JSONValue]
        let sign: @Sendable ([UInt8]) throws -> [UInt8]

        static func p256() -> Signer {
            let key = P256.Signing.PrivateKey()
            let raw = key.publicKey.rawRepresentation
            return Signer(
                alg: "ES256",
                jwk: ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(b64(raw.prefix(32))), "y": .string(b64(raw.suffix(32)))],
                sign: { Array(try key.signature(for: $0).rawRepresentation) })
        }

        static func ed25519() -> Signer {
            let key = Curve25519.Signing.PrivateKey()
            return Signer(
                alg: "EdDSA", jwk: ["kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string(b64(key.publicKey.rawRepresentation))],
                sign: { Array(try key.signature(for: $0)) })
        }

        static func rsa(_ key: _RSA.Signing.PrivateKey, pss: Bool = false) throws -> Signer {
            let primitives = try key.publicKey.getKeyPrimitives()
            return Signer(
                alg: pss ? "PS256" : "RS256", jwk: ["kty": .string("RSA"), "n": .string(b64(primitives.modulus)), "e": .string(b64(primitives.publicExponent))],
                sign: { Array(try key.signature(for: $0, padding: pss ? .PSS : .insecurePKCS1v1_5).rawRepresentation) })
        }
    }

    /// The RSA key of RFC 7517 Appendix A.2, whose public half is the example of RFC 7638 §3.1.
    static func rfc7517Key() throws -> _RSA.Signing.PrivateKey {
        func bytes(_ text: String) -> [UInt8] { Array(Base64URL.decodeLenient(text) ?? Data()) }
        return try _RSA.Signing.PrivateKey(
            n: bytes(
                "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
            ),
            e: bytes("AQAB"),
            d: bytes(
                "X4cTteJY_gn4FYPsXB8rdXix5vwsg1FLN5E3EaG6RJoVH-HLLKD9M7dx5oo7GURknchnrRweUkC7hT5fJLM0WbFAKNLWY2vv7B6NqXSzUvxT0_YSfqijwp3RTzlBaCxWp4doFk5N2o8Gy_nHNKroADIkJ46pRUohsXywbReAdYaMwFs9tv8d_cPVY3i07a3t8MN6TNwm0dSawm9v47UiCl3Sk5ZiG7xojPLu4sbg1U2jx4IBTNBznbJSzFHK66jT8bgkuqsk0GjskDJk19Z4qwjwbsnn4j2WBii3RL-Us2lGVkY8fkFzme1z0HbIkfz0Y6mqnOYtqc0X4jfcKoAC8Q"
            ),
            p: bytes(
                "83i-7IvMGXoMXCskv73TKr8637FiO7Z27zv8oj6pbWUQyLPQBQxtPVnwD20R-60eTDmD2ujnMt5PoqMrm8RfmNhVWDtjjMmCMjOpSXicFHj7XOuVIYQyqVWlWEh6dN36GVZYk93N8Bc9vY41xy8B9RzzOGVQzXvNEvn7O0nVbfs"
            ),
            q: bytes(
                "3dfOR9cuYq-0S-mkFLzgItgMEfFzB2q3hWehMuG0oCuqnb3vobLyumqjVZQO1dIrdwgTnCdpYzBcOfW5r370AFXjiWft_NGEiovonizhKpo9VVS78TzFgxkIdrecRezsZ-1kYd_s1qDbxtkDEgfAITAG9LUnADun4vIcb6yelxk"
            ))
    }
    static let rfc7638Thumbprint = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"

    static func b64(_ bytes: some Sequence<UInt8>) -> String { Base64URL.encode(bytes) }

    static func json(_ object: [String: JSONValue]) -> String {
        b64((try? JSONCoding.encode(JSONValue.object(object))) ?? Data())
    }

    /// A proof signed by `signer`, with `header` and `claims` merged over good defaults (nil removes).
    static func proof(
        _ signer: Signer, verifier: DPoPVerifier, header: [String: JSONValue?] = [:], claims: [String: JSONValue?] = [:], now: Date = Date()
    ) throws -> String {
        var h: [String: JSONValue] = ["typ": .string("dpop+jwt"), "alg": .string(signer.alg), "jwk": .object(signer.jwk)]
        for (name, value) in header { h[name] = value }
        var c: [String: JSONValue] = [
            "jti": .string(UUID().uuidString), "htm": .string("POST"), "htu": .string(url), "iat": .int(Int(now.timeIntervalSince1970)),
            "nonce": .string(verifier.currentNonce(appRef: appRef) ?? ""),
        ]
        for (name, value) in claims { c[name] = value }
        let input = json(h) + "." + json(c)
        return input + "." + b64(try signer.sign(Array(input.utf8)))
    }

    static func verifier(masterKey: String = TestEnvironment.masterKey, now: @escaping @Sendable () -> Date = { Date() }) async throws -> DPoPVerifier {
        let services = try await TestEnvironment.services()
        var logger = Logger(label: "dpop-tests")
        logger.logLevel = .warning
        return DPoPVerifier(client: services.client, box: try SecretBox(masterKey: masterKey), logger: logger, now: now)
    }

    static let token = DPoPVerifier.Expectation(method: "POST", url: url)

    /// The refusal `proof` gets (nil when it passes).
    static func refusal(_ verifier: DPoPVerifier, _ proof: String?, expecting: DPoPVerifier.Expectation = token) async -> OAuthError? {
        do {
            _ = try await verifier.verify(proof, expecting: expecting, appRef: appRef)
            return nil
        } catch {
            return error
        }
    }

    /// Expects an `invalid_dpop_proof` refusal whose description mentions `words`, with a nonce to retry.
    static func expectRefused(
        _ verifier: DPoPVerifier, _ proof: String?, _ words: String, code: String = "invalid_dpop_proof", expecting: DPoPVerifier.Expectation = token,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let error = await refusal(verifier, proof, expecting: expecting)
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.description.contains(words) == true, "\(String(describing: error?.description))", sourceLocation: sourceLocation)
        #expect(error?.dpopNonce == verifier.currentNonce(appRef: appRef), sourceLocation: sourceLocation)
    }

    // MARK: - Good proofs

    @Test func rfc7638ThumbprintOfAGoodRSAProof() async throws {
        let verifier = try await Self.verifier()
        for pss in [false, true] {
            let signer = try Signer.rsa(try Self.rfc7517Key(), pss: pss)
            let jkt = try await verifier.verify(try Self.proof(signer, verifier: verifier), expecting: Self.token, appRef: Self.appRef)
            #expect(jkt == Self.rfc7638Thumbprint)
        }
    }

    @Test func goodProofsOfEveryAlgorithm() async throws {
        let verifier = try await Self.verifier()
        let p256 = Signer.p256()
        let ed = Signer.ed25519()
        let rsa = try Signer.rsa(try _RSA.Signing.PrivateKey(keySize: .bits2048), pss: true)
        func expected(_ canonical: String) -> String { Self.b64(SHA256.hash(data: Data(canonical.utf8))) }
        let p256Thumbprint = expected(
            #"{"crv":"P-256","kty":"EC","x":"\#(p256.jwk["x"]?.stringValue ?? "")","y":"\#(p256.jwk["y"]?.stringValue ?? "")"}"#)
        let edThumbprint = expected(#"{"crv":"Ed25519","kty":"OKP","x":"\#(ed.jwk["x"]?.stringValue ?? "")"}"#)
        #expect(try await verifier.verify(try Self.proof(p256, verifier: verifier), expecting: Self.token, appRef: Self.appRef) == p256Thumbprint)
        #expect(try await verifier.verify(try Self.proof(ed, verifier: verifier), expecting: Self.token, appRef: Self.appRef) == edThumbprint)
        let jkt = try await verifier.verify(try Self.proof(rsa, verifier: verifier), expecting: Self.token, appRef: Self.appRef)
        #expect(jkt.map(DPoPVerifier.isThumbprint) == true)
        // No proof: nothing to bind (the caller decides whether one was required).
        #expect(try await verifier.verify(nil, expecting: Self.token, appRef: Self.appRef) == nil)
        #expect(DPoPVerifier.isThumbprint(p256Thumbprint) && !DPoPVerifier.isThumbprint("abc"))
    }

    @Test func htuIsComparedWithoutQueryAndAfterNormalisation() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.p256()
        for htu in [
            "https://auth.example.test/apps/app-1/oauth/token?x=1#frag", "HTTPS://AUTH.Example.TEST:443/apps/app-1/oauth/token",
            "https://auth.example.test/apps/app-1/oauth/%74oken",
        ] {
            let jkt = try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: ["htu": .string(htu)]), expecting: Self.token, appRef: Self.appRef)
            #expect(jkt != nil, "\(htu)")
        }
        let local = DPoPVerifier.Expectation(method: "POST", url: "http://127.0.0.1:8080/apps/app-1/oauth/token?ignored=1")
        let proof = try Self.proof(signer, verifier: verifier, claims: ["htu": .string("http://127.0.0.1:8080/apps/app-1/oauth/token")])
        #expect(try await verifier.verify(proof, expecting: local, appRef: Self.appRef) != nil)
    }

    // MARK: - Request binding

    @Test func wrongHTUOrHTMIsRefused() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.ed25519()
        for htu in [
            "https://auth.example.test/apps/app-2/oauth/token", "https://other.example.test/apps/app-1/oauth/token",
            "http://auth.example.test/apps/app-1/oauth/token", "https://auth.example.test:8443/apps/app-1/oauth/token",
            "https://auth.example.test/apps/app-1/oauth/token/", "https://user@auth.example.test/apps/app-1/oauth/token",
            "ftp://auth.example.test/apps/app-1/oauth/token", "not a url", "",
        ] {
            await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["htu": .string(htu)]), "htu")
        }
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["htu": .int(1)]), "no htu")
        for htm in ["GET", "post", "POST "] {
            await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["htm": .string(htm)]), "htm")
        }
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["htm": nil]), "no htm")
    }

    @Test func athMustHashThePresentedAccessToken() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.p256()
        let accessToken = "eyJ.access.token-" + UUID().uuidString
        let resource = DPoPVerifier.Expectation(method: "GET", url: "https://auth.example.test/apps/app-1/oauth/userinfo", accessToken: accessToken)
        let base: [String: JSONValue?] = ["htm": .string("GET"), "htu": .string(resource.url)]
        let ath = Self.b64(SHA256.hash(data: Data(accessToken.utf8)))
        var good = base
        good["ath"] = .string(ath)
        #expect(try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: good), expecting: resource, appRef: Self.appRef) != nil)
        var wrong = base
        wrong["ath"] = .string(Self.b64(SHA256.hash(data: Data("another token".utf8))))
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: wrong), "ath does not match", expecting: resource)
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: base), "no ath", expecting: resource)
        // At a resource the refusal is a 401 with a DPoP challenge (RFC 9449 §7.1).
        let error = await Self.refusal(verifier, try Self.proof(signer, verifier: verifier, claims: base), expecting: resource)
        #expect(error?.status == 401 && error?.challenge == "DPoP")
    }

    // MARK: - Time

    @Test func staleFutureAndMalformedIatAreRefused() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.p256()
        let now = Date().timeIntervalSince1970
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["iat": .int(Int(now) - 61)]), "too old")
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["iat": .int(Int(now) + 30)]), "future")
        for iat: JSONValue in [.int(Int.max), .int(Int.min), .int(-1), .int(0), .double(1e300), .double(-1e300), .double(Double.greatestFiniteMagnitude)] {
            let error = await Self.refusal(verifier, try Self.proof(signer, verifier: verifier, claims: ["iat": iat]))
            #expect(error?.code == "invalid_dpop_proof", "\(iat)")
        }
        for iat: JSONValue in [.string("\(Int(now))"), .bool(true), .null, .array([.int(Int(now))])] {
            await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["iat": iat]), "iat is not a number")
        }
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["iat": nil]), "no iat")
        // A fractional NumericDate inside the window is a valid date.
        #expect(try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: ["iat": .double(now - 0.5)]), expecting: Self.token, appRef: Self.appRef) != nil)
        // A huge number in the JSON text itself (beyond Double) is refused, not trapped on.
        let input = Self.json(["typ": .string("dpop+jwt"), "alg": .string("ES256"), "jwk": .object(signer.jwk)]) + "."
            + Self.b64(Data(#"{"jti":"x","htm":"POST","htu":"\#(Self.url)","iat":1e999999}"#.utf8))
        await Self.expectRefused(verifier, input + "." + Self.b64(try signer.sign(Array(input.utf8))), "payload is not a JSON object")
    }

    // MARK: - Nonces

    @Test func nonceIsRequiredAndExpires() async throws {
        let start = Date()
        let clock = DPoPTestClock(start)
        let verifier = try await Self.verifier(now: { clock.now })
        let signer = Signer.ed25519()
        let missing = await Self.refusal(verifier, try Self.proof(signer, verifier: verifier, claims: ["nonce": nil], now: start))
        #expect(missing?.code == "use_dpop_nonce" && missing?.status == 400)
        #expect(missing?.dpopNonce == verifier.currentNonce(appRef: Self.appRef) && missing?.dpopNonce != nil)
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["nonce": .string("made-up")], now: start), "stale or unknown", code: "use_dpop_nonce")
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["nonce": .int(5)], now: start), "nonce is not a string")
        // The nonce of another app, or of a deployment with another master key, is not this one's.
        let other = try await Self.verifier(masterKey: SecretBox.generateMasterKey(), now: { clock.now })
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["nonce": .string(other.currentNonce(appRef: Self.appRef) ?? "")], now: start), "stale or unknown", code: "use_dpop_nonce")
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["nonce": .string(verifier.currentNonce(appRef: Self.appRef + 1) ?? "")], now: start), "stale or unknown", code: "use_dpop_nonce")
        // Another node with the same master key accepts this node's nonce: no shared state needed.
        let node2 = try await Self.verifier(now: { clock.now })
        #expect(try await node2.verify(try Self.proof(signer, verifier: verifier, now: start), expecting: Self.token, appRef: Self.appRef) != nil)
        // A nonce lives through the next bucket, then is refused.
        let nonce = verifier.currentNonce(appRef: Self.appRef) ?? ""
        clock.now = start.addingTimeInterval(DPoPVerifier.nonceBucketSeconds)
        #expect(verifier.currentNonce(appRef: Self.appRef) != nonce)
        let later = clock.now
        #expect(try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: ["nonce": .string(nonce)], now: later), expecting: Self.token, appRef: Self.appRef) != nil)
        clock.now = start.addingTimeInterval(2 * DPoPVerifier.nonceBucketSeconds + 1)
        let old = await Self.refusal(verifier, try Self.proof(signer, verifier: verifier, claims: ["nonce": .string(nonce)], now: clock.now))
        #expect(old?.code == "use_dpop_nonce" && old?.dpopNonce == verifier.currentNonce(appRef: Self.appRef))
    }

    // MARK: - Replay

    @Test func aJTIIsAcceptedOncePerKey() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.p256()
        let proof = try Self.proof(signer, verifier: verifier)
        #expect(try await verifier.verify(proof, expecting: Self.token, appRef: Self.appRef) != nil)
        await Self.expectRefused(verifier, proof, "used before")
        // A new proof with the same jti is still a replay; another key may use that jti.
        let jti = "fixed-jti-" + UUID().uuidString
        #expect(try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: ["jti": .string(jti)]), expecting: Self.token, appRef: Self.appRef) != nil)
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["jti": .string(jti)]), "used before")
        #expect(try await verifier.verify(try Self.proof(Signer.ed25519(), verifier: verifier, claims: ["jti": .string(jti)]), expecting: Self.token, appRef: Self.appRef) != nil)
        // Length and content of jti.
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["jti": .string(String(repeating: "j", count: 257))]), "longer than 256")
        #expect(try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: ["jti": .string(String(repeating: "é", count: 256))]), expecting: Self.token, appRef: Self.appRef) != nil)
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["jti": .string("a\u{0}b")]), "control characters")
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["jti": .string("")]), "no jti")
        await Self.expectRefused(verifier, try Self.proof(signer, verifier: verifier, claims: ["jti": .int(7)]), "no jti")
    }

    @Test func concurrentUsesOfOneProofLetExactlyOneThrough() async throws {
        let proof = try Self.proof(Signer.ed25519(), verifier: try await Self.verifier())
        // Ten "nodes" (verifiers of their own, one database) race on the same proof.
        var nodes: [DPoPVerifier] = []
        for _ in 0..<10 { nodes.append(try await Self.verifier()) }
        let passed = await withTaskGroup(of: Bool.self) { group in
            for node in nodes {
                group.addTask { (try? await node.verify(proof, expecting: Self.token, appRef: Self.appRef)) != nil }
            }
            var count = 0
            for await ok in group where ok { count += 1 }
            return count
        }
        #expect(passed == 1)
    }

    @Test func seenProofsAreBoundedAndPurged() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.p256()
        let jti = "bounded-" + UUID().uuidString
        let proof = try Self.proof(signer, verifier: verifier, claims: ["jti": .string(jti)])
        let jkt = try #require(try await verifier.verify(proof, expecting: Self.token, appRef: Self.appRef))
        let lifetime = try await TestEnvironment.value(
            "SELECT extract(epoch FROM expires_at - now())::float8 FROM oauth_dpop_proofs WHERE jkt = \(jkt) AND jti = \(jti)", as: Double.self)
        #expect(lifetime.map { $0 > 60 && $0 <= 180 } == true, "\(String(describing: lifetime))")
        // An expired row (not yet purged) does not block a new proof; housekeeping deletes expired rows.
        let stale = "stale-" + UUID().uuidString
        try await TestEnvironment.sql("INSERT INTO oauth_dpop_proofs (jkt, jti, expires_at) VALUES (\(jkt), \(stale), now() - interval '1 second')")
        #expect(try await verifier.verify(try Self.proof(signer, verifier: verifier, claims: ["jti": .string(stale)]), expecting: Self.token, appRef: Self.appRef) == jkt)
        try await TestEnvironment.sql("UPDATE oauth_dpop_proofs SET expires_at = now() - interval '1 second' WHERE jkt = \(jkt)")
        let services = try await TestEnvironment.services()
        _ = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
        #expect(try await TestEnvironment.value("SELECT count(*)::int FROM oauth_dpop_proofs WHERE jkt = \(jkt)", as: Int.self) == 0)
    }

    // MARK: - Keys and algorithms

    @Test func signatureByAnotherKeyIsRefused() async throws {
        let verifier = try await Self.verifier()
        for (shown, signing) in [(Signer.p256(), Signer.p256()), (Signer.ed25519(), Signer.ed25519())] {
            let mismatched = Signer(alg: shown.alg, jwk: shown.jwk, sign: signing.sign)
            await Self.expectRefused(verifier, try Self.proof(mismatched, verifier: verifier), "signature does not verify")
        }
        let rsa = try Signer.rsa(try Self.rfc7517Key())
        let other = try Signer.rsa(try _RSA.Signing.PrivateKey(keySize: .bits2048))
        await Self.expectRefused(verifier, try Self.proof(Signer(alg: "RS256", jwk: rsa.jwk, sign: other.sign), verifier: verifier), "signature does not verify")
        // RS256 signature presented as PS256 (the padding is part of the algorithm).
        await Self.expectRefused(verifier, try Self.proof(Signer(alg: "PS256", jwk: rsa.jwk, sign: rsa.sign), verifier: verifier), "signature does not verify")
        // A tampered payload.
        let good = try Self.proof(Signer.p256(), verifier: verifier)
        let parts = good.split(separator: ".")
        let tampered = "\(parts[0]).\(Self.json(["jti": .string("x"), "htm": .string("POST"), "htu": .string(Self.url), "iat": .int(Int(Date().timeIntervalSince1970))])).\(parts[2])"
        await Self.expectRefused(verifier, tampered, "signature does not verify")
    }

    @Test func privateKeysWeakKeysAndWrongAlgorithmsAreRefused() async throws {
        let verifier = try await Self.verifier()
        let p256 = Signer.p256()
        let privateKey = P256.Signing.PrivateKey()
        var withD = p256.jwk
        withD["d"] = .string(Self.b64(privateKey.rawRepresentation))
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["jwk": .object(withD)]), "private key member (d)")
        let rsaKey = try Self.rfc7517Key()
        var rsaPrivate = try Signer.rsa(rsaKey).jwk
        rsaPrivate["p"] = .string("83i-7IvMGXoMXCskv73TKr8637FiO7Z27zv8oj6pbWUQyLPQBQxtPVnwD20R")
        await Self.expectRefused(verifier, try Self.proof(try Signer.rsa(rsaKey), verifier: verifier, header: ["jwk": .object(rsaPrivate)]), "private key member (p)")
        // RSA below 2048 bits.
        let weak = try Signer.rsa(try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024)))
        await Self.expectRefused(verifier, try Self.proof(weak, verifier: verifier), "1024 bits")
        // alg none, HS256 (a symmetric key), and algorithms that do not go with the key.
        let none = Self.json(["typ": .string("dpop+jwt"), "alg": .string("none"), "jwk": .object(p256.jwk)]) + "."
            + Self.json(["jti": .string("n"), "htm": .string("POST"), "htu": .string(Self.url), "iat": .int(Int(Date().timeIntervalSince1970))]) + "."
        await Self.expectRefused(verifier, none, "alg none is not accepted")
        let hmacKey = SymmetricKey(size: .bits256)
        let hs = Signer(alg: "HS256", jwk: ["kty": .string("oct"), "k": .string(hmacKey.withUnsafeBytes { Self.b64($0) })], sign: { Array(HMAC<SHA256>.authenticationCode(for: $0, using: hmacKey)) })
        await Self.expectRefused(verifier, try Self.proof(hs, verifier: verifier), "alg HS256 is not accepted")
        await Self.expectRefused(verifier, try Self.proof(Signer(alg: "ES256", jwk: try Signer.rsa(rsaKey).jwk, sign: p256.sign), verifier: verifier), "does not go with")
        await Self.expectRefused(verifier, try Self.proof(Signer(alg: "ES384", jwk: p256.jwk, sign: p256.sign), verifier: verifier), "alg ES384 is not accepted")
        // Header rules: typ, jwk, crit, curve.
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["typ": .string("JWT")]), "typ must be dpop+jwt")
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["typ": nil]), "typ must be dpop+jwt")
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["jwk": nil]), "no jwk")
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["crit": .array([.string("exp")])]), "crit")
        var p384 = p256.jwk
        p384["crv"] = .string("P-384")
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["jwk": .object(p384)]), "P-256")
        var offCurve = p256.jwk
        offCurve["y"] = .string(Self.b64([UInt8](repeating: 7, count: 32)))
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["jwk": .object(offCurve)]), "not a point on P-256")
        var padded = p256.jwk
        padded["x"] = .string((p256.jwk["x"]?.stringValue ?? "") + "=")
        await Self.expectRefused(verifier, try Self.proof(p256, verifier: verifier, header: ["jwk": .object(padded)]), "not unpadded base64url")
    }

    // MARK: - Hostile input

    @Test func garbageAndHugeInputNeverTrap() async throws {
        let verifier = try await Self.verifier()
        let signer = Signer.p256()
        await Self.expectRefused(verifier, String(repeating: "A", count: 9_000), "larger than 8192 bytes")
        await Self.expectRefused(verifier, String(repeating: "A.", count: 100_000), "larger than")
        for garbage in ["", ".", "..", "a.b.c", "a.b", "a.b.c.d", "====.====.====", "é.é.é", "\u{0}.\u{0}.\u{0}", "eyJ9.eyJ9.", "e30.e30.", "W10.W10."] {
            let error = await Self.refusal(verifier, garbage)
            #expect(error?.code == "invalid_dpop_proof", "\(garbage)")
        }
        // Deep nesting, duplicate names (also through an escape), a JSON array, trailing bytes.
        let headers = [
            String(repeating: "[", count: 3_000) + String(repeating: "]", count: 3_000),
            #"{"typ":"dpop+jwt","alg":"ES256","alg":"ES256","jwk":{}}"#,
            #"{"typ":"dpop+jwt","alg":"ES256","\u0061lg":"ES256","jwk":{}}"#,
            #"{"typ":"dpop+jwt","x":{"y":{"z":{"a":{"b":{"c":{"d":{"e":{"f":1}}}}}}}}}"#,
            #"{"typ":"dpop+jwt"} x"#, #"{"typ":"\ud800"}"#, #"{"typ":"dpop+jwt",}"#,
        ]
        for header in headers {
            let input = Self.b64(Data(header.utf8)) + "." + Self.json(["jti": .string("g")])
            await Self.expectRefused(verifier, input + "." + Self.b64(try signer.sign(Array(input.utf8))), "header is not a JSON object")
        }
        // Random bytes in every part, and random mutations of a good proof.
        var generator = SystemRandomNumberGenerator()
        let good = try Self.proof(signer, verifier: verifier)
        // Two DPoP header fields reach the verifier joined by ", " (HTTPFields): refused (RFC 9449 §4.3).
        await Self.expectRefused(verifier, good + ", " + good, "not a compact JWS")
        for round in 0..<300 {
            var bytes = Array(good.utf8)
            if round % 3 == 0 {
                bytes = (0..<Int.random(in: 0..<600, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            } else {
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0x20...0x7E, using: &generator)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if text == good { continue }
            let error = await Self.refusal(verifier, text)
            #expect(error != nil)
        }
    }
}

/// A clock a test moves by hand.
final class DPoPTestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date
    init(_ start: Date) { current = start }
    var now: Date {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }
}
