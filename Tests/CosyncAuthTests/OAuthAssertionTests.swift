import CosyncAuth
import Foundation
import Hummingbird
import JWTKit
import NIOCore
import PostgresNIO
import Testing
import _CryptoExtras

/// A JWT payload of arbitrary claims, as the tests mint them (numbers, strings, wrong types alike).
struct AnyClaims: JWTPayload {
    var claims: [String: JSONValue]
    init(_ claims: [String: JSONValue]) { self.claims = claims }
    init(from decoder: any Decoder) throws { claims = try [String: JSONValue](from: decoder) }
    func encode(to encoder: any Encoder) throws { try claims.encode(to: encoder) }
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Signing keys of the four algorithms an app backend may use, with their public halves as JWK and PEM.
struct BackendKey: Sendable {
    enum Kind: Sendable { case rs256, ps256, es256, eddsa }
    let kind: Kind
    let kid: String
    let keys: JWTKeyCollection
    let publicJWK: [String: JSONValue]
    let publicPEM: String

    static func make(_ kind: Kind, kid: String = "kid-" + Secrets.hexIdentifier().prefix(10)) async throws -> BackendKey {
        let keys = JWTKeyCollection()
        let id = JWKIdentifier(string: kid)
        switch kind {
        case .rs256, .ps256:
            let key = try Insecure.RSA.PrivateKey(pem: try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation)
            let numbers = try key.publicKey.getKeyPrimitives()
            if kind == .rs256 {
                await keys.add(rsa: key, digestAlgorithm: .sha256, kid: id)
            } else {
                await keys.add(pss: key, digestAlgorithm: .sha256, kid: id)
            }
            return BackendKey(
                kind: kind, kid: kid, keys: keys,
                publicJWK: ["kty": .string("RSA"), "n": .string(Base64URL.encode(numbers.modulus)), "e": .string(Base64URL.encode(numbers.publicExponent))],
                publicPEM: key.publicKey.pemRepresentation)
        case .es256:
            let key = ES256PrivateKey()
            let point = try #require(key.publicKey.parameters)
            await keys.add(ecdsa: key, kid: id)
            return BackendKey(
                kind: kind, kid: kid, keys: keys,
                publicJWK: ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(point.x), "y": .string(point.y)],
                publicPEM: key.publicKey.pemRepresentation)
        case .eddsa:
            let key = try EdDSA.PrivateKey()
            await keys.add(eddsa: key, kid: id)
            return BackendKey(
                kind: kind, kid: kid, keys: keys,
                publicJWK: ["kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string(Base64URL.encode(key.publicKey.rawRepresentation))],
                publicPEM: key.publicKey.pemRepresentation)
        }
    }

    /// Signs `claims`; `kid` false leaves the header without a key id.
    func sign(_ claims: [String: JSONValue], kid withKid: Bool = true) async throws -> String {
        try await keys.sign(AnyClaims(claims), kid: withKid ? JWKIdentifier(string: kid) : nil)
    }
}

@Suite("OAuth: the app backend's JWT-bearer assertions (RFC 7523, Webcom's Custom sign-in)")
struct OAuthAssertionTests {
    static let issuer = "https://backend.example.com"

    struct Fixture {
        let api: API
        let appId: String
        let app: App
        let client: OAuthClient
        var oauth: OAuthServices
        var audience: String { oauth.issuer(appId: appId) }
    }

    /// A new app, and a confidential client of it allowed `grants` (written as the admin API would).
    static func fixture(_ api: API, grants: [OAuthGrantType] = [.jwtBearer, .refreshToken]) async throws -> Fixture {
        let created = try await api.createApp("Assertions \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))")
        let services = try await TestEnvironment.services()
        let appId = created.string("appId")
        let app = try #require(try await services.apps.cachedApp(appId: appId))
        let client = try await makeClient(app: app, grants: grants)
        return Fixture(api: api, appId: appId, app: app, client: client, oauth: services.oauth)
    }

    /// The client secret of every client `makeClient` registers.
    static let clientSecret = "backend-secret-" + Secrets.hexIdentifier()

