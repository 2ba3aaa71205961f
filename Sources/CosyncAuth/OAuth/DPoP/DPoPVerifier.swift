import Crypto
import Foundation
import Logging
import PostgresNIO

/// DPoP (RFC 9449): checks the `DPoP` proof a request carries and answers the thumbprint (`jkt`) of
/// the key that signed it.
///
/// A proof passes when, in this order: it is at most `DPoPProof.maxBytes`; it is a compact JWS with
/// `typ: dpop+jwt`, an asymmetric `alg` (ES256, RS256, PS256, EdDSA) and a public `jwk` (RSA of 2048
/// bits or more) whose key verifies the signature; `htm` is the request's method and `htu` its URL
/// (RFC 9449 §4.3 normalisation); `iat` lies within `pastSeconds` before and `futureSeconds` after
/// now; `ath` hashes the presented access token (at a resource); `nonce` is one this server issued
/// recently; and its `jti` was never accepted before for that key. Every refusal carries a fresh
/// nonce so the client can retry at once.
///
/// Nonces need no shared state: a nonce is HMAC-SHA256 over the app and a 5-minute time bucket, keyed
/// with a key every node derives from the deployment's master key (`SecretBox.derivedKey`). Deriving
/// it, rather than storing a random key in PostgreSQL, costs no query per request and needs no
/// first-writer race between nodes; every node already holds the same master key. A nonce of the
/// current or the previous bucket is accepted (so one lives 5 to 10 minutes), and the next bucket's
/// too when it starts within `futureSeconds` (a node whose clock runs slightly ahead issued it).
///
/// Replays are caught in PostgreSQL (`oauth_dpop_proofs`): the first insert of a (jkt, jti) wins, on
/// whatever node. A row only needs to outlive its proof's acceptance window, so each expires after
/// `replayRowSeconds` and housekeeping deletes it: the table holds at most a few minutes of proofs.
public struct DPoPVerifier: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let logger: Logger
    let now: @Sendable () -> Date
    private let nonceKey: SymmetricKey

    /// How old a proof's `iat` may be, and how far ahead of this node's clock.
    public static let pastSeconds: Double = 60
    public static let futureSeconds: Double = 5
    /// The length of one nonce bucket.
    public static let nonceBucketSeconds: Double = 300
    /// How long a seen (jkt, jti) is kept: longer than a proof stays acceptable (65 s), with room for
    /// clock differences between the nodes and the database.
    static let replayRowSeconds = 180
    /// The longest `jti` accepted (the table's limit).
    static let maxJTILength = 256

    public init(client: PostgresClient, box: SecretBox, logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        self.client = client
        self.box = box
        self.logger = logger
        self.now = now
        self.nonceKey = box.derivedKey(label: "dpop-nonce")
    }

    /// What the caller expects of a proof.
    public struct Expectation: Sendable {
        /// The request's method and its URL without query or fragment (`htm`, `htu`).
        public var method: String
        public var url: String
        /// The access token the request presents, at a resource (`ath`); nil at the token endpoint.
        public var accessToken: String?

        public init(method: String, url: String, accessToken: String? = nil) {
            self.method = method
            self.url = url
            self.accessToken = accessToken
        }
    }

    /// Checks `proof` (the `DPoP` header, nil when absent) and answers its key's thumbprint, or nil
    /// when no proof came. Throws `invalid_dpop_proof`, or `use_dpop_nonce` with a fresh nonce. At a
    /// resource (`expecting.accessToken` set) the refusal is a 401 with a `DPoP` challenge (RFC 9449
    /// §7.1); at the token endpoint a 400 (§5).
    public func verify(_ proof: String?, expecting: Expectation, appRef: Int64) async throws(OAuthError) -> String? {
        guard let proof else { return nil }
        let now = self.now()
        let parsed: DPoPProof
        let nonce: String?
        let jti: String
        do throws(DPoPRefusal) {
            parsed = try DPoPProof(proof)
            (jti, nonce) = try Self.checkClaims(parsed.claims, expecting: expecting, now: now)
        } catch {
            logger.debug("DPoP proof refused", metadata: ["reason": "\(error.reason)"])
            throw refusal("invalid_dpop_proof", error.reason, expecting: expecting, appRef: appRef, now: now)
        }
        guard let nonce else {
            throw refusal("use_dpop_nonce", "a DPoP nonce is required: use the one in the DPoP-Nonce header", expecting: expecting, appRef: appRef, now: now)
        }
        guard isAcceptedNonce(nonce, appRef: appRef, now: now) else {
            throw refusal("use_dpop_nonce", "the DPoP nonce is stale or unknown: use the one in the DPoP-Nonce header", expecting: expecting, appRef: appRef, now: now)
        }
        let firstUse: Bool
        do {
            firstUse = try await client.withConnection {
                try await OAuthDPoPProofStore.record(
                    $0, jkt: parsed.key.thumbprint, jti: jti, lifetimeSeconds: Self.replayRowSeconds, logger: logger)
            }
        } catch {
            logger.error("DPoP replay check failed", metadata: ["error": "\(String(reflecting: error))"])
            throw .serverError()
        }
        guard firstUse else {
            throw refusal("invalid_dpop_proof", "this DPoP proof (jti) was used before: make a new proof for every request", expecting: expecting, appRef: appRef, now: now)
        }
        return parsed.key.thumbprint
    }

    /// The nonce a client should use in its next proof (sent as `DPoP-Nonce`).
    public func currentNonce(appRef: Int64) -> String? { nonce(appRef: appRef, bucket: Self.bucket(now())) }

    /// Whether `text` has the form of a JWK SHA-256 thumbprint (43 characters of base64url), as a
    /// `dpop_jkt` request parameter must (RFC 9449 §10).
    public static func isThumbprint(_ text: String) -> Bool {
        text.utf8.count == 43 && StrictBase64URL.decode(text)?.count == 32
    }

    // MARK: - Claims

    /// Checks the claims against the request; answers the `jti` and the `nonce` (nil when absent:
    /// the caller answers `use_dpop_nonce`).
    static func checkClaims(_ claims: [String: JSONValue], expecting: Expectation, now: Date) throws(DPoPRefusal) -> (jti: String, nonce: String?) {
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else { throw DPoPRefusal("the DPoP proof has no jti") }
        guard jti.unicodeScalars.count <= maxJTILength else { throw DPoPRefusal("the DPoP proof's jti is longer than \(maxJTILength) characters") }
        guard jti.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
            throw DPoPRefusal("the DPoP proof's jti holds control characters")
        }
        guard let htm = claims["htm"]?.stringValue else { throw DPoPRefusal("the DPoP proof has no htm") }
        guard htm == expecting.method else { throw DPoPRefusal("the DPoP proof's htm does not match the request's method (\(expecting.method))") }
        guard let htu = claims["htu"]?.stringValue else { throw DPoPRefusal("the DPoP proof has no htu") }
        guard let proofURL = HTTPURINormalizer.normalize(htu), let requestURL = HTTPURINormalizer.normalize(expecting.url), proofURL == requestURL
        else { throw DPoPRefusal("the DPoP proof's htu does not match the request's URL (\(expecting.url))") }
        let iat: Double
        switch claims["iat"] {
        case .int(let value): iat = Double(value)
        case .double(let value) where value.isFinite: iat = value
        case nil: throw DPoPRefusal("the DPoP proof has no iat")
        default: throw DPoPRefusal("the DPoP proof's iat is not a number of seconds")
        }
        let current = now.timeIntervalSince1970
        guard iat >= current - pastSeconds else { throw DPoPRefusal("the DPoP proof is too old (iat more than \(Int(pastSeconds)) s ago)") }
        guard iat <= current + futureSeconds else { throw DPoPRefusal("the DPoP proof's iat is in the future") }
        if let token = expecting.accessToken {
            guard let ath = claims["ath"]?.stringValue else { throw DPoPRefusal("the DPoP proof has no ath (the access token's hash)") }
            let expected = Base64URL.encode(SHA256.hash(data: Data(token.utf8)))
            guard Secrets.constantTimeEquals(Data(ath.utf8), Data(expected.utf8)) else {
                throw DPoPRefusal("the DPoP proof's ath does not match the access token")
            }
        }
        switch claims["nonce"] {
        case nil: return (jti, nil)
        case .string(let nonce): return (jti, nonce)
        default: throw DPoPRefusal("the DPoP proof's nonce is not a string")
        }
    }

    // MARK: - Nonces

    static func bucket(_ date: Date) -> Int64 {
        let seconds = date.timeIntervalSince1970
        // Only a broken clock gives a time outside these bounds; it must not trap.
        guard seconds.isFinite, seconds > 0, seconds < 1e12 else { return 0 }
        return Int64(seconds / nonceBucketSeconds)
    }

    func nonce(appRef: Int64, bucket: Int64) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("dpop-nonce:\(appRef):\(bucket)".utf8), using: nonceKey)
        return Base64URL.encode(mac)
    }

    func isAcceptedNonce(_ text: String, appRef: Int64, now: Date) -> Bool {
        guard text.utf8.count == 43 else { return false }
        let current = Self.bucket(now)
        let buckets = Set([current, current - 1, Self.bucket(now.addingTimeInterval(Self.futureSeconds))])
        var accepted = false
        for bucket in buckets where Secrets.constantTimeEquals(Data(text.utf8), Data(nonce(appRef: appRef, bucket: bucket).utf8)) {
            accepted = true
        }
        return accepted
    }

    private func refusal(_ code: String, _ description: String, expecting: Expectation, appRef: Int64, now: Date) -> OAuthError {
        let atResource = expecting.accessToken != nil
        var error = OAuthError(code, description, status: atResource ? 401 : 400)
        if atResource { error.challenge = "DPoP" }
        error.dpopNonce = nonce(appRef: appRef, bucket: Self.bucket(now))
        return error
    }
}
