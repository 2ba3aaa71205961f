import AsyncHTTPClient
import Crypto
import Foundation
import JWTKit
import NIOCore
import _CryptoExtras

/// The public keys of a `private_key_jwt` client (<doc:OAuth> §2): what a registered JWKS may hold,
/// where a JWKS URL may point, and how the keys are fetched and cached.
///
/// A client key signs with one of `algorithms`: RS256 or PS256 (an RSA key of 2048 to 8192 bits),
/// ES256 (an EC key on P-256) or EdDSA (an OKP key on Ed25519). A registered JWKS holds public keys
/// only, 1 to `maxKeys` of them, each with `use: sig` if it has a `use`, and distinct `kid`s.
public enum ClientKeys {
    public static let algorithms = ["RS256", "PS256", "ES256", "EdDSA"]
    public static let maxKeys = 10
    /// The largest JWKS document accepted, registered or fetched.
    public static let maxDocumentBytes = 65_536
    /// Members that only a private (or symmetric) key has.
    static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// Why `value` cannot be a client's registered JWKS, or nil when it can.
    public static func problem(_ value: JSONValue) -> String? {
        guard let keys = value.objectValue?["keys"]?.arrayValue else { return "must be a JWKS document: an object with a keys array" }
        guard (1...maxKeys).contains(keys.count) else { return "must hold 1 to \(maxKeys) keys" }
        guard let size = try? JSONCoding.encode(value).count, size <= maxDocumentBytes else {
            return "must be at most \(maxDocumentBytes) bytes of JSON"
        }
        var kids: Set<String> = []
        for (index, key) in keys.enumerated() {
            guard let jwk = key.objectValue else { return "keys[\(index)] must be an object" }
            if let problem = problem(key: jwk) { return "keys[\(index)] \(problem)" }
            if let kid = jwk["kid"]?.stringValue, !kids.insert(kid).inserted { return "has two keys with the kid '\(kid)'" }
        }
        return nil
    }

