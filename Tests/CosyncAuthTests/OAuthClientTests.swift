import Crypto
import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PostgresNIO
import Testing
import _CryptoExtras

/// A client's signing key of one algorithm. Assertions are signed here by hand with swift-crypto, so
/// the server's JWTKit verification is checked against an independent signer.
struct ClientSigningKey: Sendable {
    enum Algorithm: String, Sendable, CaseIterable { case rs256 = "RS256", ps256 = "PS256", es256 = "ES256", eddsa = "EdDSA" }
    let algorithm: Algorithm
    let kid: String
    let jwk: [String: JSONValue]
    let sign: @Sendable (Data) throws -> Data

    static func make(_ algorithm: Algorithm, kid: String = "k-" + Secrets.hexIdentifier().prefix(8)) throws -> ClientSigningKey {
        switch algorithm {
        case .rs256, .ps256:
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let primitives = try key.publicKey.getKeyPrimitives()
            let padding: _RSA.Signing.Padding = algorithm == .rs256 ? .insecurePKCS1v1_5 : .PSS
            return ClientSigningKey(
                algorithm: algorithm, kid: kid,
                jwk: ["kty": str("RSA"), "kid": .string(kid), "n": .string(Base64URL.encode(primitives.modulus)),
                      "e": .string(Base64URL.encode(primitives.publicExponent))],
                sign: { try key.signature(for: SHA256.hash(data: $0), padding: padding).rawRepresentation })
        case .es256:
            let key = P256.Signing.PrivateKey()
            let raw = key.publicKey.rawRepresentation
            return ClientSigningKey(
                algorithm: algorithm, kid: kid,
                jwk: ["kty": str("EC"), "crv": str("P-256"), "kid": .string(kid), "x": .string(Base64URL.encode(raw.prefix(32))),
                      "y": .string(Base64URL.encode(raw.suffix(32)))],
                sign: { try key.signature(for: $0).rawRepresentation })
        case .eddsa:
            let key = Curve25519.Signing.PrivateKey()
            return ClientSigningKey(
                algorithm: algorithm, kid: kid,
                jwk: ["kty": str("OKP"), "crv": str("Ed25519"), "kid": .string(kid), "x": .string(Base64URL.encode(key.publicKey.rawRepresentation))],
                sign: { try key.signature(for: $0) })
        }
    }

    var jwks: JSONValue { .object(["keys": .array([.object(jwk)])]) }

    /// A compact JWS of `claims`, with `alg` and `kid` in the header unless `header` says otherwise.
    func sign(_ claims: [String: JSONValue], header: [String: JSONValue] = [:]) throws -> String {
        let head = ["alg": JSONValue.string(algorithm.rawValue), "kid": .string(kid)].merging(header) { _, new in new }
        let input = Base64URL.encode(try JSONCoding.encode(JSONValue.object(head))) + "." + Base64URL.encode(try JSONCoding.encode(JSONValue.object(claims)))
        return input + "." + Base64URL.encode(try sign(Data(input.utf8)))
    }
}

/// JSON in the tests' own words (no literal conformances on JSONValue: another file may want them).
private func str(_ text: String) -> JSONValue { .string(text) }
private func strs(_ texts: String...) -> JSONValue { .array(texts.map { .string($0) }) }
private func obj(_ members: [String: JSONValue]) -> JSONValue { .object(members) }
private func jwksOf(_ keys: [String: JSONValue]...) -> JSONValue { .object(["keys": .array(keys.map { .object($0) })]) }

@Suite("OAuth clients: the admin API and client authentication")
struct OAuthClientTests {
    static func clients(_ appId: String) -> String { "/admin/v1/apps/\(appId)/oauth/clients" }

    /// An app and a client created in it; `input` gets `name` when it has none.
    static func client(_ api: API, appId: String, _ input: [String: JSONValue], token: String? = TestEnvironment.operatorToken) async throws
        -> [String: JSONValue]
    {
        var body = input
        if body["name"] == nil { body["name"] = .string("Client \(Secrets.hexIdentifier().prefix(6))") }
        let reply = try await api.call(.post, clients(appId), token: token, json: .object(body))
        try #require(reply.status == .created, "create client: \(reply.status) \(reply.text)")
        return reply.object
    }

    static let native: [String: JSONValue] = ["kind": str("public"), "redirectUris": strs("com.example.app:/oauth/callback")]
    static let backend: [String: JSONValue] = ["kind": str("confidential"), "redirectUris": strs("https://app.example.com/callback")]
    static let keyed: [String: JSONValue] = [
        "kind": str("confidential"), "tokenEndpointAuthMethod": str("private_key_jwt"), "grantTypes": strs("client_credentials"),
    ]

    static func app(_ appId: String) async throws -> App { try await TestEnvironment.services().apps.row(appId: appId) }

    static func audience(_ appId: String) async throws -> [String] {
        let oauth = try await TestEnvironment.services().oauth
        return [oauth.endpoint(appId: appId, "/oauth/token"), oauth.issuer(appId: appId)]
    }

