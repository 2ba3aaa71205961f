import CosyncAuth
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import NIOCore
import PostgresNIO
import Testing

/// An OpenID provider on 127.0.0.1 for the tests: discovery, a JWK set, and a token endpoint that
/// checks the code, the redirect URI, the PKCE verifier and the client's HTTP Basic credentials like a
/// real one. Its authorization step is `authorize` (it consents at once), called with the query the
/// server sent the browser to it with. `tamper` changes the claims of the ID tokens it issues next.
actor FakeOpenIDProvider {
    struct Pending { let clientId, redirectURI, challenge, nonce: String }

    let key: BackendKey
    let clientId: String
    let clientSecret: String
    private(set) var port = 0
    private var codes: [String: Pending] = [:]
    private(set) var tokenRequests = 0
    var subject = "upstream-" + Secrets.hexIdentifier().prefix(8)
    var email: String? = nil
    var emailVerified = true
    var tamper: [String: JSONValue] = [:]

    init(key: BackendKey, clientId: String, clientSecret: String) {
        self.key = key
        self.clientId = clientId
        self.clientSecret = clientSecret
    }

    var issuer: String { "http://127.0.0.1:\(port)" }
    func setPort(_ port: Int) { self.port = port }
    func user(subject: String, email: String?, verified: Bool = true) {
        self.subject = subject
        self.email = email
        self.emailVerified = verified
    }
    func setTamper(_ claims: [String: JSONValue]) { tamper = claims }

    func discovery(path: String) -> String {
        // Under /other the document claims the root's issuer: a mix-up the server must refuse.
        let document: JSONValue = .object([
            "issuer": .string(issuer), "authorization_endpoint": .string("\(issuer)/authorize"), "token_endpoint": .string("\(issuer)/token"),
            "jwks_uri": .string("\(issuer)/jwks"), "token_endpoint_auth_methods_supported": .array([.string("client_secret_basic")]),
            "response_types_supported": .array([.string("code")]), "id_token_signing_alg_values_supported": .array([.string("RS256")]),
        ])
        return String(decoding: (try? JSONCoding.encode(document)) ?? Data(), as: UTF8.self)
    }

    func jwks() -> String {
        var jwk = key.publicJWK
        jwk["kid"] = .string(key.kid)
        jwk["use"] = .string("sig")
        jwk["alg"] = .string("RS256")
        return String(decoding: (try? JSONCoding.encode(JSONValue.object(["keys": .array([.object(jwk)])]))) ?? Data(), as: UTF8.self)
    }

    /// The provider's sign-in page, consenting at once: where it sends the browser back.
    func authorize(_ location: String) throws -> String {
        let query = OAuthAuthorizeTests.queryItems(location)
        guard location.hasPrefix("\(issuer)/authorize?"), query["response_type"] == "code", query["client_id"] == clientId,
              query["code_challenge_method"] == "S256", let challenge = query["code_challenge"], let redirect = query["redirect_uri"],
              let nonce = query["nonce"], let state = query["state"], query["scope"]?.split(separator: " ").contains("openid") == true
        else { throw CancellationError() }
        let code = "code-" + Secrets.hexIdentifier()
        codes[code] = Pending(clientId: clientId, redirectURI: redirect, challenge: challenge, nonce: nonce)
        return AuthorizationRules.redirect(redirect, [("code", code), ("state", state)])
    }

    /// An ID token for `aud` with `nonce`, with the current user and `tamper` applied.
    func idToken(aud: JSONValue, nonce: String?) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "aud": aud, "sub": .string(subject), "exp": .int(now + 300), "iat": .int(now),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if let email {
            claims["email"] = .string(email)
            claims["email_verified"] = .bool(emailVerified)
        }
        for (name, value) in tamper { claims[name] = value == .null ? nil : value }
        return try await key.sign(claims)
    }

    func token(form: [String: String], authorization: String?) async -> (HTTPResponse.Status, String) {
        tokenRequests += 1
        func error(_ code: String, _ status: HTTPResponse.Status = .badRequest) -> (HTTPResponse.Status, String) { (status, #"{"error":"\#(code)"}"#) }
        let expected = "Basic " + Data("\(AuthorizationRules.formEncode(clientId)):\(AuthorizationRules.formEncode(clientSecret))".utf8).base64EncodedString()
        guard authorization == expected else { return error("invalid_client", .unauthorized) }
        guard form["grant_type"] == "authorization_code", let code = form["code"], let pending = codes.removeValue(forKey: code) else {
            return error("invalid_grant")
        }
        guard form["redirect_uri"] == pending.redirectURI, let verifier = form["code_verifier"],
              Base64URL.encode(SHA256.hash(data: Data(verifier.utf8))) == pending.challenge
        else { return error("invalid_grant") }
        guard let token = try? await idToken(aud: .string(pending.clientId), nonce: pending.nonce) else { return error("server_error", .internalServerError) }
        return (.ok, #"{"access_token":"at-1","token_type":"Bearer","expires_in":300,"id_token":"\#(token)"}"#)
    }

    static func start() async throws -> FakeOpenIDProvider {
        let fake = FakeOpenIDProvider(
            key: try await BackendKey.make(.rs256), clientId: "cosync-" + Secrets.hexIdentifier().prefix(8), clientSecret: "s3cr+t/" + Secrets.hexIdentifier())
        let router = Router()
        @Sendable func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
            Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        }
        router.get(".well-known/openid-configuration") { _, _ in json(.ok, await fake.discovery(path: "")) }
        router.get("other/.well-known/openid-configuration") { _, _ in json(.ok, await fake.discovery(path: "/other")) }
        router.get("jwks") { _, _ in json(.ok, await fake.jwks()) }
        router.post("token") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 16)
            let (status, text) = await fake.token(form: LegacyFormDecoding.strict(String(buffer: body)), authorization: request.headers[.authorization])
            return json(status, text)
        }
        await fake.setPort(try await startFakeServer(router, label: "fake-oidc"))
        return fake
    }
}

