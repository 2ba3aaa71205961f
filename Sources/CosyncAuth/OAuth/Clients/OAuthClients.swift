import Foundation
import Logging
import PostgresNIO

/// The registered clients of an app: lookup for the endpoints, and client authentication at the
/// token, revocation and introspection endpoints (RFC 6749 §2.3, RFC 7523 §2.2; <doc:OAuth> §2).
public struct OAuthClients: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// The client `clientId` of `app`, if registered.
    public func find(app: App, clientId: String) async throws -> OAuthClient? {
        guard !clientId.isEmpty, clientId.utf8.count <= 128 else { return nil }
        return try await client.withConnection { try await OAuthClientStore.find($0, appRef: app.ref, clientId: clientId, logger: logger) }
    }

    /// What a request to the token endpoint presented to authenticate its client.
    public struct Presented: Sendable {
        /// From `Authorization: Basic` (both parts form-URL-decoded, RFC 6749 §2.3.1).
        public var basic: (id: String, secret: String)?
        /// `client_id` and `client_secret` form fields.
        public var clientId: String?
        public var clientSecret: String?
        /// `client_assertion_type` and `client_assertion` (private_key_jwt, RFC 7523 §2.2).
        public var assertionType: String?
        public var assertion: String?

        public init(
            basic: (id: String, secret: String)? = nil, clientId: String? = nil, clientSecret: String? = nil, assertionType: String? = nil,
            assertion: String? = nil
        ) {
            self.basic = basic
            self.clientId = clientId
            self.clientSecret = clientSecret
            self.assertionType = assertionType
            self.assertion = assertion
        }
    }

    /// The only client assertion type there is for private_key_jwt (RFC 7523 §2.2).
    public static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// A client assertion may expire at most this far ahead (so its `jti` is kept that long at most).
    public static let maxAssertionLifetime: TimeInterval = 300
    /// Clock skew allowed on `exp`, `nbf` and `iat`.
    public static let clockSkew: TimeInterval = 30
    static let maxAssertionBytes = 16_384

    /// The client a token-endpoint request authenticates as, by the method the client registered
    /// (a client may not pick another one, weaker or not). Public clients name themselves by
    /// `client_id` and present no credential.
    ///
    /// `audience` lists what a client assertion may be addressed to: the URL of the endpoint it was
    /// sent to and the issuer (`aud` must hold one of them). `clientAddress` (the caller's address, when
    /// known) makes the failure limit count per address as well as per client.
    ///
    /// Every check of a confidential client's credential is reserved in PostgreSQL first (see
    /// `ClientAuthThrottle`): while the client is locked, the answer is 429 without any check.
    public func authenticate(app: App, _ presented: Presented, audience: [String], clientAddress: String? = nil) async throws(OAuthError)
        -> OAuthClient
    {
        let methods = [presented.basic != nil, presented.clientSecret != nil, presented.assertion != nil].filter { $0 }.count
        guard methods <= 1 else { throw .invalidRequest("use one client authentication method") }
        if (presented.assertionType != nil) != (presented.assertion != nil) {
            throw .invalidRequest("client_assertion and client_assertion_type go together")
        }
        if let type = presented.assertionType, type != Self.assertionType {
            throw .invalidClient("client_assertion_type must be \(Self.assertionType)")
        }
        if let assertion = presented.assertion, assertion.utf8.count > Self.maxAssertionBytes {
            throw .invalidClient("the client assertion is too large")
        }
        // With an assertion, client_id may be left out: the assertion's `sub` names the client (read
        // unverified here; the checks below hold it to the client found).
        let asserted = presented.assertion.flatMap { Base64URL.jwtPart($0, 1)?["sub"]?.stringValue }
        guard let clientId = presented.basic?.id ?? presented.clientId ?? asserted, !clientId.isEmpty else {
            throw .invalidClient("no client authentication")
        }
        if let formId = presented.clientId, let basicId = presented.basic?.id, formId != basicId {
            throw .invalidRequest("client_id does not match the authenticated client")
        }
        let found: OAuthClient?
        do { found = try await find(app: app, clientId: clientId) } catch { throw .serverError() }
        guard let registered = found else { throw .invalidClient("unknown client") }

        switch registered.authMethod {
        case .none:
            guard methods == 0 else { throw .invalidClient("this client is public: it has no secret and presents none") }
            return registered
        case .clientSecretBasic:
            guard presented.basic != nil else { throw .invalidClient("this client authenticates with client_secret_basic (HTTP Basic)") }
        case .clientSecretPost:
            guard presented.clientSecret != nil else { throw .invalidClient("this client authenticates with client_secret_post") }
        case .privateKeyJWT:
            guard presented.assertion != nil else { throw .invalidClient("this client authenticates with private_key_jwt (client_assertion)") }
        }

        let throttle = ClientAuthThrottle(client: client, logger: logger, clientRef: registered.ref, appRef: app.ref, address: clientAddress)
        let reserved: Bool
        do { reserved = try await throttle.reserve() } catch { throw .serverError() }
        guard reserved else { throw .slowDown(retryAfter: ClientAuthThrottle.firstLockSeconds) }
        do throws(OAuthError) {
            switch registered.authMethod {
            case .clientSecretBasic, .clientSecretPost:
                let secret = registered.authMethod == .clientSecretBasic ? presented.basic?.secret : presented.clientSecret
                guard let secret, let stored = registered.secretHash, secret.utf8.count <= 512,
                      Secrets.constantTimeEquals(Secrets.sha256(secret), stored)
                else { throw OAuthError.invalidClient("client authentication failed") }
            case .privateKeyJWT:
                try await checkAssertion(presented.assertion ?? "", of: registered, audience: audience)
            case .none:
                break
            }
        } catch {
            // A refusal stays counted; a check that reached no verdict (a database error) gives its
            // reservation back.
            if error.status >= 500 { try? await throttle.giveBack() }
            throw error
        }
        try? await throttle.succeeded()
        return registered
    }

    /// The checks of a client assertion (RFC 7523 §3, OpenID Connect Core §9): a JWT signed with one
    /// of the client's keys by an algorithm of `ClientKeys.algorithms`, `iss` and `sub` the client,
    /// `aud` one of `audience`, `exp` in the future and at most 5 minutes ahead, `nbf` and `iat` not in
    /// the future, and a `jti` used once (recorded in PostgreSQL until `exp`).
    func checkAssertion(_ assertion: String, of registered: OAuthClient, audience: [String]) async throws(OAuthError) {
        func refuse(_ why: String) -> OAuthError { .invalidClient("client assertion refused: \(why)") }
        guard let header = Base64URL.jwtPart(assertion, 0) else { throw refuse("not a signed JWT") }
        guard let alg = header["alg"]?.stringValue, ClientKeys.algorithms.contains(alg) else {
            throw refuse("alg must be one of \(ClientKeys.algorithms.joined(separator: ", "))")
        }
        guard header["crit"] == nil else { throw refuse("no critical header extension is understood") }
        let kid = header["kid"]?.stringValue

        // The keys: the registered JWKS, or the one at the client's JWKS URL.
        var keys: [[String: JSONValue]]
        if let uri = registered.jwksURI {
            do { keys = try await ClientKeyCache.shared.keys(uri, kid: kid) } catch {
                logger.warning("could not fetch a client's JWKS", metadata: ["client_id": "\(registered.clientId)", "reason": "\(error)"])
                throw refuse("the client's keys could not be fetched from its jwks_uri")
            }
        } else {
            keys = (registered.jwks?.objectValue?["keys"]?.arrayValue ?? []).compactMap(\.objectValue)
        }
        keys = keys.filter { ClientKeys.fits($0, alg: alg) }
        if let kid { keys = keys.filter { $0["kid"] == nil || $0["kid"] == .string(kid) } }
        guard !keys.isEmpty else { throw refuse("no key of the client fits the assertion's alg and kid") }
        var verified: ClientAssertionClaims?
        for key in keys.prefix(ClientKeys.maxKeys) {
            if let claims = await ClientKeys.verify(assertion, alg: alg, with: key) {
                verified = claims
                break
            }
        }
        guard let claims = verified else { throw refuse("the signature does not verify with the client's keys") }

        guard claims.iss == registered.clientId, claims.sub == registered.clientId else { throw refuse("iss and sub must both be the client_id") }
        guard claims.audiences.contains(where: { audience.contains($0) }) else {
            throw refuse("aud must name this server's token endpoint or its issuer")
        }
        let now = Date().timeIntervalSince1970
        guard let exp = claims.exp, exp.isFinite else { throw refuse("exp is required") }
        guard exp > now - Self.clockSkew else { throw refuse("the assertion has expired") }
        guard exp <= now + Self.maxAssertionLifetime + Self.clockSkew else {
            throw refuse("exp must be at most \(Int(Self.maxAssertionLifetime)) seconds ahead")
        }
        if let nbf = claims.nbf { guard nbf.isFinite, nbf <= now + Self.clockSkew else { throw refuse("the assertion is not valid yet (nbf)") } }
        if let iat = claims.iat { guard iat.isFinite, iat <= now + Self.clockSkew else { throw refuse("iat is in the future") } }
        guard let jti = claims.jti, (1...256).contains(jti.unicodeScalars.count), !jti.unicodeScalars.contains(where: { $0.value == 0 }) else {
            throw refuse("jti is required (1 to 256 characters)")
        }
        // Kept at least until the assertion can no longer pass the exp check above.
        let keepUntil = Date(timeIntervalSince1970: max(exp, now) + Self.clockSkew)
        let fresh: Bool
        do {
            fresh = try await client.withConnection {
                try await OAuthClientAssertionStore.record($0, clientRef: registered.ref, jti: jti, expiresAt: keepUntil, logger: logger)
            }
        } catch {
            throw .serverError()
        }
        guard fresh else { throw refuse("this assertion (its jti) was used before") }
    }
}