    /// Why one JWK cannot be a client's signing key, or nil when it can.
    static func problem(key jwk: [String: JSONValue]) -> String? {
        if let member = privateMembers.first(where: { jwk[$0] != nil }) {
            return "holds private key material ('\(member)'): register public keys only"
        }
        if let use = jwk["use"], use != .string("sig") { return "must have use 'sig' if it has a use" }
        if let kid = jwk["kid"] {
            guard let text = kid.stringValue, (1...256).contains(text.unicodeScalars.count) else { return "kid must be a string of 1 to 256 characters" }
        }
        if let alg = jwk["alg"] {
            guard let text = alg.stringValue, algorithms.contains(text) else { return "alg must be one of \(algorithms.joined(separator: ", "))" }
        }
        func bytes(_ member: String) -> [UInt8]? {
            jwk[member]?.stringValue.flatMap { WebAuthnBase64URL.decode($0, maxBytes: 1024) }
        }
        switch jwk["kty"]?.stringValue {
        case "RSA":
            if let alg = jwk["alg"]?.stringValue, !["RS256", "PS256"].contains(alg) { return "is an RSA key: alg must be RS256 or PS256" }
            guard let n = bytes("n"), let e = bytes("e"), !e.isEmpty, e.count <= 8,
                  let key = try? _RSA.Signing.PublicKey(n: Data(n), e: Data(e))
            else { return "must be an RSA public key of at least 2048 bits (n and e in base64url)" }
            guard key.keySizeInBits <= 8192 else { return "must be an RSA key of at most 8192 bits" }
        case "EC":
            if let alg = jwk["alg"]?.stringValue, alg != "ES256" { return "is an EC key: alg must be ES256" }
            guard jwk["crv"] == .string("P-256") else { return "must be on the curve P-256" }
            guard let x = bytes("x"), let y = bytes("y"), x.count == 32, y.count == 32,
                  (try? P256.Signing.PublicKey(rawRepresentation: x + y)) != nil
            else { return "must be a P-256 public key (x and y, 32 bytes each in base64url)" }
        case "OKP":
            if let alg = jwk["alg"]?.stringValue, alg != "EdDSA" { return "is an OKP key: alg must be EdDSA" }
            guard jwk["crv"] == .string("Ed25519") else { return "must be on the curve Ed25519" }
            guard let x = bytes("x"), x.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: x)) != nil
            else { return "must be an Ed25519 public key (x, 32 bytes in base64url)" }
        default:
            return "kty must be RSA, EC or OKP"
        }
        return nil
    }

    /// Whether `jwk` (already found acceptable) can check a signature made with `alg`.
    static func fits(_ jwk: [String: JSONValue], alg: String) -> Bool {
        if let registered = jwk["alg"]?.stringValue, registered != alg { return false }
        switch alg {
        case "RS256", "PS256": return jwk["kty"] == .string("RSA")
        case "ES256": return jwk["kty"] == .string("EC") && jwk["crv"] == .string("P-256")
        case "EdDSA": return jwk["kty"] == .string("OKP") && jwk["crv"] == .string("Ed25519")
        default: return false
        }
    }

    // MARK: JWKS URLs

    /// Where a client's JWKS URL may point (the SSRF rule): `https` to a host whose every address is
    /// public, or `http` to a loopback IP address written as such (`http://127.0.0.1:8080/jwks`), which
    /// the admin API accepts only where the operator allows http and loopback for outgoing calls
    /// (COSYNC_WEBHOOK_ALLOW_HTTP, COSYNC_WEBHOOK_ALLOW_CIDRS). Checked when the client is saved and
    /// before every fetch, as a DNS answer can change.
    public static let publicOnly = WebhookURLGuard(allowHTTP: false, allowedNetworks: [])

    /// The loopback address of an `http` URL whose host is one (an IP literal), or nil.
    static func loopbackAddress(_ uri: String) -> String? {
        guard let components = URLComponents(string: uri), components.scheme?.lowercased() == "http",
              components.user == nil, components.password == nil, components.fragment == nil, var host = components.host
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard let address = IPNetwork.Address(host), !WebhookURLGuard.isIPv4Mapped(host) else { return nil }
        let loopback = ["127.0.0.0/8", "::1/128"].compactMap { IPNetwork($0) }
        return loopback.contains { $0.contains(address) } ? host : nil
    }

    /// Why `uri` cannot be a client's JWKS URL, or nil: the syntax, then (https) every address its
    /// host resolves to. `operatorRule` decides whether an http loopback URL is allowed here.
    public static func uriRefusal(_ uri: String, operatorRule: WebhookURLGuard) async -> WebhookURLGuard.Refusal? {
        if loopbackAddress(uri) != nil {
            guard let refusal = await operatorRule.check(uri) else { return nil }
            return WebhookURLGuard.Refusal(
                code: refusal.code == "forbidden_address" ? "forbidden_address" : "insecure_url",
                message: "jwksUri may use http only for a loopback address, and only where the operator allows it: \(refusal.message)")
        }
        if URLComponents(string: uri)?.scheme?.lowercased() == "http" {
            return WebhookURLGuard.Refusal(code: "insecure_url", message: "jwksUri must use https (http only for a loopback IP address)")
        }
        return await publicOnly.check(uri)
    }

    struct FetchFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The signing keys published at `uri` (the acceptable ones: a key of another kind, or one for
    /// encryption, is skipped).
    static func fetch(_ uri: String) async throws -> [[String: JSONValue]] {
        let route: WebhookURLGuard.Route
        if let address = loopbackAddress(uri) {
            route = WebhookURLGuard.Route(pinnedHost: nil, address: address)
        } else {
            switch await publicOnly.route(uri) {
            case .success(let checked): route = checked
            case .failure(let refusal): throw FetchFailure(description: refusal.message)
            }
        }
        var request = HTTPClientRequest(url: uri)
        request.headers.add(name: "Accept", value: "application/jwk-set+json, application/json")
        let body = try await WebhookConnector.shared.withClient(route, connectTimeout: .seconds(5)) { http in
            let response = try await http.execute(request, timeout: .seconds(10))
            guard response.status == .ok else { throw FetchFailure(description: "HTTP \(response.status.code)") }
            return try await response.body.collect(upTo: maxDocumentBytes)
        }
        guard let document = try? JSONDecoder().decode(JSONValue.self, from: Data(body.readableBytesView)),
              let keys = document.objectValue?["keys"]?.arrayValue
        else { throw FetchFailure(description: "not a JWKS document") }
        return keys.compactMap { $0.objectValue }.filter { problem(key: $0) == nil }.prefix(maxKeys * 2).map { $0 }
    }

    // MARK: signature

    /// The claims of `assertion` when `jwk` verifies its signature made with `alg`; nil when it does not.
    static func verify(_ assertion: String, alg: String, with jwk: [String: JSONValue]) async -> ClientAssertionClaims? {
        var fixed = jwk
        // The header's algorithm, checked against the key (`fits`), is the only one the key may verify.
        fixed["alg"] = .string(alg)
        fixed["kid"] = .string("client-key")
        for member in ["use", "key_ops", "x5c", "x5u", "x5t", "x5t#S256"] { fixed[member] = nil }
        guard let data = try? JSONCoding.encode(JSONValue.object(fixed)), let key = try? JSONDecoder().decode(JWK.self, from: data) else {
            return nil
        }
        let collection = JWTKeyCollection()
        do {
            try await collection.add(jwk: key)
            return try await collection.verify(assertion, as: ClientAssertionClaims.self)
        } catch {
            return nil
        }
    }
}