@Suite("OAuth: upstream OpenID providers (Webcom's OAuth2 sign-in)")
struct OAuthUpstreamTests {
    struct Fixture {
        let base: OAuthAuthorizeTests.Fixture
        let idp: FakeOpenIDProvider
        let providerId: String
        let app: App
        var api: API { base.api }
        var appId: String { base.appId }
        var path: String { "/admin/v1/apps/\(base.appId)/oauth/upstream-providers" }
    }

    /// An app (with a password user and a public client, `OAuthAuthorizeTests.fixture`) and a provider.
    static func fixture(_ api: API, body extra: [String: JSONValue] = [:]) async throws -> Fixture {
        let base = try await OAuthAuthorizeTests.fixture(api)
        let idp = try await FakeOpenIDProvider.start()
        var body: [String: JSONValue] = [
            "name": .string("Acme <SSO>"), "discoveryUrl": .string(await idp.issuer), "clientId": .string(idp.clientId),
            "clientSecret": .string(idp.clientSecret), "audiences": .array([.string("native-app")]),
        ]
        body.merge(extra) { $1 }
        let created = try await api.call(.post, "/admin/v1/apps/\(base.appId)/oauth/upstream-providers", json: .object(body))
        try #require(created.status == .created, "\(created.status) \(created.text)")
        let services = try await TestEnvironment.services()
        let app = try #require(try await services.apps.cachedApp(appId: base.appId))
        return Fixture(base: base, idp: idp, providerId: created.object.string("providerId"), app: app)
    }

