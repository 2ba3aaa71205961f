import Foundation
import JWTKit

/// A compact JWS from outside the server (an app backend's assertion, an upstream provider's ID
/// token), read before any trust: the header to pick a key with, the claims to check once a key has
/// verified the signature. Nothing in the header is ever fetched (`jku`, `x5u` and an embedded `jwk`
/// are ignored) and a token that declares extensions (`crit`) is refused, as none are understood.
struct SignedJWT: Sendable {
    /// The algorithms an outside JWT may be signed with. `none` and the HMAC algorithms never.
    static let algorithms = ["RS256", "ES256", "PS256", "EdDSA"]
    /// No honest assertion or ID token comes near this.
    static let maxBytes = 16 * 1024

    let token: String
    let algorithm: String
    let kid: String?
    let claims: [String: JSONValue]

    /// Nil unless `token` is a three-part JWS with a JSON-object header and payload, signed with one of
    /// `algorithms`, without `crit`.
    init?(_ token: String) {
        guard token.utf8.count <= Self.maxBytes, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }),
              let header = Base64URL.jwtPart(token, 0), let claims = Base64URL.jwtPart(token, 1),
              let algorithm = header["alg"]?.stringValue, Self.algorithms.contains(algorithm), header["crit"] == nil
        else { return nil }
        if let kid = header["kid"] {
            guard let text = kid.stringValue, !text.isEmpty, text.utf8.count <= 256 else { return nil }
            self.kid = text
        } else {
            self.kid = nil
        }
        self.token = token
        self.algorithm = algorithm
        self.claims = claims
    }

    /// Whether the signature verifies with `key` (a public JWK that `PublicJWK.normalized` accepted),
    /// under this token's algorithm, which must be one the key may be used with.
    func verifies(with key: [String: JSONValue]) async -> Bool {
        guard PublicJWK.algorithms(of: key).contains(algorithm) else { return false }
        let keys = JWTKeyCollection()
        do {
            try await PublicJWK.add(key, algorithm: algorithm, to: keys)
            _ = try await keys.verify(token, as: UncheckedClaims.self)
            return true
        } catch {
            return false
        }
    }

    // MARK: claims

    /// A string claim, or nil when absent or not a string.
    func string(_ name: String) -> String? { claims[name]?.stringValue }

    /// A NumericDate claim (RFC 7519 §2) as whole seconds since 1970: an integer, or a finite number
    /// within ±10^11 s (year 5138) rounded down. Absent → `.absent`; anything else → `.invalid`.
    enum NumericDate: Equatable { case absent, invalid, seconds(Int64) }

    func numericDate(_ name: String) -> NumericDate {
        guard let value = claims[name] else { return .absent }
        switch value {
        case .int(let seconds) where seconds.magnitude <= 100_000_000_000: return .seconds(Int64(seconds))
        case .double(let seconds) where seconds.isFinite && seconds.magnitude <= 1e11: return .seconds(Int64(seconds.rounded(.down)))
        default: return .invalid
        }
    }

    /// The `aud` claim as a list: a string, or an array of strings (anything else: empty).
    var audiences: [String] {
        switch claims["aud"] {
        case .string(let one): [one]
        case .array(let many): many.compactMap(\.stringValue)
        default: []
        }
    }

    /// A text claim fit to be stored and compared: 1…`max` code points, no control characters.
    static func isPlainText(_ text: String, max: Int) -> Bool {
        !text.isEmpty && text.unicodeScalars.count <= max && !text.unicodeScalars.contains { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }
    }
}

/// The payload as JWTKit decodes it while checking a signature: nothing is read (the checks are ours,
/// on the same bytes: `SignedJWT.claims`).
struct UncheckedClaims: JWTPayload {
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