/// The claims of a client assertion (RFC 7523 §3), read as they come: the checks are made by
/// `OAuthClients` with explicit bounds, never by the decoder.
struct ClientAssertionClaims: JWTPayload {
    var iss: String?
    var sub: String?
    var aud: JSONValue?
    var exp: Double?
    var nbf: Double?
    var iat: Double?
    var jti: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// `aud` as a list (a single string or an array of strings).
    var audiences: [String] {
        switch aud {
        case .string(let one): [one]
        case .array(let many): many.compactMap(\.stringValue)
        default: []
        }
    }
}

/// The keys fetched from client JWKS URLs, shared by every request of this process (each node keeps
/// its own copy; a key the client adds is fetched on first use). An entry is used while it is younger
/// than `maximumAge` and knows the key an assertion names; otherwise the URL is fetched again, at most
/// once per `minimumRefetchInterval` (so junk assertions cannot make the server hammer a client's
/// server). A failed fetch keeps the keys fetched before.
actor ClientKeyCache {
    static let shared = ClientKeyCache()
    static let maximumAge: Duration = .seconds(600)
    static let maximumEntries = 1000

    struct Entry {
        var keys: [[String: JSONValue]]
        var fetchedAt: ContinuousClock.Instant?
        var lastAttempt: ContinuousClock.Instant
    }

    var entries: [String: Entry] = [:]
    var minimumRefetchInterval: Duration = .seconds(30)

    /// For tests: how soon a URL may be fetched again.
    func setMinimumRefetchInterval(_ interval: Duration) { minimumRefetchInterval = interval }

    /// The keys of `uri`, fetched again when the cached ones are old or do not include `kid`.
    func keys(_ uri: String, kid: String?) async throws -> [[String: JSONValue]] {
        let now = ContinuousClock.now
        let cached = entries[uri]
        func knows(_ entry: Entry) -> Bool { kid.map { kid in entry.keys.contains { $0["kid"] == .string(kid) } } ?? true }
        if let cached, let fetched = cached.fetchedAt, now - fetched < Self.maximumAge, knows(cached) { return cached.keys }
        if let cached, now - cached.lastAttempt < minimumRefetchInterval {
            guard cached.fetchedAt != nil else { throw ClientKeys.FetchFailure(description: "the last fetch failed moments ago") }
            return cached.keys
        }
        entries[uri] = Entry(keys: cached?.keys ?? [], fetchedAt: cached?.fetchedAt, lastAttempt: now)
        trim()
        do {
            let keys = try await ClientKeys.fetch(uri)
            entries[uri] = Entry(keys: keys, fetchedAt: .now, lastAttempt: now)
            return keys
        } catch {
            guard let cached, cached.fetchedAt != nil else { throw error }
            return cached.keys
        }
    }

    /// Drops the least recently tried entries beyond `maximumEntries`.
    private func trim() {
        guard entries.count > Self.maximumEntries else { return }
        let oldest = entries.sorted { $0.value.lastAttempt < $1.value.lastAttempt }.prefix(entries.count - Self.maximumEntries)
        for (uri, _) in oldest { entries[uri] = nil }
    }
}