/// The limit on failed client authentication: each check of a confidential client's credential is
/// reserved first in PostgreSQL (`login_throttle`, through ThrottleStore, as password attempts are),
/// under `oauth-client:<client>|<address>`: `perAddress` attempts per client and caller address.
///
/// There is no lock of the client as a whole: its credential is a 256-bit secret or a private key,
/// which no number of guesses from any number of addresses finds, while a client-wide lock would let
/// one stranger who knows the (public) client id lock the real client out. Only a caller whose address
/// is unknown (no request behind it) counts under `oauth-client:<client>`, with `perClient`.
///
/// The reservation that reaches a threshold locks that subject for 30 s, doubling with each further
/// attempt, at most 15 minutes; counts start again after 15 minutes without an attempt. A success
/// forgets the (client, address) count and gives its reservation back to the client's.
struct ClientAuthThrottle {
    let client: PostgresClient
    let logger: Logger
    let clientRef: UUID
    let appRef: Int64
    let address: String?

    static let perAddress = 20
    static let perClient = 200
    static let windowSeconds = 900
    static let maxLockSeconds = 900
    static let firstLockSeconds = 30

    struct Locked: Error {}

    var subjects: [(String, Int)] {
        let client = "oauth-client:\(clientRef.uuidString.lowercased())"
        guard let address else { return [(client, Self.perClient)] }
        return [("\(client)|\(IPNetwork.Address.limitKey(address))", Self.perAddress)]
    }