    static func authenticate(_ appId: String, _ presented: OAuthClients.Presented, address: String? = nil) async throws -> Result<OAuthClient, OAuthError> {
        let services = try await TestEnvironment.services()
        let app = try await app(appId)
        let audience = try await audience(appId)
        do {
            return .success(try await services.oauth.clients.authenticate(app: app, presented, audience: audience, clientAddress: address))
        } catch {
            return .failure(error)
        }
    }

    static func claims(_ clientId: String, aud: JSONValue, exp: TimeInterval = 120, jti: String? = UUID().uuidString) -> [String: JSONValue] {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: JSONValue] = ["iss": .string(clientId), "sub": .string(clientId), "aud": aud, "iat": .int(now), "exp": .int(now + Int(exp))]
        if let jti { claims["jti"] = .string(jti) }
        return claims
    }

    static func assertion(_ token: String, clientId: String? = nil) -> OAuthClients.Presented {
        OAuthClients.Presented(clientId: clientId, assertionType: OAuthClients.assertionType, assertion: token)
    }

    // MARK: the admin API

    @Test("a public client gets the secure defaults and no secret; a confidential one a secret shown once and stored as its SHA-256")
    func createDefaults() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth defaults").string("appId")
            let native = try await Self.client(api, appId: appId, Self.native)
            #expect(native["kind"] == str("public") && native["tokenEndpointAuthMethod"] == str("none"), "\(native)")
            #expect(native["grantTypes"] == strs("authorization_code", "refresh_token"))
            #expect(native["dpopRequired"] == .bool(true) && native["accessTokenSeconds"] == .int(900))
            #expect(native["refreshSlidingSeconds"] == .int(30 * 86_400) && native["refreshAbsoluteSeconds"] == .int(90 * 86_400))
            #expect(native["refreshGraceSeconds"] == .int(30) && native["jwks"] == .null && native["jwksUri"] == .null)
            #expect(native["scopes"] == .array(OAuthClient.standardScopes.map { .string($0) }))
            #expect(native["clientSecret"] == nil)
            let clientId = native.string("clientId")
            #expect(clientId.range(of: OAuthClientAdministration.clientIdPattern, options: .regularExpression) != nil, "\(clientId)")

            let created = try await api.call(.post, Self.clients(appId), json: .object(Self.backend.merging(["name": str("Backend")]) { a, _ in a }))
            #expect(created.status == .created)
            #expect(created.headers[.location] == "\(Self.clients(appId))/\(created.object.string("clientId"))")
            let backend = created.object
            #expect(backend["tokenEndpointAuthMethod"] == str("client_secret_basic") && backend["dpopRequired"] == .bool(false), "\(backend)")
            #expect(backend["grantTypes"] == strs("authorization_code", "refresh_token", "client_credentials"))
            let secret = backend.string("clientSecret")
            #expect(secret.range(of: "^ccs_[A-Za-z0-9_-]{43}$", options: .regularExpression) != nil, "\(secret)")

            // Stored as its SHA-256; never answered again.
            let stored = try await TestEnvironment.value(
                "SELECT secret_hash FROM oauth_clients WHERE client_id = \(backend.string("clientId"))", as: Data.self)
            #expect(stored == Secrets.sha256(secret))
            let again = try await api.call(.get, "\(Self.clients(appId))/\(backend.string("clientId"))")
            #expect(again.status == .ok && again.object["clientSecret"] == nil && !again.text.contains(secret), "\(again.text)")
            var shown = backend
            shown["clientSecret"] = nil
            #expect(again.object == shown)
            let list = try await api.call(.get, Self.clients(appId))
            #expect(list.status == .ok && !list.text.contains(secret))
            #expect(list.object["clients"]?.arrayValue?.compactMap { $0["clientId"]?.stringValue } == [clientId, backend.string("clientId")])
            let audited = try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE app_id = \(appId) AND action = 'oauth-client.create'", as: Int.self)
            #expect(audited == 2)
        }
    }

    @Test("PATCH changes what it names; rotation answers a new secret once and the old one stops working; DELETE ends the client's grants")
    func patchRotateDelete() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("OAuth lifecycle", settings: ["signupFlow": str("none")])
            let appId = created.string("appId")
            let backend = try await Self.client(api, appId: appId, Self.backend)
            let clientId = backend.string("clientId"), path = "\(Self.clients(appId))/\(clientId)"
            let oldSecret = backend.string("clientSecret")

            let patched = try await api.call(.patch, path, json: obj([
                "name": str("Renamed"), "scopes": strs("openid", "orders:read"), "accessTokenSeconds": .int(300), "refreshGraceSeconds": .int(5),
                "tokenEndpointAuthMethod": str("client_secret_post"), "postLogoutRedirectUris": strs("https://app.example.com/bye"),
            ]))
            #expect(patched.status == .ok, "\(patched.text)")
            #expect(patched.object["name"] == str("Renamed") && patched.object["scopes"] == strs("openid", "orders:read"))
            #expect(patched.object["accessTokenSeconds"] == .int(300) && patched.object["refreshGraceSeconds"] == .int(5))
            #expect(patched.object["tokenEndpointAuthMethod"] == str("client_secret_post") && patched.object["clientSecret"] == nil)
            #expect(patched.object["redirectUris"] == backend["redirectUris"] && patched.object["createdAt"] == backend["createdAt"])
            // The secret carries over from basic to post.
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, clientSecret: oldSecret)).isSuccess)

            let rotated = try await api.call(.post, "\(path)/secret/rotate")
            #expect(rotated.status == .ok, "\(rotated.text)")
            let newSecret = rotated.object.string("clientSecret")
            #expect(newSecret.hasPrefix("ccs_") && newSecret != oldSecret && rotated.object.string("clientId") == clientId)
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, clientSecret: oldSecret)).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, clientSecret: newSecret)).isSuccess)
            #expect(try await api.call(.get, path).text.contains(newSecret) == false)

            // A public client has no secret to rotate.
            let native = try await Self.client(api, appId: appId, Self.native)
            let refused = try await api.call(.post, "\(Self.clients(appId))/\(native.string("clientId"))/secret/rotate")
            #expect(refused.status == .conflict && refused.errorCode == "no_secret", "\(refused.text)")

            // A grant of the client (one refresh family on a session) ends with it.
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = "grant\(Secrets.hexIdentifier().prefix(8))@example.com"
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let token = try await sdk.login(handle, "pw").object.string("access-token")
            let sid = try #require(UUID(uuidString: Base64URL.jwtPart(token, 1)?["sid"]?.stringValue ?? ""))
            try await TestEnvironment.sql("""
                INSERT INTO oauth_grants (app_ref, client_ref, session_id, user_id, scope, auth_time, absolute_expires_at)
                SELECT c.app_ref, c.id, s.id, s.user_id, 'openid', now(), now() + interval '1 day'
                FROM oauth_clients c, sessions s WHERE c.client_id = \(clientId) AND s.id = \(sid)
                """)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM oauth_grants WHERE session_id = \(sid)", as: Int.self) == 1)
            #expect(try await api.call(.delete, path).status == .noContent)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM oauth_grants WHERE session_id = \(sid)", as: Int.self) == 0)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE id = \(sid)", as: Int.self) == 1)
            #expect(try await api.call(.get, path).status == .notFound)
            #expect(try await api.call(.delete, path).status == .notFound)
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, clientSecret: newSecret)).errorCode == "invalid_client")
            let actions = try await TestEnvironment.value(
                """
                SELECT string_agg(action, ',' ORDER BY id) FROM audit_log
                WHERE app_id = \(appId) AND action LIKE 'oauth-client.%' AND detail->>'clientId' = \(clientId)
                """, as: String.self)
            #expect(actions == "oauth-client.create,oauth-client.update,oauth-client.rotate-secret,oauth-client.delete")
        }
    }

    @Test("every refused input names its field: 422 when the request is wrong by itself, 409 when it conflicts with the stored client")
    func validation() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth validation").string("appId")
            let key = try ClientSigningKey.make(.es256)
            let rsaSmall = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024)).publicKey.getKeyPrimitives()
            var privateJWK = key.jwk
            privateJWK["d"] = .string(Base64URL.encode(Array(repeating: 1, count: 32)))
            let pkjwt = Self.keyed
            func with(_ base: [String: JSONValue], _ extra: [String: JSONValue]) -> [String: JSONValue] { base.merging(extra) { _, new in new } }
            let cases: [(String, [String: JSONValue], String, String)] = [
                ("unknown field", with(Self.native, ["secret": str("x")]), "secret", "unknown_field"),
                ("no name", ["kind": str("public"), "redirectUris": strs("com.example.app:/cb")], "name", "required"),
                ("blank name", with(Self.native, ["name": str("  ")]), "name", "invalid_value"),
                ("long name", with(Self.native, ["name": .string(String(repeating: "n", count: 201))]), "name", "too_long"),
                ("no kind", ["name": str("x"), "redirectUris": strs("com.example.app:/cb")], "kind", "required"),
                ("bad kind", with(Self.native, ["kind": str("spa")]), "kind", "invalid_value"),
                ("public with a secret", with(Self.native, ["tokenEndpointAuthMethod": str("client_secret_basic")]), "tokenEndpointAuthMethod", "public_client"),
                ("public with client credentials", with(Self.native, ["grantTypes": strs("client_credentials")]), "grantTypes", "public_client"),
                ("public with keys", with(Self.native, ["jwks": key.jwks]), "jwks", "keys_not_allowed"),
                ("confidential without one", with(Self.backend, ["tokenEndpointAuthMethod": str("none")]), "tokenEndpointAuthMethod", "confidential_client"),
                ("http redirect", with(Self.native, ["redirectUris": strs("http://app.example.com/cb")]), "redirectUris", "invalid_redirect_uri"),
                ("scheme without a dot", with(Self.native, ["redirectUris": strs("myapp:/cb")]), "redirectUris", "invalid_redirect_uri"),
                ("javascript", with(Self.native, ["redirectUris": strs("javascript:alert(1)")]), "redirectUris", "invalid_redirect_uri"),
                ("fragment", with(Self.native, ["redirectUris": strs("https://app.example.com/cb#x")]), "redirectUris", "invalid_redirect_uri"),
                ("user info", with(Self.native, ["redirectUris": strs("https://u@app.example.com/cb")]), "redirectUris", "invalid_redirect_uri"),
                ("twice", with(Self.native, ["redirectUris": strs("com.example.app:/cb", "com.example.app:/cb")]), "redirectUris", "duplicate"),
                ("no redirect for the code", ["name": str("x"), "kind": str("public")], "redirectUris", "redirect_uris_required"),
                ("empty redirects", with(Self.native, ["redirectUris": .array([])]), "redirectUris", "redirect_uris_required"),
                ("post-logout http", with(Self.native, ["postLogoutRedirectUris": strs("http://example.com/bye")]), "postLogoutRedirectUris", "invalid_redirect_uri"),
                ("no grants", with(Self.native, ["grantTypes": .array([])]), "grantTypes", "invalid_value"),
                ("unknown grant", with(Self.native, ["grantTypes": strs("implicit")]), "grantTypes", "invalid_value"),
                ("grant twice", with(Self.native, ["grantTypes": strs("refresh_token", "refresh_token")]), "grantTypes", "duplicate"),
                ("scope charset", with(Self.native, ["scopes": strs("open id")]), "scopes", "invalid_value"),
                ("scope quote", with(Self.native, ["scopes": strs("a\"b")]), "scopes", "invalid_value"),
                ("access too short", with(Self.native, ["accessTokenSeconds": .int(59)]), "accessTokenSeconds", "out_of_range"),
                ("access too long", with(Self.native, ["accessTokenSeconds": .int(86_401)]), "accessTokenSeconds", "out_of_range"),
                ("sliding too long", with(Self.native, ["refreshSlidingSeconds": .int(31_536_001)]), "refreshSlidingSeconds", "out_of_range"),
                ("absolute too short", with(Self.native, ["refreshAbsoluteSeconds": .int(10)]), "refreshAbsoluteSeconds", "out_of_range"),
                ("grace too long", with(Self.native, ["refreshGraceSeconds": .int(301)]), "refreshGraceSeconds", "out_of_range"),
                ("grace not a number", with(Self.native, ["refreshGraceSeconds": str("30")]), "refreshGraceSeconds", "invalid_type"),
                ("dpop not a boolean", with(Self.native, ["dpopRequired": str("yes")]), "dpopRequired", "invalid_type"),
                ("private_key_jwt without keys", pkjwt, "jwks", "keys_required"),
                ("both key forms", with(pkjwt, ["jwks": key.jwks, "jwksUri": str("https://1.1.1.1/jwks")]), "jwksUri", "jwks_conflict"),
                ("keys for a secret", with(Self.backend, ["jwks": key.jwks]), "jwks", "keys_not_allowed"),
                ("private key material", with(pkjwt, ["jwks": jwksOf(privateJWK)]), "jwks", "invalid_jwks"),
                ("small RSA key", with(pkjwt, ["jwks": jwksOf(["kty": str("RSA"), "n": .string(Base64URL.encode(rsaSmall.modulus)),
                                                        "e": .string(Base64URL.encode(rsaSmall.publicExponent))])]), "jwks", "invalid_jwks"),
                ("wrong curve", with(pkjwt, ["jwks": jwksOf(key.jwk.merging(["crv": str("P-384")]) { _, new in new })]), "jwks", "invalid_jwks"),
                ("not a point", with(pkjwt, ["jwks": jwksOf(key.jwk.merging(["x": .string(Base64URL.encode(Array(repeating: 7, count: 32)))]) { _, new in new })]), "jwks", "invalid_jwks"),
                ("encryption key", with(pkjwt, ["jwks": jwksOf(key.jwk.merging(["use": str("enc")]) { _, new in new })]), "jwks", "invalid_jwks"),
                ("HMAC alg", with(pkjwt, ["jwks": jwksOf(key.jwk.merging(["alg": str("HS256")]) { _, new in new })]), "jwks", "invalid_jwks"),
                ("no keys", with(pkjwt, ["jwks": obj(["keys": .array([])])]), "jwks", "invalid_jwks"),
                ("kid twice", with(pkjwt, ["jwks": jwksOf(key.jwk, key.jwk)]), "jwks", "invalid_jwks"),
                ("jwksUri over http", with(pkjwt, ["jwksUri": str("http://keys.example.com/jwks")]), "jwksUri", "insecure_url"),
                ("jwksUri private", with(pkjwt, ["jwksUri": str("https://10.1.2.3/jwks")]), "jwksUri", "forbidden_address"),
                ("jwksUri loopback https", with(pkjwt, ["jwksUri": str("https://127.0.0.1/jwks")]), "jwksUri", "forbidden_address"),
                ("jwksUri metadata", with(pkjwt, ["jwksUri": str("https://169.254.169.254/latest")]), "jwksUri", "forbidden_address"),
                ("jwksUri with a user", with(pkjwt, ["jwksUri": str("https://u:p@keys.example.com/jwks")]), "jwksUri", "invalid_url"),
            ]
            for (label, body, field, code) in cases {
                let body = body["name"] == nil && field != "name" ? with(body, ["name": str("Refused")]) : body
                let reply = try await api.call(.post, Self.clients(appId), json: .object(body))
                #expect(reply.status == .unprocessableContent && reply.errorField == field && reply.errorCode == code,
                        "\(label): \(reply.status) \(reply.text)")
            }
            #expect(try await api.call(.get, Self.clients(appId)).object["clients"] == .array([]), "nothing refused was stored")

            // Changes: wrong by themselves (422), or conflicting with the stored client (409).
            let native = try await Self.client(api, appId: appId, Self.native)
            let backend = try await Self.client(api, appId: appId, Self.backend)
            let nativePath = "\(Self.clients(appId))/\(native.string("clientId"))", backendPath = "\(Self.clients(appId))/\(backend.string("clientId"))"
            let patches: [(String, String, [String: JSONValue], HTTPResponse.Status, String, String)] = [
                ("kind", nativePath, ["kind": str("confidential")], .unprocessableContent, "kind", "read_only"),
                ("client id", nativePath, ["clientId": str("cci_x")], .unprocessableContent, "clientId", "unknown_field"),
                ("bad redirect", nativePath, ["redirectUris": strs("ftp://x")], .unprocessableContent, "redirectUris", "invalid_redirect_uri"),
                ("keys with a secret method", backendPath, ["tokenEndpointAuthMethod": str("client_secret_post"), "jwks": key.jwks],
                 .unprocessableContent, "jwks", "invalid_combination"),
                ("code without redirects", backendPath, ["grantTypes": strs("authorization_code"), "redirectUris": .array([])],
                 .unprocessableContent, "redirectUris", "invalid_combination"),
                ("public to a secret", nativePath, ["tokenEndpointAuthMethod": str("client_secret_basic")], .conflict, "tokenEndpointAuthMethod", "public_client"),
                ("public to client credentials", nativePath, ["grantTypes": strs("client_credentials")], .conflict, "grantTypes", "public_client"),
                ("public keys", nativePath, ["jwks": key.jwks], .conflict, "jwks", "keys_not_allowed"),
                ("confidential to none", backendPath, ["tokenEndpointAuthMethod": str("none")], .conflict, "tokenEndpointAuthMethod", "confidential_client"),
                ("no redirect left", nativePath, ["redirectUris": .array([])], .conflict, "redirectUris", "redirect_uris_required"),
                ("keys for a secret client", backendPath, ["jwks": key.jwks], .conflict, "jwks", "keys_not_allowed"),
                ("private_key_jwt without keys", backendPath, ["tokenEndpointAuthMethod": str("private_key_jwt")], .conflict, "jwks", "keys_required"),
            ]
            for (label, path, patch, status, field, code) in patches {
                let reply = try await api.call(.patch, path, json: .object(patch))
                #expect(reply.status == status && reply.errorField == field && reply.errorCode == code, "\(label): \(reply.status) \(reply.text)")
            }
            #expect(try await api.call(.get, nativePath).object == native, "no refused change was stored")
            #expect(try await api.call(.get, "\(Self.clients(appId))/not-a-client").status == .notFound)
            #expect(try await api.call(.get, "\(Self.clients(appId))/cci_AAAAAAAAAAAAAAAAAAAAAA").status == .notFound)
        }
    }

    @Test("a developer manages its own app's clients with the app secret; another app's secret gets 403, no token 401")
    func developerAccess() async throws {
        try await TestEnvironment.withAPI { api in
            let mine = try await api.createApp("OAuth mine"), theirs = try await api.createApp("OAuth theirs")
            let appId = mine.string("appId"), secret = mine.string("appSecret"), otherSecret = theirs.string("appSecret")
            let created = try await Self.client(api, appId: appId, Self.backend, token: secret)
            let path = "\(Self.clients(appId))/\(created.string("clientId"))"
            #expect(try await api.call(.get, Self.clients(appId), token: secret).status == .ok)
            #expect(try await api.call(.get, path, token: secret).status == .ok)
            #expect(try await api.call(.patch, path, token: secret, json: obj(["name": str("Mine")])).status == .ok)
            #expect(try await api.call(.post, "\(path)/secret/rotate", token: secret).status == .ok)
            for (method, target): (HTTPRequest.Method, String) in [(.get, Self.clients(appId)), (.get, path), (.patch, path), (.delete, path), (.post, "\(path)/secret/rotate")] {
                let other = try await api.call(method, target, token: otherSecret, body: method == .patch ? #"{"name":"x"}"# : nil)
                #expect(other.status == .forbidden, "\(method) \(target): \(other.status)")
                let none = try await api.call(method, target, token: nil, body: method == .patch ? #"{"name":"x"}"# : nil)
                #expect(none.status == .unauthorized, "\(method) \(target): \(none.status)")
            }
            let posted = try await api.call(.post, Self.clients(appId), token: otherSecret, json: .object(Self.native.merging(["name": str("x")]) { a, _ in a }))
            #expect(posted.status == .forbidden)
            // The client is not reachable through another app's path, whoever asks.
            let elsewhere = "\(Self.clients(theirs.string("appId")))/\(created.string("clientId"))"
            #expect(try await api.call(.get, elsewhere, token: otherSecret).status == .notFound)
            #expect(try await api.call(.delete, elsewhere).status == .notFound)
            #expect(try await api.call(.delete, path, token: secret).status == .noContent)
        }
    }

    @Test("moving to private_key_jwt drops the secret; moving back makes a new one, answered once")
    func methodChanges() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth method").string("appId")
            let backend = try await Self.client(api, appId: appId, Self.backend)
            let clientId = backend.string("clientId"), path = "\(Self.clients(appId))/\(clientId)"
            let key = try ClientSigningKey.make(.eddsa)
            let moved = try await api.call(.patch, path, json: obj(["tokenEndpointAuthMethod": str("private_key_jwt"), "jwks": key.jwks]))
            #expect(moved.status == .ok && moved.object["jwks"] == key.jwks && moved.object["clientSecret"] == nil, "\(moved.text)")
            #expect(try await TestEnvironment.value("SELECT secret_hash IS NULL FROM oauth_clients WHERE client_id = \(clientId)", as: Bool.self) == true)
            #expect(try await Self.authenticate(appId, .init(basic: (clientId, backend.string("clientSecret")))).errorCode == "invalid_client")
            let refused = try await api.call(.post, "\(path)/secret/rotate")
            #expect(refused.status == .conflict && refused.errorCode == "no_secret")

            let back = try await api.call(.patch, path, json: obj(["tokenEndpointAuthMethod": str("client_secret_post")]))
            let secret = back.object.string("clientSecret")
            #expect(back.status == .ok && secret.hasPrefix("ccs_") && back.object["jwks"] == .null, "\(back.text)")
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, clientSecret: secret)).isSuccess)
            #expect(try await api.call(.get, path).object["clientSecret"] == nil)
        }
    }

    // MARK: client authentication

    @Test("client_secret_basic and _post: the registered method only, the right secret only; a public client presents none")
    func secretAuthentication() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth secrets").string("appId")
            let basic = try await Self.client(api, appId: appId, Self.backend)
            let post = try await Self.client(api, appId: appId, Self.backend.merging(["tokenEndpointAuthMethod": str("client_secret_post")]) { _, new in new })
            let native = try await Self.client(api, appId: appId, Self.native)
            let (b, bs) = (basic.string("clientId"), basic.string("clientSecret"))
            let (p, ps) = (post.string("clientId"), post.string("clientSecret"))

            #expect(try await Self.authenticate(appId, .init(basic: (b, bs))).value?.clientId == b)
            #expect(try await Self.authenticate(appId, .init(basic: (b, bs), clientId: b)).isSuccess)
            #expect(try await Self.authenticate(appId, .init(basic: (b, bs + "x"))).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(basic: (b, ps))).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(clientId: b, clientSecret: bs)).errorCode == "invalid_client", "post to a basic client")
            #expect(try await Self.authenticate(appId, .init(clientId: b)).errorCode == "invalid_client", "no secret")
            #expect(try await Self.authenticate(appId, .init(basic: (b, bs), clientId: p)).errorCode == "invalid_request")
            #expect(try await Self.authenticate(appId, .init(basic: (b, bs), clientSecret: bs)).errorCode == "invalid_request")

            #expect(try await Self.authenticate(appId, .init(clientId: p, clientSecret: ps)).value?.clientId == p)
            #expect(try await Self.authenticate(appId, .init(clientId: p, clientSecret: bs)).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(basic: (p, ps))).errorCode == "invalid_client", "basic to a post client")

            let n = native.string("clientId")
            #expect(try await Self.authenticate(appId, .init(clientId: n)).value?.clientId == n)
            #expect(try await Self.authenticate(appId, .init(clientId: n, clientSecret: "anything")).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(basic: (n, ""))).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(clientId: "cci_unknownunknownunknow")).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init()).errorCode == "invalid_client")

            // Another app's client is unknown here.
            let otherApp = try await api.createApp("OAuth secrets 2").string("appId")
            #expect(try await Self.authenticate(otherApp, .init(basic: (b, bs))).errorCode == "invalid_client")
        }
    }

    @Test("private_key_jwt with each algorithm; wrong aud, expired, too far ahead, replayed jti, wrong issuer, another key and alg none are refused")
    func privateKeyJWT() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth pkjwt").string("appId")
            let audience = try await Self.audience(appId)
            for algorithm in ClientSigningKey.Algorithm.allCases {
                let key = try ClientSigningKey.make(algorithm)
                let created = try await Self.client(api, appId: appId, Self.keyed.merging(["jwks": key.jwks]) { a, _ in a })
                #expect(created["clientSecret"] == nil)
                let clientId = created.string("clientId")
                let token = try key.sign(Self.claims(clientId, aud: .string(audience[0])))
                let ok = try await Self.authenticate(appId, Self.assertion(token, clientId: clientId))
                #expect(ok.value?.clientId == clientId, "\(algorithm): \(ok)")
                // The same assertion again is a replay.
                let replay = try await Self.authenticate(appId, Self.assertion(token, clientId: clientId))
                #expect(replay.errorDescription?.contains("used before") == true, "\(algorithm): \(replay)")
                // The issuer as audience, in an array; client_id left out (the assertion's sub names the client).
                let byIssuer = try key.sign(Self.claims(clientId, aud: strs("https://elsewhere.example", audience[1])))
                #expect(try await Self.authenticate(appId, Self.assertion(byIssuer)).isSuccess, "\(algorithm)")
            }

            let key = try ClientSigningKey.make(.es256)
            let clientId = try await Self.client(api, appId: appId, Self.keyed.merging(["jwks": key.jwks]) { a, _ in a }).string("clientId")
            let aud = JSONValue.string(audience[0])
            let other = try ClientSigningKey.make(.es256, kid: key.kid)
            var wrongIssuer = Self.claims(clientId, aud: aud)
            wrongIssuer["iss"] = str("someone-else")
            var noExp = Self.claims(clientId, aud: aud)
            noExp["exp"] = nil
            var futureNbf = Self.claims(clientId, aud: aud)
            futureNbf["nbf"] = .int(Int(Date().timeIntervalSince1970) + 120)
            let unsignedHeader = Base64URL.encode(Data(#"{"alg":"none"}"#.utf8))
            let unsignedBody = Base64URL.encode(try JSONCoding.encode(JSONValue.object(Self.claims(clientId, aud: aud))))
            let refusals: [(String, String, String)] = [
                ("wrong aud", try key.sign(Self.claims(clientId, aud: str("https://other.example/oauth/token"))), "aud"),
                ("expired", try key.sign(Self.claims(clientId, aud: aud, exp: -60)), "expired"),
                ("too far ahead", try key.sign(Self.claims(clientId, aud: aud, exp: 900)), "at most"),
                ("no exp", try key.sign(noExp), "exp is required"),
                ("no jti", try key.sign(Self.claims(clientId, aud: aud, jti: nil)), "jti"),
                ("not yet valid", try key.sign(futureNbf), "nbf"),
                ("wrong issuer", try key.sign(wrongIssuer), "iss"),
                ("another key", try other.sign(Self.claims(clientId, aud: aud)), "signature"),
                ("alg none", "\(unsignedHeader).\(unsignedBody).", "alg"),
                ("alg HS256", try key.sign(Self.claims(clientId, aud: aud), header: ["alg": str("HS256")]), "alg"),
                ("alg of another key type", try key.sign(Self.claims(clientId, aud: aud), header: ["alg": str("RS256")]), "no key"),
                ("unknown kid", try key.sign(Self.claims(clientId, aud: aud), header: ["kid": str("nope")]), "no key"),
                ("critical extension", try key.sign(Self.claims(clientId, aud: aud), header: ["crit": strs("exp")]), "critical"),
                ("garbage", "not.a.jwt", "JWT"),
            ]
            for (label, token, reason) in refusals {
                let result = try await Self.authenticate(appId, Self.assertion(token, clientId: clientId))
                #expect(result.errorCode == "invalid_client" && result.errorDescription?.contains(reason) == true, "\(label): \(result)")
            }
            // A secret, or an assertion type that is not jwt-bearer, is not private_key_jwt.
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, clientSecret: "x")).errorCode == "invalid_client")
            let wrongType = OAuthClients.Presented(clientId: clientId, assertionType: "urn:example:saml", assertion: try key.sign(Self.claims(clientId, aud: aud)))
            #expect(try await Self.authenticate(appId, wrongType).errorCode == "invalid_client")
            #expect(try await Self.authenticate(appId, .init(clientId: clientId, assertion: try key.sign(Self.claims(clientId, aud: aud)))).errorCode == "invalid_request")
            // An assertion naming another client than client_id does not pass for it.
            let mismatch = try key.sign(Self.claims(clientId, aud: aud))
            #expect(try await Self.authenticate(appId, Self.assertion(mismatch, clientId: "cci_AAAAAAAAAAAAAAAAAAAAAA")).errorCode == "invalid_client")
            // A kid-less key is tried for a kid-less assertion; a good assertion still passes after all the refusals above.
            #expect(try await Self.authenticate(appId, Self.assertion(try key.sign(Self.claims(clientId, aud: aud), header: ["kid": .null]))).isSuccess)
        }
    }

    @Test("private_key_jwt with a jwks_uri: the keys are fetched from the client's server; a JWKS of another key does not verify")
    func jwksURI() async throws {
        let key = try ClientSigningKey.make(.rs256)
        let stranger = try ClientSigningKey.make(.es256)
        let router = Router()
        router.get("jwks") { _, _ in Response(status: .ok, headers: [.contentType: "application/json"],
                                              body: .init(byteBuffer: ByteBuffer(data: try JSONCoding.encode(key.jwks)))) }
        router.get("stranger") { _, _ in Response(status: .ok, headers: [.contentType: "application/json"],
                                                  body: .init(byteBuffer: ByteBuffer(data: try JSONCoding.encode(stranger.jwks)))) }
        let port = try await startFakeServer(router, label: "client-jwks")
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth jwks_uri").string("appId")
            let audience = try await Self.audience(appId)
            let input = Self.keyed
            let uri = "http://127.0.0.1:\(port)/jwks"
            let created = try await Self.client(api, appId: appId, input.merging(["jwksUri": .string(uri)]) { a, _ in a })
            #expect(created["jwksUri"] == .string(uri) && created["jwks"] == .null)
            let clientId = created.string("clientId")
            #expect(try await Self.authenticate(appId, Self.assertion(try key.sign(Self.claims(clientId, aud: .string(audience[0]))))).isSuccess)

            let strangerId = try await Self.client(api, appId: appId, input.merging(["jwksUri": .string("http://127.0.0.1:\(port)/stranger")]) { a, _ in a })
                .string("clientId")
            let refused = try await Self.authenticate(appId, Self.assertion(try key.sign(Self.claims(strangerId, aud: .string(audience[0])))))
            #expect(refused.errorCode == "invalid_client", "\(refused)")
        }
    }

    @Test("failed client authentication is limited per client and address: after 20 failures even the right secret waits (429)")
    func failureLimit() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth limit").string("appId")
            let backend = try await Self.client(api, appId: appId, Self.backend)
            let (id, secret) = (backend.string("clientId"), backend.string("clientSecret"))
            let address = "203.0.113.\(Int.random(in: 1...250))"
            // A success forgets the address's failures.
            for _ in 0..<5 { #expect(try await Self.authenticate(appId, .init(basic: (id, "wrong")), address: address).errorCode == "invalid_client") }
            #expect(try await Self.authenticate(appId, .init(basic: (id, secret)), address: address).isSuccess)
            for attempt in 1...20 {
                let result = try await Self.authenticate(appId, .init(basic: (id, "wrong")), address: address)
                #expect(result.errorCode == "invalid_client", "attempt \(attempt): \(result)")
            }
            let locked = try await Self.authenticate(appId, .init(basic: (id, secret)), address: address)
            #expect(locked.error?.status == 429 && locked.error?.retryAfter == 30, "\(locked)")
            // Another address is not locked out by this one.
            #expect(try await Self.authenticate(appId, .init(basic: (id, secret)), address: "198.51.100.7").isSuccess)
        }
    }

    @Test("used assertions are kept until they expire, then housekeeping deletes them")
    func assertionHousekeeping() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("OAuth jti").string("appId")
            let key = try ClientSigningKey.make(.eddsa)
            let clientId = try await Self.client(api, appId: appId, Self.keyed.merging(["jwks": key.jwks]) { a, _ in a }).string("clientId")
            let audience = try await Self.audience(appId)
            #expect(try await Self.authenticate(appId, Self.assertion(try key.sign(Self.claims(clientId, aud: .string(audience[0]), jti: "one")))).isSuccess)
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM oauth_clients WHERE client_id = \(clientId)", as: UUID.self))
            let kept = try await TestEnvironment.value(
                "SELECT extract(epoch FROM expires_at - now())::float8 FROM oauth_client_assertions WHERE client_ref = \(ref) AND jti = 'one'", as: Double.self)
            #expect((kept ?? 0) > 100 && (kept ?? .infinity) < 200, "\(String(describing: kept))")
            try await TestEnvironment.sql("INSERT INTO oauth_client_assertions (client_ref, jti, expires_at) VALUES (\(ref), 'old', now() - interval '1 second')")
            // An expired row does not block its jti.
            #expect(try await Self.authenticate(appId, Self.assertion(try key.sign(Self.claims(clientId, aud: .string(audience[0]), jti: "old")))).isSuccess)
            try await TestEnvironment.sql("INSERT INTO oauth_client_assertions (client_ref, jti, expires_at) VALUES (\(ref), 'gone', now() - interval '1 second')")
            let services = try await TestEnvironment.services()
            _ = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            let left = try await TestEnvironment.value(
                "SELECT string_agg(jti, ',' ORDER BY jti) FROM oauth_client_assertions WHERE client_ref = \(ref)", as: String.self)
            #expect(left == "old,one")
        }
    }
}

extension Result where Success == OAuthClient, Failure == OAuthError {
    var isSuccess: Bool { if case .success = self { true } else { false } }
    var value: OAuthClient? { try? get() }
    var error: OAuthError? { if case .failure(let e) = self { e } else { nil } }
    var errorCode: String? { error?.code }
    var errorDescription: String? { error?.description }
}
