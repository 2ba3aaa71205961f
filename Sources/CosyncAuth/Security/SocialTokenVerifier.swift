import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore

public enum SocialProvider: String, Sendable, CaseIterable {
    case apple, google
}

/// Where a provider publishes its ID-token keys and which issuers its tokens carry.
public struct SocialProviderSettings: Sendable {
    public var jwksURL: String
    public var issuers: [String]
}

public struct SocialProviders: Sendable {
    public var apple = SocialProviderSettings(jwksURL: "https://appleid.apple.com/auth/keys", issuers: ["https://appleid.apple.com"])
    public var google = SocialProviderSettings(
        jwksURL: "https://www.googleapis.com/oauth2/v3/certs", issuers: ["accounts.google.com", "https://accounts.google.com"])
    /// A token naming a key id the cache does not know makes the verifier fetch the JWKS again, but
    /// not more often than this (so junk tokens cannot make the server hammer the provider).
    public var minimumRefetchInterval: Duration = .seconds(30)
    public init() {}

    func settings(_ provider: SocialProvider) -> SocialProviderSettings {
        switch provider {
        case .apple: apple
        case .google: google
        }
    }
}

/// What a verified provider token says about the user.
public struct SocialIdentity: Sendable, Equatable {
    public let subject: String
    public let email: String?
    /// The token's `iat`, when it has one (freshness of a re-authentication).
    public var issuedAt: Date? = nil
}

/// The claims of an Apple identity token or a Google ID token that the checks need.
struct ProviderClaims: JWTPayload {
    var iss: IssuerClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim?
    var iat: IssuedAtClaim?
    var sub: SubjectClaim
    var email: String?
    /// Google sends a JSON boolean, Apple a string ("true"/"false").
    var email_verified: FlexibleBool?

    /// Allows five minutes of clock skew either way.
    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired(currentDate: Date().addingTimeInterval(-300))
        try nbf?.verifyNotBefore(currentDate: Date().addingTimeInterval(300))
    }
}

/// A boolean claim that may come as `true` or `"true"`.
struct FlexibleBool: Codable, Sendable {
    let value: Bool
    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { value = b } else { value = (try c.decode(String.self)).lowercased() == "true" }
    }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(value)
    }
}

/// Verifies Apple and Google ID tokens (<doc:EndUserAPI> §6.8): RS256 only, signature against the
/// provider's JWKS (fetched with AsyncHTTPClient, cached, fetched again when a token names an
/// unknown `kid`), then `iss`, `aud` and `exp` (and for Google, `iat` present).
public actor SocialTokenVerifier {
    struct Cache {
        var keys: JWTKeyCollection
        var kids: Set<String>
        var fetchedAt: ContinuousClock.Instant
    }

    let http: HTTPClient
    let providers: SocialProviders
    let logger: Logger
    var caches: [SocialProvider: Cache] = [:]
    var lastAttempt: [SocialProvider: ContinuousClock.Instant] = [:]

    public init(http: HTTPClient = .shared, providers: SocialProviders, logger: Logger) {
        self.http = http
        self.providers = providers
        self.logger = logger
    }

    /// The identity in `token` when it is a valid token of `provider` for one of `audiences`;
    /// nil otherwise (the reason is logged at debug level, never the token).
    public func verify(_ token: String, provider: SocialProvider, audiences: [String]) async -> SocialIdentity? {
        let audiences = audiences.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !audiences.isEmpty else { return nil }
        guard let header = Base64URL.jwtPart(token, 0), header["alg"]?.stringValue == "RS256", let kid = header["kid"]?.stringValue else {
            logger.debug("social token refused: not an RS256 JWT with a kid", metadata: ["provider": "\(provider.rawValue)"])
            return nil
        }
        do {
            let keys = try await keys(for: provider, kid: kid)
            let claims = try await keys.verify(token, as: ProviderClaims.self)
            let settings = providers.settings(provider)
            guard settings.issuers.contains(claims.iss.value) else { throw Refusal.issuer }
            guard claims.aud.value.contains(where: { audiences.contains($0) }) else { throw Refusal.audience }
            if provider == .google && claims.iat == nil { throw Refusal.issuedAt }
            guard !claims.sub.value.isEmpty else { throw Refusal.subject }
            // Only an address the provider says it verified can name an account: a token without
            // `email_verified` is unverified.
            let verified = claims.email_verified?.value ?? false
            let email = verified ? claims.email.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.flatMap { $0.isEmpty ? nil : $0 } : nil
            return SocialIdentity(subject: claims.sub.value, email: email, issuedAt: claims.iat?.value)
        } catch {
            logger.debug("social token refused", metadata: ["provider": "\(provider.rawValue)", "reason": "\(error)"])
            return nil
        }
    }

    enum Refusal: Error { case issuer, audience, issuedAt, subject, unknownKey, fetch(String) }

    /// The provider's keys: the cached set while it knows `kid` and is younger than `maximumCacheAge`;
    /// otherwise fetched again, at most once per `minimumRefetchInterval` (attempts count, failed
    /// ones too, and are recorded before the fetch so concurrent tokens share one). A failed fetch
    /// keeps the old set.
    func keys(for provider: SocialProvider, kid: String) async throws -> JWTKeyCollection {
        let cached = caches[provider]
        if let cached, cached.kids.contains(kid), ContinuousClock.now - cached.fetchedAt < Self.maximumCacheAge {
            return cached.keys
        }
        if let last = lastAttempt[provider], ContinuousClock.now - last < providers.minimumRefetchInterval {
            guard let cached, cached.kids.contains(kid) else { throw Refusal.unknownKey }
            return cached.keys
        }
        lastAttempt[provider] = .now
        do {
            let jwks = try await fetch(providers.settings(provider).jwksURL)
            let keys = JWTKeyCollection()
            var kids = Set<String>()
            for jwk in jwks.keys {
                guard let id = jwk.keyIdentifier?.string else { continue }
                // A key this server cannot use (another type) is skipped, not fatal.
                if (try? await keys.add(jwk: jwk)) != nil { kids.insert(id) }
            }
            caches[provider] = Cache(keys: keys, kids: kids, fetchedAt: .now)
            guard kids.contains(kid) else { throw Refusal.unknownKey }
            return keys
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            logger.warning("could not fetch the provider's JWKS", metadata: ["provider": "\(provider.rawValue)", "error": "\(type(of: error))"])
            guard let cached, cached.kids.contains(kid) else { throw Refusal.fetch("\(type(of: error))") }
            return cached.keys
        }
    }

    /// Keys are fetched again after a day even when every token names a known `kid`, so a key the
    /// provider withdrew stops being trusted.
    static let maximumCacheAge: Duration = .seconds(24 * 3600)

    func fetch(_ url: String) async throws -> JWKS {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await http.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw Refusal.fetch("HTTP \(response.status.code)") }
        return try JSONDecoder().decode(JWKS.self, from: Data(body.readableBytesView))
    }
}