    /// From the authorization request to the provider's redirect back: the browser, the waiting
    /// request's reference and the callback path (the provider consented).
    static func toCallback(_ f: Fixture, browser: inout OAuthAuthorizeTests.Browser, nonce: String = "rp-nonce") async throws
        -> (reference: String, callback: String)
    {
        let (_, challenge) = OAuthAuthorizeTests.pkce()
        let start = try await browser.get("/apps/\(f.appId)/oauth/authorize?\(f.base.authorizeQuery(challenge: challenge, extra: [("nonce", nonce)]))")
        try #require(start.status == .seeOther, "\(start.status) \(start.text)")
        let page = try await browser.get(try #require(start.headers[.location]))
        try #require(page.status == .ok, "\(page.text)")
        let reference = try #require(OAuthAuthorizeTests.hidden("r", in: page.text))
        // The page's button for the provider, its name escaped.
        let button = "/apps/\(f.appId)/oauth/upstream/\(f.providerId)/start?r=\(AuthorizationRules.formEncode(reference))"
        #expect(page.text.contains("href=\"\(button)\""), "\(page.text)")
        #expect(page.text.contains("Acme &lt;SSO&gt;"))
        let started = try await browser.get(button)
        try #require(started.status == .seeOther, "\(started.status) \(started.text)")
        let back = try await f.idp.authorize(try #require(started.headers[.location]))
        let prefix = "http://localhost:8080"
        try #require(back.hasPrefix("\(prefix)/apps/\(f.appId)/oauth/upstream/callback?"), "\(back)")
        return (reference, String(back.dropFirst(prefix.count)))
    }

    static func sessions(subject: String, app: App) async throws -> Int {
        try #require(try await TestEnvironment.value(
            """
            SELECT count(*)::int FROM sessions s JOIN identities i ON i.id = s.identity_id
            WHERE i.app_ref = \(app.ref) AND i.kind = 'oidc' AND i.subject = \(subject) AND s.method = 'oidc'
            """, as: Int.self))
    }