    static func makeClient(app: App, grants: [OAuthGrantType]) async throws -> OAuthClient {
        let clientId = "backend-" + Secrets.hexIdentifier().prefix(12)
        try await TestEnvironment.sql(
            """
            INSERT INTO oauth_clients (app_ref, client_id, name, kind, auth_method, secret_hash, grant_types, scopes, access_token_seconds,
                refresh_sliding_seconds, refresh_absolute_seconds, refresh_grace_seconds, dpop_required)
            VALUES (\(app.ref), \(clientId), 'Backend', 'confidential', 'client_secret_basic', \(Secrets.sha256(clientSecret)),
                \(grants.map(\.rawValue)), \(["openid", "profile", "email"]), 600, 86400, 2592000, 10, false)
            """)
        let services = try await TestEnvironment.services()
        return try #require(try await services.oauth.clients.find(app: app, clientId: clientId))
    }

    /// Registers a key through the admin API; the reply.
    static func register(_ f: Fixture, _ body: [String: JSONValue]) async throws -> API.Reply {
        try await f.api.call(.post, "/admin/v1/apps/\(f.appId)/oauth/assertion-keys", json: .object(body))
    }

    /// Claims of a valid assertion for user `sub`, with `changes` applied (`.null` removes a claim).
    static func claims(_ f: Fixture, sub: String, _ changes: [String: JSONValue] = [:]) -> [String: JSONValue] {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "aud": .string(f.audience), "sub": .string(sub), "exp": .int(now + 120), "iat": .int(now),
            "jti": .string(UUID().uuidString),
        ]
        for (name, value) in changes { claims[name] = value == .null ? nil : value }
        return claims
    }

    static func signIn(_ f: Fixture, _ assertion: String, client: OAuthClient? = nil) async throws(OAuthError)
        -> (user: User, sessionId: UUID, authTime: Date, amr: [String])
    {
        try await f.oauth.assertionGrant.signIn(
            app: f.app, client: client ?? f.client, assertion: assertion, origin: ClientOrigin(address: "198.51.100.7", userAgent: "backend"))
    }

    static func refusal(_ f: Fixture, _ assertion: String, client: OAuthClient? = nil) async -> OAuthError? {
        do {
            _ = try await signIn(f, assertion, client: client)
            return nil
        } catch {
            return error
        }
    }

    @Test("each algorithm (RS256, PS256, ES256, EdDSA; JWK and PEM) signs a user in: one custom identity, one session per sign-in")
    func successPaths() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let rs = try await BackendKey.make(.rs256), ps = try await BackendKey.make(.ps256)
            let es = try await BackendKey.make(.es256), ed = try await BackendKey.make(.eddsa)
            var jwk = rs.publicJWK
            jwk["kid"] = .string(rs.kid)
            jwk["alg"] = .string("RS256")
            let first = try await Self.register(f, ["issuer": .string(Self.issuer), "jwk": .object(jwk)])
            #expect(first.status == .created, "\(first.text)")
            #expect(first.object["kid"] == .string(rs.kid) && first.object["issuer"] == .string(Self.issuer))
            for (key, body) in [
                (ps, ["issuer": .string(Self.issuer), "pem": .string(ps.publicPEM), "kid": .string(ps.kid)]),
                (es, ["issuer": .string(Self.issuer), "pem": .string(es.publicPEM), "kid": .string(es.kid)]),
                (ed, ["issuer": .string(Self.issuer), "jwk": .object(ed.publicJWK)]),
            ] as [(BackendKey, [String: JSONValue])] {
                let reply = try await Self.register(f, body)
                #expect(reply.status == .created, "\(key.kind): \(reply.text)")
            }
            let listed = try await api.call(.get, "/admin/v1/apps/\(f.appId)/oauth/assertion-keys")
            #expect(listed.status == .ok && listed.object["keys"]?.arrayValue?.count == 4, "\(listed.text)")