    /// True when the check may go ahead (and is now counted); false while a subject is locked.
    func reserve() async throws -> Bool {
        do {
            try await client.transaction(logger: logger) { db in
                for (subject, threshold) in subjects {
                    guard try await ThrottleStore.reserve(
                        db, appRef: appRef, subject: subject, threshold: threshold, windowSeconds: Self.windowSeconds,
                        maxLockSeconds: Self.maxLockSeconds, logger: logger)
                    else { throw Locked() }
                }
            }
            return true
        } catch is Locked {
            return false
        }
    }

    /// After a success: the (client, address) count is forgotten, the client's count given back.
    func succeeded() async throws {
        try await client.withConnection { db in
            for (subject, threshold) in subjects {
                if subject.contains("|") {
                    try await ThrottleStore.clear(db, appRef: appRef, subject: subject, logger: logger)
                } else {
                    try await ThrottleStore.release(db, appRef: appRef, subject: subject, threshold: threshold, logger: logger)
                }
            }
        }
    }

    /// Takes back a reservation whose check reached no verdict.
    func giveBack() async throws {
        try await client.withConnection { db in
            for (subject, threshold) in subjects {
                try await ThrottleStore.release(db, appRef: appRef, subject: subject, threshold: threshold, logger: logger)
            }
        }
    }
}