    @Test("hosted page: the provider's button, its code exchanged and ID token checked, an oidc account and session, the client's code")
    func hostedSignIn() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let email = "up\(Secrets.hexIdentifier().prefix(8))@example.com"
            await f.idp.user(subject: "alice-1", email: email)
            var browser = OAuthAuthorizeTests.Browser(api: api)
            let (reference, callback) = try await Self.toCallback(f, browser: &browser)
            let done = try await browser.get(callback)
            #expect(done.status == .seeOther, "\(done.status) \(done.text)")
            let resume = try #require(done.headers[.location])
            #expect(resume.hasPrefix("/apps/\(f.appId)/oauth/authorize/resume?r=\(AuthorizationRules.formEncode(reference))&code="), "\(resume)")
            #expect(browser.cookies.keys.contains("cosync-sso-\(f.appId)"))
            let client = try await browser.get(resume)
            #expect(client.status == .found, "\(client.text)")
            let location = try #require(client.headers[.location])
            let items = OAuthAuthorizeTests.queryItems(location)
            #expect(location.hasPrefix(OAuthAuthorizeTests.redirect + "?") && items["code"] != nil && items["state"] == "st-123", "\(location)")
            // The code stands for an oidc session of a new account whose handle is the verified e-mail.
            let session = try await OAuthAuthorizeTests.session(ofCode: items["code"])
            let issuer = await f.idp.issuer
            let row = try #require(try await TestEnvironment.value(
                """
                SELECT u.handle || ' ' || s.method || ' ' || i.kind || ' ' || i.subject FROM sessions s JOIN users u ON u.id = s.user_id
                JOIN identities i ON i.id = s.identity_id WHERE s.id = \(session)
                """, as: String.self))
            #expect(row == "\(email) oidc oidc \(issuer)|alice-1")
            let amr = try await TestEnvironment.value("SELECT array_length(amr, 1) FROM oauth_codes WHERE session_id = \(session)", as: Int?.self)
            #expect(amr == .some(nil))

            // The same state again: taken once.
            let replay = try await browser.get(callback)
            #expect(replay.status == .badRequest && replay.headers[.location] == nil)
            // The same provider account in another browser: the same account, another session.
            var second = OAuthAuthorizeTests.Browser(api: api)
            let (_, again) = try await Self.toCallback(f, browser: &second)
            #expect(try await second.get(again).status == .seeOther)
            #expect(try await Self.sessions(subject: "\(issuer)|alice-1", app: f.app) == 2)
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM users WHERE app_ref = \(f.app.ref) AND login_provider = 'oidc'", as: Int.self) == 1)
        }
    }

    @Test("hosted page refusals: wrong nonce, another browser, the provider's error, a foreign iss, a taken e-mail; an unverified e-mail is no handle")
    func hostedRefusals() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let issuer = await f.idp.issuer

            // An ID token whose nonce is not this sign-in's.
            await f.idp.user(subject: "bob", email: nil)
            await f.idp.setTamper(["nonce": .string("someone-elses")])
            var browser = OAuthAuthorizeTests.Browser(api: api)
            var (_, callback) = try await Self.toCallback(f, browser: &browser)
            var reply = try await browser.get(callback)
            #expect(reply.status == .badRequest && reply.text.contains("nonce"), "\(reply.status) \(reply.text)")
            #expect(reply.text.contains("/oauth/login?r="), "the way back to the form")
            await f.idp.setTamper(["aud": .string("another-client")])
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            reply = try await browser.get(callback)
            #expect(reply.status == .badRequest && reply.text.contains("aud"), "\(reply.text)")
            await f.idp.setTamper(["exp": .int(Int(Date().timeIntervalSince1970) - 600)])
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            reply = try await browser.get(callback)
            #expect(reply.status == .badRequest && reply.text.contains("expired"), "\(reply.text)")
            await f.idp.setTamper([:])
            #expect(try await Self.sessions(subject: "\(issuer)|bob", app: f.app) == 0)

            // The callback in a browser that did not start the sign-in (no binding cookie, or another one).
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            var stranger = OAuthAuthorizeTests.Browser(api: api)
            _ = try await stranger.get("/apps/\(f.appId)/oauth/authorize?\(f.base.authorizeQuery(challenge: OAuthAuthorizeTests.pkce().challenge))")
            #expect(stranger.cookies.keys.contains("cosync-browser"))
            reply = try await stranger.get(callback)
            #expect(reply.status == .badRequest && reply.headers[.location] == nil, "\(reply.status)")
            // ... and that state is spent: the right browser cannot use it afterwards either.
            #expect(try await browser.get(callback).status == .badRequest)
            #expect(try await Self.sessions(subject: "\(issuer)|bob", app: f.app) == 0)

            // The provider answers an error, or names another issuer (RFC 9207).
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            let state = try #require(OAuthAuthorizeTests.queryItems("http://x" + callback)["state"])
            reply = try await browser.get("/apps/\(f.appId)/oauth/upstream/callback?error=access_denied&state=\(AuthorizationRules.formEncode(state))")
            #expect(reply.status == .badRequest && reply.text.contains("access_denied"), "\(reply.text)")
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            reply = try await browser.get(callback + "&iss=" + AuthorizationRules.formEncode("https://evil.example.com"))
            #expect(reply.status == .badRequest, "\(reply.text)")

            // A verified e-mail that a password account holds: refused, never joined.
            await f.idp.user(subject: "carol", email: f.base.handle.uppercased())
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            reply = try await browser.get(callback)
            #expect(reply.status == .badRequest && reply.text.contains("e-mail"), "\(reply.text)")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM identities WHERE app_ref = \(f.app.ref) AND kind = 'oidc'", as: Int.self) == 0)
            // The same address unverified: a new account with a generated handle.
            await f.idp.user(subject: "carol", email: f.base.handle, verified: false)
            browser = OAuthAuthorizeTests.Browser(api: api)
            (_, callback) = try await Self.toCallback(f, browser: &browser)
            reply = try await browser.get(callback)
            #expect(reply.status == .seeOther, "\(reply.text)")
            let handle = try await TestEnvironment.value(
                "SELECT u.handle FROM users u JOIN identities i ON i.user_id = u.id WHERE i.app_ref = \(f.app.ref) AND i.subject = \("\(issuer)|carol")",
                as: String.self)
            #expect(handle?.hasPrefix("oidc_") == true, "\(String(describing: handle))")

            // A disabled provider has no button and starts nothing.
            let path = "\(f.path)/\(f.providerId)"
            #expect(try await api.call(.patch, path, json: .object(["enabled": .bool(false)])).status == .ok)
            browser = OAuthAuthorizeTests.Browser(api: api)
            let start = try await browser.get("/apps/\(f.appId)/oauth/authorize?\(f.base.authorizeQuery(challenge: OAuthAuthorizeTests.pkce().challenge))")
            let page = try await browser.get(try #require(start.headers[.location]))
            #expect(!page.text.contains("/oauth/upstream/"))
            let reference = try #require(OAuthAuthorizeTests.hidden("r", in: page.text))
            let refused = try await browser.get("/apps/\(f.appId)/oauth/upstream/\(f.providerId)/start?r=\(AuthorizationRules.formEncode(reference))")
            #expect(refused.status == .badRequest && refused.headers[.location] == nil)
            // Without the binding cookie, nothing starts.
            var bare = OAuthAuthorizeTests.Browser(api: api)
            #expect(try await bare.get("/apps/\(f.appId)/oauth/upstream/\(f.providerId)/start?r=\(AuthorizationRules.formEncode(reference))").status == .badRequest)
        }
    }

    @Test("a native app's ID token (RFC 8693 core): the provider by iss, aud among the client ids, signature, exp; refusals are invalid_grant")
    func exchange() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let services = try await TestEnvironment.services()
            let client = try await OAuthAssertionTests.makeClient(app: f.app, grants: [.tokenExchange])
            let origin = ClientOrigin(address: "203.0.113.9", userAgent: "native")
            func exchange(_ token: String) async -> Result<UpstreamSignIn.Result, OAuthError> {
                do throws(OAuthError) {
                    return .success(try await services.oauth.upstreamSignIn.exchange(app: f.app, client: client, idToken: token, origin: origin))
                } catch {
                    return .failure(error)
                }
            }
            func refusal(_ token: String) async -> String? {
                if case .failure(let error) = await exchange(token) { return error.code }
                return nil
            }
            await f.idp.user(subject: "dave", email: "dave\(Secrets.hexIdentifier().prefix(6))@example.com")
            let native = try await f.idp.idToken(aud: .string("native-app"), nonce: "app-nonce")
            guard case .success(let first) = await exchange(native) else { Issue.record("the native app's ID token was refused"); return }
            guard case .success(let second) = await exchange(try await f.idp.idToken(aud: .string(f.idp.clientId), nonce: nil)) else {
                Issue.record("the web client id's ID token was refused"); return
            }
            #expect(first.user.id == second.user.id && first.sessionId != second.sessionId)

            #expect(await refusal(try await f.idp.idToken(aud: .string("someone-else"), nonce: nil)) == "invalid_grant")
            #expect(await refusal(try await f.idp.idToken(aud: .array([.string("native-app"), .string("x")]), nonce: nil)) == "invalid_grant")
            await f.idp.setTamper(["iss": .string("https://unknown.example.com")])
            #expect(await refusal(try await f.idp.idToken(aud: .string("native-app"), nonce: nil)) == "invalid_grant")
            await f.idp.setTamper(["exp": .int(Int(Date().timeIntervalSince1970) - 120)])
            #expect(await refusal(try await f.idp.idToken(aud: .string("native-app"), nonce: nil)) == "invalid_grant")
            await f.idp.setTamper(["iat": .null])
            #expect(await refusal(try await f.idp.idToken(aud: .string("native-app"), nonce: nil)) == "invalid_grant")
            await f.idp.setTamper([:])
            // Signed by another key that claims the provider's kid.
            let forger = try await BackendKey.make(.rs256, kid: f.idp.key.kid)
            let now = Int(Date().timeIntervalSince1970)
            let forged = try await forger.sign([
                "iss": .string(await f.idp.issuer), "aud": .string("native-app"), "sub": .string("dave"), "exp": .int(now + 60), "iat": .int(now),
            ])
            #expect(await refusal(forged) == "invalid_grant")
            #expect(await refusal("not-a-jwt") == "invalid_grant")

            // Through the token endpoint (RFC 8693): an access token of the same account.
            let reply = try await OAuthAssertionTests.tokenRequest(
                OAuthAssertionTests.Fixture(api: api, appId: f.appId, app: f.app, client: client, oauth: services.oauth), [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", native),
                    ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
                ], client: client)
            #expect(reply.status == .ok, "\(reply.text)")
            #expect(reply.object["issued_token_type"] == .string("urn:ietf:params:oauth:token-type:access_token"))
            let access = try #require(reply.object["access_token"]?.stringValue.flatMap { Base64URL.jwtPart($0, 1) })
            #expect(access["sub"] == .string(first.user.id.uuidString.lowercased()))
        }
    }

    @Test("admin API: discovery fetched and checked, the secret sealed and never shown, one provider per issuer, patch and delete")
    func admin() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let issuer = await f.idp.issuer
            let shown = try await api.call(.get, "\(f.path)/\(f.providerId)")
            #expect(shown.status == .ok)
            let view = shown.object
            #expect(view["issuer"] == .string(issuer) && view["tokenEndpoint"] == .string("\(issuer)/token"))
            #expect(view["hasClientSecret"] == .bool(true) && view["tokenAuthMethod"] == .string("client_secret_basic"))
            #expect(view["redirectUri"] == .string("http://localhost:8080/apps/\(f.appId)/oauth/upstream/callback"))
            #expect(view["scopes"] == .array([.string("openid"), .string("email"), .string("profile")]))
            #expect(!shown.text.contains(f.idp.clientSecret) && view["clientSecret"] == nil)
            let listed = try await api.call(.get, f.path)
            #expect(listed.object["providers"]?.arrayValue?.count == 1 && !listed.text.contains(f.idp.clientSecret))
            // Sealed at rest: the column holds no plaintext and opens only for this provider.
            let id = try #require(UUID(uuidString: f.providerId))
            let sealed = try #require(try await TestEnvironment.value(
                "SELECT client_secret_sealed FROM oauth_upstream_providers WHERE id = \(id)", as: Data.self))
            #expect(sealed.range(of: Data(f.idp.clientSecret.utf8)) == nil)
            let services = try await TestEnvironment.services()
            #expect(try services.oauth.box.openString(sealed, purpose: .upstreamClientSecret(id)) == f.idp.clientSecret)
            #expect((try? services.oauth.box.openString(sealed, purpose: .upstreamClientSecret(UUID()))) == nil)

            func refused(_ body: [String: JSONValue], field: String, status: HTTPResponse.Status = .unprocessableContent) async throws {
                let reply = try await api.call(.post, f.path, json: .object(body))
                #expect(reply.status == status && (status != .unprocessableContent || reply.errorField == field), "\(body): \(reply.status) \(reply.text)")
            }
            let good: [String: JSONValue] = ["name": .string("Again"), "discoveryUrl": .string(issuer), "clientId": .string("c")]
            try await refused(good, field: "discoveryUrl", status: .conflict)
            try await refused(good.merging(["discoveryUrl": .string("\(issuer)/other")]) { $1 }, field: "discoveryUrl")
            try await refused(good.merging(["discoveryUrl": .string("http://idp.example.com")]) { $1 }, field: "discoveryUrl")
            try await refused(good.merging(["discoveryUrl": .string("http://127.0.0.1:1")]) { $1 }, field: "discoveryUrl")
            // The server-side request rule of webhooks: a registered URL that resolves to a private or
            // link-local address is not fetched at all (it would reach the operator's own network).
            for inside in ["https://10.1.2.3/", "https://169.254.169.254/latest", "https://[fd00::1]/"] {
                let reply = try await api.call(.post, f.path, json: .object(good.merging(["discoveryUrl": .string(inside)]) { $1 }))
                #expect(reply.status == .unprocessableContent && reply.text.contains("may not be fetched"), "\(inside): \(reply.status) \(reply.text)")
            }
            try await refused(good.merging(["scopes": .array([.string("email")])]) { $1 }, field: "scopes")
            try await refused(good.merging(["scopes": .array([.string("openid"), .string("a b")])]) { $1 }, field: "scopes")
            try await refused(good.merging(["clientSecret": .int(5)]) { $1 }, field: "clientSecret")
            try await refused(good.merging(["name": .string("")]) { $1 }, field: "name")
            try await refused(good.merging(["colour": .string("red")]) { $1 }, field: "colour")

            let patched = try await api.call(.patch, "\(f.path)/\(f.providerId)", json: .object([
                "name": .string("Acme"), "clientSecret": .null, "scopes": .array([.string("openid")]),
            ]))
            #expect(patched.status == .ok, "\(patched.text)")
            #expect(patched.object["hasClientSecret"] == .bool(false) && patched.object["tokenAuthMethod"] == .string("none"))
            #expect(patched.object["name"] == .string("Acme") && patched.object["scopes"] == .array([.string("openid")]))
            #expect(try await api.call(.delete, "\(f.path)/\(f.providerId)").status == .noContent)
            #expect(try await api.call(.get, "\(f.path)/\(f.providerId)").status == .notFound)
            #expect(try await api.call(.get, "\(f.path)/not-a-uuid").status == .notFound)
        }
    }

    @Test("a URL an app registers reaches a loopback address only where the operator allows it (discovery, a backend's JWK set)")
    func loopbackOnlyWhereTheOperatorAllows() async throws {
        try await TestEnvironment.withAPI { api in
            let idp = try await FakeOpenIDProvider.start()
            let issuer = await idp.issuer
            let base = try await OAuthAuthorizeTests.fixture(api)
            let services = try await TestEnvironment.services()
            let app = try #require(try await services.apps.cachedApp(appId: base.appId))
            let o = services.oauth
            // A server whose operator did not allow outgoing calls to loopback (the production default).
            let strict = OAuthServices(
                client: o.client, apps: o.apps, tokens: o.tokens, flows: o.flows, box: o.box, publicURL: o.publicURL,
                outbound: ClientKeys.publicOnly, logger: o.logger)
            let provider: [String: JSONValue] = ["name": .string("Loopback"), "discoveryUrl": .string(issuer), "clientId": .string(idp.clientId)]
            await #expect(throws: (any Error).self) { _ = try await strict.upstreamProviders.create(app: app, input: provider, actor: "test") }
            do {
                _ = try await strict.upstreamProviders.create(app: app, input: provider, actor: "test")
            } catch {
                #expect(String(describing: error).contains("loopback"), "\(error)")
            }
            let key: [String: JSONValue] = ["issuer": .string("https://backend.example.com"), "jwksUri": .string("\(issuer)/jwks")]
            await #expect(throws: (any Error).self) { _ = try await strict.assertionKeys.create(app: app, input: key, actor: "test") }
            let providers = try await strict.upstreamProviders.list(app: app)
            let keys = try await strict.assertionKeys.list(app: app)
            #expect(providers.isEmpty && keys.isEmpty)
            // The test environment's operator allows http to 127.0.0.0/8 (COSYNC_WEBHOOK_ALLOW_HTTP, _CIDRS): the same succeed.
            #expect(try await o.upstreamProviders.create(app: app, input: provider, actor: "test").issuer == issuer)
            _ = try await o.assertionKeys.create(app: app, input: key, actor: "test")
        }
    }

    @Test("housekeeping removes sign-ins nobody finished")
    func unfinishedSignInsArePurged() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            var browser = OAuthAuthorizeTests.Browser(api: api)
            _ = try await Self.toCallback(f, browser: &browser)
            let count = { try await TestEnvironment.value("SELECT count(*)::int FROM oauth_upstream_logins WHERE app_ref = \(f.app.ref)", as: Int.self) }
            #expect(try await count() == 1)
            let services = try await TestEnvironment.services()
            _ = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            #expect(try await count() == 1)
            try await TestEnvironment.sql("UPDATE oauth_upstream_logins SET expires_at = now() - interval '1 second' WHERE app_ref = \(f.app.ref)")
            _ = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            #expect(try await count() == 0)
        }
    }
}