            let sub = "user-" + Secrets.hexIdentifier().prefix(8)
            let email = "custom-\(Secrets.hexIdentifier().prefix(8))@example.com"
            var userId: UUID?
            var sessions: Set<UUID> = []
            for (index, key) in [rs, ps, es, ed].enumerated() {
                // The Ed25519 key was registered without a kid: it checks assertions that name none too.
                let assertion = try await key.sign(Self.claims(f, sub: sub, ["email": .string(email)]), kid: key.kind != .eddsa || index % 2 == 0)
                let result = try await Self.signIn(f, assertion)
                if let userId { #expect(result.user.id == userId, "\(key.kind) signed in another account") }
                userId = result.user.id
                #expect(result.user.handle == email)
                #expect(abs(result.authTime.timeIntervalSinceNow) < 30)
                sessions.insert(result.sessionId)
            }
            #expect(sessions.count == 4)
            let id = try #require(userId)
            let kinds = try await TestEnvironment.value(
                "SELECT string_agg(kind || ':' || subject, ',') FROM identities WHERE user_id = \(id)", as: String.self)
            #expect(kinds == "custom:\(sub)")
            let methods = try await TestEnvironment.value(
                "SELECT string_agg(DISTINCT method || '/' || proven_by, ',') FROM sessions WHERE user_id = \(id)", as: String.self)
            #expect(methods == "custom/custom")
            // The user sees its sessions through the admin API like any other.
            let listedSessions = try await api.call(.get, "/admin/v1/apps/\(f.appId)/users/\(id.uuidString.lowercased())/sessions")
            #expect(listedSessions.object["sessions"]?.arrayValue?.count == 4)
        }
    }

    @Test("a backend's JWK set URL: its keys check assertions by kid; a key it no longer lists does not")
    func jwksURL() async throws {
        let key = try await BackendKey.make(.es256)
        var published = key.publicJWK
        published["kid"] = .string(key.kid)
        published["use"] = .string("sig")
        let set = String(decoding: try JSONCoding.encode(JSONValue.object(["keys": .array([.object(published)])])), as: UTF8.self)
        let router = Router()
        router.get("jwks") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: set)))
        }
        let port = try await startFakeServer(router, label: "backend-jwks")
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let refused = try await Self.register(f, ["issuer": .string(Self.issuer), "jwksUri": .string("http://backend.example.com/jwks")])
            #expect(refused.status == .unprocessableContent && refused.errorField == "jwksUri", "\(refused.text)")
            let missing = try await Self.register(f, ["issuer": .string(Self.issuer), "jwksUri": .string("http://127.0.0.1:\(port)/nothing")])
            #expect(missing.status == .unprocessableContent && missing.errorCode == "unusable_key_set", "\(missing.text)")
            let ok = try await Self.register(f, ["issuer": .string(Self.issuer), "jwksUri": .string("http://127.0.0.1:\(port)/jwks")])
            #expect(ok.status == .created, "\(ok.text)")
            let sub = "jwks-" + Secrets.hexIdentifier().prefix(8)
            let result = try await Self.signIn(f, try await key.sign(Self.claims(f, sub: sub)))
            #expect(result.user.handle.hasPrefix("custom_"))
            let other = try await BackendKey.make(.es256, kid: "not-in-the-set")
            #expect(await Self.refusal(f, try await other.sign(Self.claims(f, sub: sub)))?.code == "invalid_grant")
        }
    }

    @Test("refusals: bad signature, unknown key, wrong iss, wrong aud, expired, exp too far, bad numbers, replayed jti, missing sub or jti")
    func refusals() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let key = try await BackendKey.make(.rs256)
            var jwk = key.publicJWK
            jwk["kid"] = .string(key.kid)
            #expect(try await Self.register(f, ["issuer": .string(Self.issuer), "jwk": .object(jwk)]).status == .created)
            let sub = "refused-" + Secrets.hexIdentifier().prefix(8)
            let now = Int(Date().timeIntervalSince1970)
            func refused(_ assertion: String, _ why: String, expected: String = "invalid_grant") async {
                let error = await Self.refusal(f, assertion)
                #expect(error?.code == expected, "\(why): \(String(describing: error))")
            }
            // Another key that claims the registered kid (a forgery), and one whose kid nobody registered.
            let forger = try await BackendKey.make(.rs256, kid: key.kid)
            await refused(try await forger.sign(Self.claims(f, sub: sub)), "bad signature")
            let stranger = try await BackendKey.make(.rs256)
            await refused(try await stranger.sign(Self.claims(f, sub: sub)), "unknown key")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["iss": .string("https://other.example.com")])), "wrong iss")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["iss": .null])), "no iss")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["aud": .string("https://elsewhere.example.com")])), "wrong aud")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["aud": .null])), "no aud")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .int(now - 120)])), "expired")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .int(now + 3600)])), "exp an hour ahead")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .null])), "no exp")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .string("\(now + 60)")])), "exp a string")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .double(1e300)])), "exp huge")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .double(-1e300)])), "exp hugely negative")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["exp": .int(Int.max)])), "exp Int.max")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["iat": .int(now + 600)])), "iat in the future")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["iat": .int(now - 3600)])), "iat an hour old")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["iat": .bool(true)])), "iat a boolean")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["nbf": .int(now + 600)])), "not yet valid")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["sub": .null])), "no sub")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["sub": .string("")])), "empty sub")
            await refused(try await key.sign(Self.claims(f, sub: sub, ["jti": .null])), "no jti")
            await refused("not.a.jwt", "not a JWT")
            // An unsigned token (alg none) with the registered kid.
            let header = Base64URL.encode(Array(#"{"alg":"none","kid":"\#(key.kid)"}"#.utf8))
            let payload = Base64URL.encode(try JSONCoding.encode(JSONValue.object(Self.claims(f, sub: sub))))
            await refused("\(header).\(payload).", "alg none")

            // A valid assertion works once; the same one again is a replay, on any node.
            let assertion = try await key.sign(Self.claims(f, sub: sub))
            _ = try await Self.signIn(f, assertion)
            await refused(assertion, "replayed jti")
            // A client not registered for the grant.
            let other = try await Self.makeClient(app: f.app, grants: [.authorizationCode])
            let fresh = try await key.sign(Self.claims(f, sub: sub))
            #expect(await Self.refusal(f, fresh, client: other)?.code == "unauthorized_client")
            // The token endpoint's URL is an accepted audience too.
            _ = try await Self.signIn(f, try await key.sign(Self.claims(f, sub: sub, ["aud": .array([
                .string("https://elsewhere.example.com"), .string(f.oauth.endpoint(appId: f.appId, "/oauth/token")),
            ])])))
            // Nothing refused above made an account or a session beyond the two accepted ones.
            let sessions = try await TestEnvironment.value(
                "SELECT count(*)::int FROM sessions s JOIN identities i ON i.user_id = s.user_id WHERE i.kind = 'custom' AND i.subject = \(sub) AND i.app_ref = \(f.app.ref)",
                as: Int.self)
            #expect(sessions == 2)
        }
    }

    @Test("accounts: an e-mail another account holds is refused, never joined; a suspended account signs in no more")
    func accountRules() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let key = try await BackendKey.make(.eddsa)
            #expect(try await Self.register(f, ["issuer": .string(Self.issuer), "jwk": .object(key.publicJWK)]).status == .created)
            let handle = "owner-\(Secrets.hexIdentifier().prefix(8))@example.com"
            let made = try await api.call(.post, "/admin/v1/apps/\(f.appId)/users", json: .object([
                "handle": .string(handle), "password": .string("Secret-password-1"),
            ]))
            #expect(made.status == .created, "\(made.text)")
            let taken = await Self.refusal(f, try await key.sign(Self.claims(f, sub: "someone", ["email": .string(handle.uppercased())])))
            #expect(taken?.code == "access_denied", "\(String(describing: taken))")
            let identities = try await TestEnvironment.value(
                "SELECT count(*)::int FROM identities WHERE app_ref = \(f.app.ref) AND kind = 'custom'", as: Int.self)
            #expect(identities == 0)

            let result = try await Self.signIn(f, try await key.sign(Self.claims(f, sub: "plain")))
            let userPath = "/admin/v1/apps/\(f.appId)/users/\(result.user.id.uuidString.lowercased())"
            #expect(try await api.call(.patch, userPath, json: .object(["status": .string("suspended")])).status == .ok)
            let suspended = await Self.refusal(f, try await key.sign(Self.claims(f, sub: "plain")))
            #expect(suspended?.code == "invalid_grant")
            // The admin API lists the identity with its new kind.
            let identity = try await api.call(.get, "\(userPath)/identities")
            #expect(identity.object["identities"]?.arrayValue?.first?["kind"] == .string("custom"), "\(identity.text)")
        }
    }

    @Test("admin API: private keys, weak or unknown keys, bad issuers and fields are refused; delete removes a key")
    func adminRules() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let key = try await BackendKey.make(.rs256)
            func refused(_ body: [String: JSONValue], field: String, _ why: String) async throws {
                let reply = try await Self.register(f, body)
                #expect(reply.status == .unprocessableContent && reply.errorField == field, "\(why): \(reply.status) \(reply.text)")
            }
            let issuer = JSONValue.string(Self.issuer)
            var secret = key.publicJWK
            secret["d"] = .string("AQAB")
            try await refused(["issuer": issuer, "jwk": .object(secret)], field: "jwk", "a private JWK")
            try await refused(["issuer": issuer, "jwk": .object(["kty": .string("oct"), "k": .string("c2VjcmV0")])], field: "jwk", "a symmetric key")
            try await refused(["issuer": issuer, "jwk": .object(["kty": .string("RSA"), "n": .string("AQAB"), "e": .string("AQAB")])],
                              field: "jwk", "a tiny RSA key")
            var wrongAlg = key.publicJWK
            wrongAlg["alg"] = .string("HS256")
            try await refused(["issuer": issuer, "jwk": .object(wrongAlg)], field: "jwk", "an HMAC alg")
            let privatePEM = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
            try await refused(["issuer": issuer, "pem": .string(privatePEM)], field: "pem", "a private PEM")
            try await refused(["issuer": issuer, "pem": .string("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")], field: "pem", "junk")
            try await refused(["jwk": .object(key.publicJWK)], field: "issuer", "no issuer")
            try await refused(["issuer": .string("a\u{1}b"), "jwk": .object(key.publicJWK)], field: "issuer", "a control character")
            try await refused(["issuer": issuer, "jwk": .object(key.publicJWK), "pem": .string(key.publicPEM)], field: "pem", "two sources")
            try await refused(["issuer": issuer], field: "jwk", "no key")
            try await refused(["issuer": issuer, "jwk": .object(key.publicJWK), "color": .string("red")], field: "color", "an unknown field")
            try await refused(["issuer": issuer, "jwksUri": .string("ftp://127.0.0.1/keys")], field: "jwksUri", "not https")

            let created = try await Self.register(f, ["issuer": issuer, "pem": .string(key.publicPEM), "kid": .string(key.kid)])
            #expect(created.status == .created && created.object["jwk"]?["kty"] == .string("RSA"), "\(created.text)")
            let keyId = created.object.string("keyId")
            _ = try await Self.signIn(f, try await key.sign(Self.claims(f, sub: "before-delete")))
            let deleted = try await api.call(.delete, "/admin/v1/apps/\(f.appId)/oauth/assertion-keys/\(keyId)")
            #expect(deleted.status == .noContent)
            #expect(try await api.call(.delete, "/admin/v1/apps/\(f.appId)/oauth/assertion-keys/\(keyId)").status == .notFound)
            #expect(await Self.refusal(f, try await key.sign(Self.claims(f, sub: "after-delete")))?.code == "invalid_grant")
            // Another app's secret reaches none of it.
            let other = try await api.createApp("Other \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))")
            let foreign = try await api.call(
                .get, "/admin/v1/apps/\(f.appId)/oauth/assertion-keys", token: other.string("appSecret"))
            #expect(foreign.status == .forbidden || foreign.status == .notFound || foreign.status == .unauthorized, "\(foreign.status)")
        }
    }

    /// `POST {issuer}/oauth/token` as the backend's client (HTTP Basic), with `form`.
    static func tokenRequest(_ f: Fixture, _ form: [(String, String)], client: OAuthClient? = nil) async throws -> API.Reply {
        let id = (client ?? f.client).clientId
        let basic = Data("\(AuthorizationRules.formEncode(id)):\(AuthorizationRules.formEncode(clientSecret))".utf8).base64EncodedString()
        return try await f.api.call(
            .post, "/apps/\(f.appId)/oauth/token", token: nil, body: OAuthAuthorizeTests.form(form), headers: [.authorization: "Basic \(basic)"],
            contentType: "application/x-www-form-urlencoded")
    }

    @Test("through the token endpoint: the grant answers an access token, a refresh token and an ID token for the vouched user")
    func tokenEndpoint() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let key = try await BackendKey.make(.es256)
            var jwk = key.publicJWK
            jwk["kid"] = .string(key.kid)
            #expect(try await Self.register(f, ["issuer": .string(Self.issuer), "jwk": .object(jwk)]).status == .created)
            let grant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
            let assertion = try await key.sign(Self.claims(f, sub: "http-user", ["email": .string("http-\(Secrets.hexIdentifier().prefix(8))@example.com")]))
            let reply = try await Self.tokenRequest(f, [("grant_type", grant), ("assertion", assertion), ("scope", "openid email")])
            #expect(reply.status == .ok, "\(reply.text)")
            let body = reply.object
            #expect(body["token_type"] == .string("Bearer") && body["access_token"]?.stringValue != nil && body["refresh_token"]?.stringValue != nil)
            let services = try await TestEnvironment.services()
            let idToken = try #require(body["id_token"]?.stringValue)
            let claims = try #require(Base64URL.jwtPart(idToken, 1))
            let userId = try #require(try await TestEnvironment.value(
                "SELECT user_id FROM identities WHERE app_ref = \(f.app.ref) AND kind = 'custom' AND subject = 'http-user'", as: UUID.self))
            #expect(claims["sub"] == .string(userId.uuidString.lowercased()) && claims["iss"] == .string(services.oauth.issuer(appId: f.appId)))
            // The same assertion again, none at all, or a client without the grant.
            let replayed = try await Self.tokenRequest(f, [("grant_type", grant), ("assertion", assertion)])
            #expect(replayed.status == .badRequest && replayed.object["error"] == .string("invalid_grant"), "\(replayed.text)")
            let missing = try await Self.tokenRequest(f, [("grant_type", grant)])
            #expect(missing.status == .badRequest && missing.object["error"] == .string("invalid_request"), "\(missing.text)")
            let other = try await Self.makeClient(app: f.app, grants: [.clientCredentials])
            let fresh = try await key.sign(Self.claims(f, sub: "http-user"))
            let refused = try await Self.tokenRequest(f, [("grant_type", grant), ("assertion", fresh)], client: other)
            #expect(refused.object["error"] == .string("unauthorized_client"), "\(refused.text)")
            // A scope the client does not have spends nothing: the assertion still works afterwards.
            let wide = try await Self.tokenRequest(f, [("grant_type", grant), ("assertion", fresh), ("scope", "openid admin")])
            #expect(wide.object["error"] == .string("invalid_scope"), "\(wide.text)")
            #expect(try await Self.tokenRequest(f, [("grant_type", grant), ("assertion", fresh)]).status == .ok)
        }
    }

    @Test("replay rows: an accepted jti is kept until its assertion expires, then the housekeeping pass removes it")
    func replayRowsAreBounded() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let key = try await BackendKey.make(.es256)
            var jwk = key.publicJWK
            jwk["kid"] = .string(key.kid)
            #expect(try await Self.register(f, ["issuer": .string(Self.issuer), "jwk": .object(jwk)]).status == .created)
            let jti = "jti-" + Secrets.hexIdentifier()
            let exp = Int(Date().timeIntervalSince1970) + 100
            _ = try await Self.signIn(f, try await key.sign(Self.claims(f, sub: "bounded", ["jti": .string(jti), "exp": .int(exp)])))
            let expires = try #require(try await TestEnvironment.value(
                "SELECT extract(epoch FROM expires_at)::bigint FROM oauth_assertion_jtis WHERE app_ref = \(f.app.ref) AND jti = \(jti)",
                as: Int64.self))
            #expect(expires == Int64(exp) + 60)
            let services = try await TestEnvironment.services()
            _ = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM oauth_assertion_jtis WHERE app_ref = \(f.app.ref)", as: Int.self) == 1)
            try await TestEnvironment.sql("UPDATE oauth_assertion_jtis SET expires_at = now() - interval '1 second' WHERE jti = \(jti)")
            _ = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM oauth_assertion_jtis WHERE app_ref = \(f.app.ref)", as: Int.self) == 0)
        }
    }
}
