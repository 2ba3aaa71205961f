import CosyncAuth
import CosyncAuthHTTP
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import Testing

/// Passkeys on the OAuth hosted login page (<doc:OAuth>, "Passkeys on the hosted page"): the core
/// (`BrowserPasskey`, through the AppKey flows) driven with a software authenticator, then the
/// page's JSON endpoints and script.
@Suite("OAuth: passkeys on the hosted login page", .serialized)
struct OAuthPasskeyTests {
    typealias K = AppKeyClient
    /// The core tests play a server whose public URL is the app's RP origin.
    static let publicURL = "https://auth.example.test"

    static func passkeys(publicURL: String = publicURL) async throws -> BrowserPasskey {
        let services = try await TestEnvironment.services()
        let oauth = services.oauth
        return OAuthServices(
            client: oauth.client, apps: oauth.apps, tokens: oauth.tokens, flows: oauth.flows, box: oauth.box, publicURL: publicURL,
            logger: oauth.logger
        ).browserPasskey
    }

    static func app(_ appId: String) async throws -> App {
        try #require(try await TestEnvironment.services().apps.cachedApp(appId: appId))
    }

    /// An AppKey app (RP `auth.example.test`) and a user signed up with `authenticator` through the AppKey API.
    static func appWithUser(_ api: API, _ authenticator: SoftwareAuthenticator, settings: [String: JSONValue] = [:]) async throws
        -> (app: App, handle: String)
    {
        let (client, created) = try await K.makeApp(api, settings)
        let handle = K.uniqueEmail()
        _ = try await client.signUp(handle, authenticator, .json)
        return (try await app(created.string("appId")), handle)
    }

    static func authenticator(origin: String = K.origin, rpId: String = K.rpId) -> SoftwareAuthenticator {
        SoftwareAuthenticator(rpId: rpId, origin: origin)
    }

    /// The browser's PublicKeyCredential as the page's script posts it.
    static func credential(_ a: AssertionResponse) -> [String: JSONValue] {
        var response: [String: JSONValue] = [
            "clientDataJSON": .string(a.clientDataJSON), "authenticatorData": .string(a.authenticatorData), "signature": .string(a.signature),
        ]
        if let handle = a.userHandle { response["userHandle"] = .string(handle) }
        return ["id": .string(a.id), "rawId": .string(a.rawId ?? a.id), "type": .string("public-key"), "response": .object(response)]
    }

    static func credential(_ r: RegistrationResponse) -> [String: JSONValue] {
        [
            "id": .string(r.id), "rawId": .string(r.rawId ?? r.id), "type": .string("public-key"),
            "authenticatorAttachment": .string("platform"),
            "response": .object(["clientDataJSON": .string(r.clientDataJSON), "attestationObject": .string(r.attestationObject)]),
        ]
    }

    static func refusal(_ body: () async throws -> some Any) async -> BrowserPasskey.Refusal? {
        do {
            _ = try await body()
            return nil
        } catch let refusal as BrowserPasskey.Refusal {
            return refusal
        } catch {
            Issue.record("not a refusal: \(error)")
            return nil
        }
    }

    static func count(_ query: PostgresQuery) async throws -> Int {
        try await TestEnvironment.value(query, as: Int.self) ?? -1
    }

    // MARK: core

    @Test("a passkey sign-in opens a session like an AppKey login: the passkey's identity, the same audit row and event")
    func signInOpensSession() async throws {
        try await TestEnvironment.withLiveServer { api in
            var authenticator = Self.authenticator()
            let (app, handle) = try await Self.appWithUser(api, authenticator)
            let passkeys = try await Self.passkeys()
            #expect(passkeys.availability(app: app) == .offered)
            let options = try await passkeys.signInOptions(app: app, handle: handle)
            #expect(options.rpId == K.rpId && options.allowCredentials.map(\.credentialId) == [authenticator.credentialId])
            let challenge = try #require(WebAuthn.decodeBase64URL(options.challenge))
            let assertion = authenticator.assert(challenge: challenge, userHandle: nil)
            let signIn = try await passkeys.signIn(app: app, handle: handle.uppercased(), credential: Self.credential(assertion))
            #expect(signIn.handle == handle && signIn.method == .passkey)

            let sid = signIn.sessionId
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE id = \(sid) AND user_id = \(signIn.userId) AND method = 'passkey' AND proven_by = 'passkey'") == 1)
            // The session names the passkey's identity, as an AppKey login's does.
            #expect(try await Self.count("""
                SELECT count(*)::int FROM sessions s JOIN identities i ON i.id = s.identity_id
                WHERE s.id = \(sid) AND i.kind = 'passkey'
                """) == 1)
            #expect(try await Self.count("SELECT count(*)::int FROM audit_log WHERE app_ref = \(app.ref) AND action = 'appkey.loginComplete' AND status = 'success'") == 1)
            #expect(try await Self.count("SELECT count(*)::int FROM events WHERE app_ref = \(app.ref) AND type = 'user.login.succeeded' AND user_id = \(signIn.userId)") == 1)
        }
    }

    @Test("an assertion from another origin, even one the app allows elsewhere, or for another RP ID is refused by the verifier")
    func wrongOriginOrRelyingParty() async throws {
        try await TestEnvironment.withLiveServer { api in
            let android = "android:apk-key-hash:AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_"
            var authenticator = Self.authenticator()
            let (app, handle) = try await Self.appWithUser(
                api, authenticator, settings: ["allowedOrigins": .array([.string(K.origin), .string(android)])])
            let passkeys = try await Self.passkeys()
            // The registered key signs each time; only the origin or the RP ID it reports differs.
            for (origin, rpId, why) in [
                ("https://evil.example.test", K.rpId, "origin"), (android, K.rpId, "origin"), (K.origin, "other.example.test", "relying party"),
            ] {
                var moved = authenticator
                moved.origin = origin
                moved.rpId = rpId
                let options = try await passkeys.signInOptions(app: app, handle: handle)
                let assertion = moved.assert(challenge: try #require(WebAuthn.decodeBase64URL(options.challenge)))
                let refusal = await Self.refusal { try await passkeys.signIn(app: app, handle: handle, credential: Self.credential(assertion)) }
                #expect(refusal?.reason == .passkeyRefused && refusal?.detail.contains(why) == true, "\(origin) \(rpId): \(String(describing: refusal))")
            }
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE app_ref = \(app.ref)") == 1)
            // The honest assertion still signs in.
            let options = try await passkeys.signInOptions(app: app, handle: handle)
            let assertion = authenticator.assert(challenge: try #require(WebAuthn.decodeBase64URL(options.challenge)))
            _ = try await passkeys.signIn(app: app, handle: handle, credential: Self.credential(assertion))
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE app_ref = \(app.ref)") == 2)
        }
    }

    @Test("a replayed assertion is refused: its challenge was spent")
    func replayRefused() async throws {
        try await TestEnvironment.withLiveServer { api in
            var authenticator = Self.authenticator()
            let (app, handle) = try await Self.appWithUser(api, authenticator)
            let passkeys = try await Self.passkeys()
            let options = try await passkeys.signInOptions(app: app, handle: handle)
            let assertion = authenticator.assert(challenge: try #require(WebAuthn.decodeBase64URL(options.challenge)))
            _ = try await passkeys.signIn(app: app, handle: handle, credential: Self.credential(assertion))
            let refusal = await Self.refusal { try await passkeys.signIn(app: app, handle: handle, credential: Self.credential(assertion)) }
            #expect(refusal?.reason == .passkeyRefused && refusal?.detail.contains("challenge") == true, "\(String(describing: refusal))")
        }
    }

    @Test("an unknown credential is refused, and so is an unknown account")
    func unknownCredential() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (app, handle) = try await Self.appWithUser(api, Self.authenticator())
            let passkeys = try await Self.passkeys()
            let options = try await passkeys.signInOptions(app: app, handle: handle)
            var stranger = Self.authenticator()
            let assertion = stranger.assert(challenge: try #require(WebAuthn.decodeBase64URL(options.challenge)))
            let refusal = await Self.refusal { try await passkeys.signIn(app: app, handle: handle, credential: Self.credential(assertion)) }
            #expect(refusal?.reason == .noPasskey, "\(String(describing: refusal))")
            let nobody = await Self.refusal { try await passkeys.signInOptions(app: app, handle: K.uniqueEmail("nobody")) }
            #expect(nobody?.reason == .unknownAccount, "\(String(describing: nobody))")
        }
    }

    @Test("the page offers passkeys only for an AppKey app whose RP covers the public host and allows the public origin")
    func availability() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (client, created) = try await K.makeApp(api)
            let appId = created.string("appId")
            var app = try await Self.app(appId)
            #expect(try await Self.passkeys().availability(app: app) == .offered)
            #expect(try await Self.passkeys(publicURL: "https://login.auth.example.test/").availability(app: app)
                == .originNotAllowed(origin: "https://login.auth.example.test"))
            #expect(try await Self.passkeys(publicURL: "https://example.test").availability(app: app)
                == .rpIdDoesNotCoverHost(host: "example.test", rpId: K.rpId))
            // A sub-domain of the RP ID, once its origin is allowed; a port is part of the origin.
            let patched = try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object([
                "allowedOrigins": .array([.string("https://login.auth.example.test:8443")]),
            ]))
            #expect(patched.status == .ok, "\(patched.text)")
            app = try await Self.app(appId)
            let sub = try await Self.passkeys(publicURL: "https://login.auth.example.test:8443/")
            #expect(sub.availability(app: app) == .offered && sub.pageOrigin == "https://login.auth.example.test:8443")
            #expect(try await Self.passkeys().availability(app: app) == .originNotAllowed(origin: K.origin))
            let refused = await Self.refusal { try await Self.passkeys().signInOptions(app: app, handle: "a@example.com") }
            #expect(refused?.reason == .unavailable && refused?.status == 404)

            let plain = try await Self.app(try await api.createApp("Plain \(Secrets.hexIdentifier().prefix(4))").string("appId"))
            #expect(try await Self.passkeys().availability(app: plain) == .notAppKey)
            _ = client
        }
    }

    @Test("passkey signup on the page: creation options, the new passkey, the code e-mailed, then a session")
    func signup() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (_, created) = try await K.makeApp(api)
            let app = try await Self.app(created.string("appId"))
            let passkeys = try await Self.passkeys()
            #expect(passkeys.offersSignup(app: app))
            let handle = K.uniqueEmail("page")
            let options = try await passkeys.signupOptions(app: app, handle: handle, displayName: "Page User", locale: "FR")
            #expect(options.rpId == K.rpId && options.residentKey == "preferred")
            var authenticator = Self.authenticator()
            let registration = authenticator.register(challenge: try #require(WebAuthn.decodeBase64URL(options.challenge)))
            let pending = try await passkeys.signupConfirm(app: app, handle: handle, credential: Self.credential(registration))
            #expect(pending.handle == handle)
            let wrong = await Self.refusal { try await passkeys.signupComplete(app: app, signupToken: pending.signupToken, code: "000000") }
            #expect(wrong?.reason == .invalidCode, "\(String(describing: wrong))")
            // Another app's page cannot complete it.
            let (_, other) = try await K.makeApp(api)
            let elsewhere = await Self.refusal {
                try await passkeys.signupComplete(app: try await Self.app(other.string("appId")), signupToken: pending.signupToken, code: "000000")
            }
            #expect(elsewhere?.reason == .signupExpired, "\(String(describing: elsewhere))")
            let code = try await K.lastCode(to: handle)
            let signIn = try await passkeys.signupComplete(app: app, signupToken: pending.signupToken, code: code)
            #expect(signIn.handle == handle)
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE id = \(signIn.sessionId) AND method = 'passkey'") == 1)
            #expect(try await Self.count("SELECT count(*)::int FROM users WHERE id = \(signIn.userId) AND locale = 'FR'") == 1)

            // And the new passkey signs in on the page.
            let login = try await passkeys.signInOptions(app: app, handle: handle)
            let assertion = authenticator.assert(challenge: try #require(WebAuthn.decodeBase64URL(login.challenge)))
            _ = try await passkeys.signIn(app: app, handle: handle, credential: Self.credential(assertion))

            let taken = await Self.refusal { try await passkeys.signupOptions(app: app, handle: handle, displayName: "Again", locale: nil) }
            #expect(taken?.reason == .accountExists && taken?.status == 409)
            let closed = try await api.call(.patch, "/admin/v1/apps/\(app.appId)", json: .object(["signupEnabled": .bool(false)]))
            #expect(closed.status == .ok)
            #expect(try await Self.passkeys().offersSignup(app: try await Self.app(app.appId)) == false)
        }
    }

    // MARK: the page (HTTP)

    /// The tests' public URL is `http://localhost:8080`: the page's origin, and the RP ID `localhost`
    /// (what a developer runs locally; the admin API takes only registrable domains, so it is set here).
    static let pageOrigin = "http://localhost:8080"

    /// A browser on the hosted page: its cookies, the waiting request and the page's CSRF token.
    struct Browser {
        let api: API
        var cookies: [String: String] = [:]
        var reference = ""
        var csrf = ""

        var cookieHeader: HTTPFields {
            var headers: HTTPFields = [:]
            if !cookies.isEmpty { headers[.cookie] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
            return headers
        }

        mutating func keep(_ reply: API.Reply) {
            for field in reply.headers[values: .setCookie] {
                let pair = field.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
                guard let eq = pair.firstIndex(of: "=") else { continue }
                let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
                cookies[name] = value.isEmpty ? nil : value
            }
        }

        mutating func get(_ path: String, headers extra: HTTPFields = [:]) async throws -> API.Reply {
            var headers = cookieHeader
            for field in extra { headers.append(field) }
            let reply = try await api.call(.get, path, token: nil, headers: headers)
            keep(reply)
            return reply
        }

        /// A POST of the page's script: JSON, the cookies, the CSRF header (unless `csrf` is nil).
        mutating func post(_ path: String, _ body: [String: JSONValue], csrf: String?, contentType: String = "application/json",
                           origin: String? = OAuthPasskeyTests.pageOrigin) async throws -> API.Reply {
            var headers = cookieHeader
            if let csrf { headers[HTTPField.Name("X-CSRF-Token")!] = csrf }
            if let origin { headers[.origin] = origin }
            var object = body
            if object["request"] == nil { object["request"] = .string(reference) }
            let text = String(decoding: try JSONCoding.encode(JSONValue.object(object)), as: UTF8.self)
            let reply = try await api.call(.post, path, token: nil, body: text, headers: headers, contentType: contentType)
            keep(reply)
            return reply
        }
    }

    /// An AppKey app whose RP is the page's (`localhost`, origin `http://localhost:8080`), a user signed
    /// up with `authenticator` through the AppKey API, and a public client.
    static func pageApp(_ api: API, _ authenticator: SoftwareAuthenticator, settings: [String: JSONValue] = [:]) async throws
        -> (appId: String, handle: String, clientId: String)
    {
        var all = settings
        all["allowedOrigins"] = .array([.string(pageOrigin)])
        let (client, created) = try await K.makeApp(api, all)
        let appId = created.string("appId")
        try await TestEnvironment.sql("UPDATE apps SET settings = settings || '{\"rpId\": \"localhost\"}'::jsonb WHERE app_id = \(appId)")
        for _ in 0..<500 where try await Self.app(appId).settings.rpId != "localhost" { try await Task.sleep(for: .milliseconds(10)) }
        try #require(try await Self.app(appId).settings.rpId == "localhost")
        let handle = K.uniqueEmail()
        _ = try await client.signUp(handle, authenticator, .json)
        let registered = try await api.call(.post, "/admin/v1/apps/\(appId)/oauth/clients", json: .object([
            "name": .string("Passkey page test"), "kind": .string("public"), "redirectUris": .array([.string("com.example.app:/cb")]),
        ]))
        try #require(registered.status == .created, "client: \(registered.text)")
        return (appId, handle, registered.object.string("clientId"))
    }

    static func pageAuthenticator() -> SoftwareAuthenticator { SoftwareAuthenticator(rpId: "localhost", origin: pageOrigin) }

    /// The authorization request, then the sign-in page: answers the page's HTML.
    static func openPage(_ browser: inout Browser, appId: String, clientId: String) async throws -> String {
        let query = [
            "response_type=code", "client_id=\(clientId)", "redirect_uri=com.example.app%3A%2Fcb", "scope=openid", "state=st-1",
            "code_challenge=\(Base64URL.encode(Secrets.sha256("verifier-" + String(repeating: "x", count: 40))))", "code_challenge_method=S256",
        ].joined(separator: "&")
        let authorize = try await browser.get("/apps/\(appId)/oauth/authorize?\(query)")
        try #require(authorize.status == .seeOther, "authorize: \(authorize.status) \(authorize.text)")
        let location = try #require(authorize.headers[.location])
        let page = try await browser.get(location)
        try #require(page.status == .ok, "page: \(page.status) \(page.text)")
        // The script posts with fetch: the page's CSP must allow same-origin connections.
        let csp = page.headers[HTTPField.Name("Content-Security-Policy")!] ?? ""
        #expect(csp.contains("connect-src 'self'") && csp.contains("script-src 'self'"), "\(csp)")
        browser.reference = try #require(Self.attribute("data-request", in: page.text))
        browser.csrf = try #require(Self.attribute("data-csrf", in: page.text))
        return page.text
    }

    static func attribute(_ name: String, in html: String) -> String? {
        guard let start = html.range(of: "\(name)=\"") else { return nil }
        let rest = html[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end]).replacingOccurrences(of: "&#x3D;", with: "=").replacingOccurrences(of: "&amp;", with: "&")
            .replacingOccurrences(of: "&#x2F;", with: "/")
    }

    static func challenge(_ reply: API.Reply) throws -> [UInt8] {
        try #require(reply.object["publicKey"]?["challenge"]?.stringValue.flatMap(WebAuthn.decodeBase64URL), "no challenge: \(reply.text)")
    }

    static func credentialJSON(_ a: AssertionResponse) -> JSONValue { .object(credential(a)) }

    @Test("on the page: the passkey block and its script; options, the assertion, then the password form's continuation to the client with a code")
    func pageSignIn() async throws {
        try await TestEnvironment.withLiveServer { api in
            var authenticator = Self.pageAuthenticator()
            let (appId, handle, clientId) = try await Self.pageApp(api, authenticator)
            var browser = Browser(api: api)
            let html = try await Self.openPage(&browser, appId: appId, clientId: clientId)
            #expect(html.contains("id=\"cosync-passkey\"") && html.contains("id=\"passkey-sign-in\""))
            #expect(html.contains("<script src=\"/apps/\(appId)/oauth/assets/passkey.js\" defer></script>"), "\(html)")
            #expect(html.contains("id=\"passkey-sign-up\""), "signup is offered: the app takes signups")

            let base = "/apps/\(appId)/oauth/login/passkey"
            let options = try await browser.post("\(base)/options", ["handle": .string(handle)], csrf: browser.csrf)
            #expect(options.status == .ok && options.headers[.cacheControl] == "no-store", "\(options.text)")
            #expect(options.object["publicKey"]?["rpId"] == .string("localhost"))
            #expect(options.object["publicKey"]?["allowCredentials"]?.arrayValue?.first?["id"] == .string(Base64URL.encode(authenticator.credentialId)))
            #expect(options.object["publicKey"]?["user"] == nil, "the options do not show the account's name")
            let assertion = authenticator.assert(challenge: try Self.challenge(options))
            let finish = try await browser.post("\(base)/finish", ["handle": .string(handle), "credential": Self.credentialJSON(assertion)], csrf: browser.csrf)
            #expect(finish.status == .ok, "\(finish.text)")
            let location = try #require(finish.object["location"]?.stringValue)
            #expect(location.hasPrefix("/apps/\(appId)/oauth/authorize/resume?r="), "\(location)")
            #expect(browser.cookies["cosync-sso-\(appId)"] != nil, "the browser session's cookie: \(browser.cookies)")

            let resume = try await browser.get(location)
            #expect(resume.status == .found, "\(resume.status) \(resume.text)")
            let redirect = try #require(resume.headers[.location].flatMap(URLComponents.init(string:)))
            #expect(redirect.scheme == "com.example.app" && redirect.path == "/cb")
            let items = Dictionary((redirect.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { a, _ in a }
            let issuer = try await TestEnvironment.services().oauth.issuer(appId: appId)
            #expect(items["state"] == "st-1" && items["iss"] == issuer)
            let code = try #require(items["code"])
            let method = try await TestEnvironment.value(
                "SELECT s.method FROM oauth_codes c JOIN sessions s ON s.id = c.session_id WHERE c.code_hash = \(Secrets.sha256(code))", as: String.self)
            #expect(method == "passkey")
            let amr = try await TestEnvironment.value("SELECT amr FROM oauth_codes WHERE code_hash = \(Secrets.sha256(code))", as: [String].self)
            #expect(amr == ["hwk", "user"])

            // The browser session the passkey sign-in opened: the next request of this browser, from a public
            // client, goes to the "Continue as" page (RFC 8252 §8.6: no code without a user action).
            var query = try #require(URLComponents(string: "/apps/\(appId)/oauth/authorize"))
            query.queryItems = [
                .init(name: "response_type", value: "code"), .init(name: "client_id", value: clientId),
                .init(name: "redirect_uri", value: "com.example.app:/cb"), .init(name: "scope", value: "openid"),
                .init(name: "code_challenge", value: Base64URL.encode(Secrets.sha256("another verifier"))),
                .init(name: "code_challenge_method", value: "S256"),
            ]
            let sso = try await browser.get(try #require(query.string))
            #expect(sso.status == .seeOther && sso.headers[.location]?.contains("/oauth/login/continue?") == true, "\(sso.status) \(sso.headers)")

            // The request is answered: the page's calls for it are refused now.
            let again = try await browser.post("\(base)/options", ["handle": .string(handle)], csrf: browser.csrf)
            #expect(again.status == .badRequest && again.object["error"] == .string("request_expired"), "\(again.text)")
        }
    }

    @Test("the page's calls need its CSRF token, its cookie, JSON and its own origin; refused calls spend no challenge and open no session")
    func csrfRequired() async throws {
        try await TestEnvironment.withLiveServer { api in
            var authenticator = Self.pageAuthenticator()
            let (appId, handle, clientId) = try await Self.pageApp(api, authenticator)
            var browser = Browser(api: api)
            _ = try await Self.openPage(&browser, appId: appId, clientId: clientId)
            let base = "/apps/\(appId)/oauth/login/passkey"
            let options = try await browser.post("\(base)/options", ["handle": .string(handle)], csrf: browser.csrf)
            let assertion = authenticator.assert(challenge: try Self.challenge(options))
            let finish: [String: JSONValue] = ["handle": .string(handle), "credential": Self.credentialJSON(assertion)]

            for path in ["options", "finish", "signup/options", "signup/confirm", "signup/complete"] {
                let missing = try await browser.post("\(base)/\(path)", finish, csrf: nil)
                #expect(missing.status == .forbidden && missing.object["error"] == .string("csrf"), "\(path): \(missing.status) \(missing.text)")
            }
            let wrong = try await browser.post("\(base)/finish", finish, csrf: Base64URL.encode(Secrets.randomBytes(32)))
            #expect(wrong.status == .forbidden && wrong.object["error"] == .string("csrf"))
            // The token of another request of the same browser is not this one's.
            var other = browser
            _ = try await Self.openPage(&other, appId: appId, clientId: clientId)
            let crossed = try await browser.post("\(base)/finish", finish, csrf: other.csrf)
            #expect(crossed.status == .forbidden && crossed.object["error"] == .string("csrf"))
            var cookieless = browser
            cookieless.cookies = [:]
            let noCookie = try await cookieless.post("\(base)/finish", finish, csrf: browser.csrf)
            #expect(noCookie.status == .forbidden && noCookie.object["error"] == .string("csrf"))
            let form = try await browser.post("\(base)/finish", finish, csrf: browser.csrf, contentType: "application/x-www-form-urlencoded")
            #expect(form.status == .unsupportedMediaType)
            let foreign = try await browser.post("\(base)/finish", finish, csrf: browser.csrf, origin: "https://evil.example.test")
            #expect(foreign.status == .forbidden && foreign.object["error"] == .string("csrf"))
            let app = try await Self.app(appId)
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE app_ref = \(app.ref)") == 1, "only the signup's session")

            // The challenge was not spent: the same assertion, with the token, signs in.
            let good = try await browser.post("\(base)/finish", finish, csrf: browser.csrf)
            #expect(good.status == .ok && good.object["location"] != nil, "\(good.text)")
        }
    }

    @Test("on the page: a wrong origin, a replay and an unknown credential are refused in the page's words")
    func pageRefusals() async throws {
        try await TestEnvironment.withLiveServer { api in
            var authenticator = Self.pageAuthenticator()
            let (appId, handle, clientId) = try await Self.pageApp(api, authenticator, settings: ["locales": .array([.string("EN"), .string("FR")])])
            var browser = Browser(api: api)
            _ = try await Self.openPage(&browser, appId: appId, clientId: clientId)
            let base = "/apps/\(appId)/oauth/login/passkey"
            func attempt(_ make: (inout SoftwareAuthenticator, [UInt8]) -> AssertionResponse, _ who: inout SoftwareAuthenticator) async throws -> API.Reply {
                let options = try await browser.post("\(base)/options", ["handle": .string(handle)], csrf: browser.csrf)
                let assertion = make(&who, try Self.challenge(options))
                return try await browser.post("\(base)/finish", ["handle": .string(handle), "credential": Self.credentialJSON(assertion)], csrf: browser.csrf)
            }
            let evil = try await attempt({ a, c in a.assert(challenge: c, clientDataOverride: .init(origin: "https://evil.example.test")) }, &authenticator)
            #expect(evil.status == .badRequest && evil.object["error"] == .string("passkeyRefused"), "\(evil.text)")
            #expect(evil.object["message"] == .string(HostedPasskeyTextProbe.refusedEnglish))
            var stranger = Self.pageAuthenticator()
            let unknown = try await attempt({ a, c in a.assert(challenge: c) }, &stranger)
            #expect(unknown.status == .badRequest && unknown.object["error"] == .string("noPasskey"), "\(unknown.text)")

            let options = try await browser.post("\(base)/options", ["handle": .string(handle)], csrf: browser.csrf)
            let assertion = authenticator.assert(challenge: try Self.challenge(options))
            let body: [String: JSONValue] = ["handle": .string(handle), "credential": Self.credentialJSON(assertion)]
            // The same assertion again, from another browser's page, after it signed in: a replay.
            let first = try await browser.post("\(base)/finish", body, csrf: browser.csrf)
            #expect(first.status == .ok, "\(first.text)")
            var next = Browser(api: api)
            _ = try await Self.openPage(&next, appId: appId, clientId: clientId)
            let replay = try await next.post("\(base)/finish", body, csrf: next.csrf)
            #expect(replay.status == .badRequest && replay.object["error"] == .string("passkeyRefused"), "\(replay.text)")
        }
    }

    @Test("on the page: a new account with a passkey (options, the new credential, the e-mailed code), then the continuation")
    func pageSignup() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (appId, _, clientId) = try await Self.pageApp(api, Self.pageAuthenticator())
            var browser = Browser(api: api)
            _ = try await Self.openPage(&browser, appId: appId, clientId: clientId)
            let base = "/apps/\(appId)/oauth/login/passkey/signup"
            let handle = K.uniqueEmail("newcomer")
            let options = try await browser.post("\(base)/options", ["handle": .string(handle), "displayName": .string("New Comer")], csrf: browser.csrf)
            #expect(options.status == .ok, "\(options.text)")
            let publicKey = try #require(options.object["publicKey"])
            #expect(publicKey["rp"]?["id"] == .string("localhost") && publicKey["user"]?["displayName"] == .string("New Comer"))
            let userId = try #require(publicKey["user"]?["id"]?.stringValue.flatMap(WebAuthn.decodeBase64URL))
            #expect(String(decoding: userId, as: UTF8.self).count == 32, "user.id is the AppKey user id's 32 hex characters")
            var authenticator = Self.pageAuthenticator()
            let registration = authenticator.register(challenge: try Self.challenge(options))
            let confirm = try await browser.post("\(base)/confirm", ["handle": .string(handle), "credential": .object(Self.credential(registration))], csrf: browser.csrf)
            #expect(confirm.status == .ok && confirm.object["handle"] == .string(handle), "\(confirm.text)")
            let token = try #require(confirm.object["signupToken"]?.stringValue)
            let wrong = try await browser.post("\(base)/complete", ["signupToken": .string(token), "code": .string("000000")], csrf: browser.csrf)
            #expect(wrong.status == .badRequest && wrong.object["error"] == .string("invalidCode"), "\(wrong.text)")
            let code = try await K.lastCode(to: handle)
            let complete = try await browser.post("\(base)/complete", ["signupToken": .string(token), "code": .string(code)], csrf: browser.csrf)
            #expect(complete.status == .ok, "\(complete.text)")
            let location = try #require(complete.object["location"]?.stringValue)
            let resume = try await browser.get(location)
            #expect(resume.status == .found && resume.headers[.location]?.hasPrefix("com.example.app:/cb?code=") == true, "\(resume.status)")

            // The user handle the authenticator keeps is one the passkey method accepts: a sign-in that sends it works.
            var again = Browser(api: api)
            _ = try await Self.openPage(&again, appId: appId, clientId: clientId)
            let login = try await again.post("/apps/\(appId)/oauth/login/passkey/options", ["handle": .string(handle)], csrf: again.csrf)
            let assertion = authenticator.assert(challenge: try Self.challenge(login), userHandle: Base64URL.encode(userId))
            let finish = try await again.post(
                "/apps/\(appId)/oauth/login/passkey/finish", ["handle": .string(handle), "credential": Self.credentialJSON(assertion)], csrf: again.csrf)
            #expect(finish.status == .ok && finish.object["location"] != nil, "\(finish.text)")
        }
    }

    @Test("the script: JavaScript, cacheable with an ETag, no sniffing; and no passkey block for an app without passkeys")
    func script() async throws {
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Plain \(Secrets.hexIdentifier().prefix(4))").string("appId")
            let script = try await api.call(.get, "/apps/\(appId)/oauth/assets/passkey.js", token: nil)
            #expect(script.status == .ok && script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(script.headers[.cacheControl] == "public, max-age=3600" && script.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
            #expect(script.text.contains("navigator.credentials.get") && script.text.contains("navigator.credentials.create"))
            let etag = try #require(script.headers[.eTag])
            let cached = try await api.call(.get, "/apps/\(appId)/oauth/assets/passkey.js", token: nil, headers: [.ifNoneMatch: etag])
            #expect(cached.status == .notModified && cached.text.isEmpty)

            // A CosyncAuth app: the page has the password form and no passkey block.
            let registered = try await api.call(.post, "/admin/v1/apps/\(appId)/oauth/clients", json: .object([
                "name": .string("Plain client"), "kind": .string("public"), "redirectUris": .array([.string("com.example.app:/cb")]),
            ]))
            try #require(registered.status == .created, "\(registered.text)")
            var browser = Browser(api: api)
            let query = [
                "response_type=code", "client_id=\(registered.object.string("clientId"))", "redirect_uri=com.example.app%3A%2Fcb", "scope=openid",
                "code_challenge=\(Base64URL.encode(Secrets.sha256("v")))", "code_challenge_method=S256",
            ].joined(separator: "&")
            let authorize = try await browser.get("/apps/\(appId)/oauth/authorize?\(query)")
            let page = try await browser.get(try #require(authorize.headers[.location]))
            #expect(page.status == .ok && page.text.contains("name=\"password\"") && !page.text.contains("cosync-passkey"), "\(page.text)")
        }
    }
}

/// The English text of a refused passkey, as the page answers it.
enum HostedPasskeyTextProbe {
    static let refusedEnglish = "This passkey could not be verified. Please try again."
}
