import CosyncAuth
import Crypto
import Foundation
import HTTPTypes
import JWTKit
import PostgresNIO
import Testing

/// The authorization endpoint, pushed requests, the hosted login page and RP-initiated logout
/// (issue 22, item 3 and the logout of item 7), through the router as a browser and a client use them.
@Suite("OAuth: authorization endpoint, hosted login page, PAR and logout")
struct OAuthAuthorizeTests {
    static let redirect = "com.example.app:/callback"
    static let logoutRedirect = "com.example.app:/signed-out"

    /// An app with a user (password "pw") and a public client (or a confidential one, client_secret_basic).
    struct Fixture {
        let api: API
        let appId: String
        let sdk: SDK
        let clientId: String
        let handle: String
        var issuer: String { "http://localhost:8080/apps/\(appId)" }
        var base: String { "/apps/\(appId)" }

        /// `GET /oauth/authorize` query parameters for this client, with PKCE.
        func authorizeQuery(challenge: String, state: String = "st-123", drop: Set<String> = [], extra: [(String, String)] = []) -> String {
            let params: [(String, String)] = [
                ("response_type", "code"), ("client_id", clientId), ("redirect_uri", OAuthAuthorizeTests.redirect), ("scope", "openid profile"),
                ("state", state), ("code_challenge", challenge), ("code_challenge_method", "S256"),
            ].filter { !drop.contains($0.0) } + extra
            return OAuthAuthorizeTests.form(params)
        }

        func userId() async throws -> UUID {
            try #require(try await TestEnvironment.value(
                "SELECT u.id FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appId) AND lower(u.handle) = \(handle)", as: UUID.self))
        }
    }

    static func form(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(AuthorizationRules.formEncode($0.0))=\(AuthorizationRules.formEncode($0.1))" }.joined(separator: "&")
    }

    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = Base64URL.encode(Secrets.randomBytes(32))
        return (verifier, Base64URL.encode(SHA256.hash(data: Data(verifier.utf8))))
    }

    static func fixture(_ api: API, settings: [String: JSONValue] = [:], redirectURIs: [String] = [redirect], confidential: Bool = false) async throws -> Fixture {
        var all = settings
        all["signupFlow"] = all["signupFlow"] ?? .string("none")
        let created = try await api.createApp("OAuth Authorize", settings: all)
        let appId = created.string("appId")
        let sdk = SDK(api: api, appToken: created.string("appToken"))
        let handle = "oa\(Secrets.hexIdentifier().prefix(10))@example.com"
        let signup = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))])
        try #require(signup.status == .ok, "\(signup.text)")
        let clientId = "client-\(Secrets.hexIdentifier().prefix(12))"
        try await TestEnvironment.sql(
            """
            INSERT INTO oauth_clients (app_ref, client_id, name, kind, auth_method, secret_hash, redirect_uris, post_logout_redirect_uris, grant_types,
                scopes, access_token_seconds, refresh_sliding_seconds, refresh_absolute_seconds, refresh_grace_seconds, dpop_required)
            SELECT id, \(clientId), 'Test client', \(confidential ? "confidential" : "public"), \(confidential ? "client_secret_basic" : "none"),
                \(confidential ? Secrets.sha256("secret") : nil), \(redirectURIs), \([logoutRedirect]), \(["authorization_code", "refresh_token"]),
                \(["openid", "profile", "email", "offline_access"]), 600, 86400, 2592000, 30, false
            FROM apps WHERE app_id = \(appId)
            """)
        return Fixture(api: api, appId: appId, sdk: sdk, clientId: clientId, handle: handle)
    }

    /// A browser: sends back the cookies the server set.
    struct Browser {
        let api: API
        var cookies: [String: String] = [:]

        mutating func get(_ path: String) async throws -> API.Reply {
            try await send(.get, path, body: nil)
        }

        mutating func post(_ path: String, _ pairs: [(String, String)]) async throws -> API.Reply {
            try await send(.post, path, body: OAuthAuthorizeTests.form(pairs))
        }

        mutating func send(_ method: HTTPRequest.Method, _ path: String, body: String?) async throws -> API.Reply {
            var headers: HTTPFields = [:]
            if !cookies.isEmpty { headers[.cookie] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
            let reply = try await api.call(method, path, token: nil, body: body, headers: headers, contentType: "application/x-www-form-urlencoded")
            for line in reply.headers[values: .setCookie] {
                let pair = line.split(separator: ";")[0]
                guard let eq = pair.firstIndex(of: "=") else { continue }
                let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
                if line.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = value }
            }
            return reply
        }
    }

    /// The session a code was issued on.
    static func session(ofCode code: String?) async throws -> UUID {
        let code = try #require(code)
        return try #require(try await TestEnvironment.value("SELECT session_id FROM oauth_codes WHERE code_hash = \(Secrets.sha256(code))", as: UUID.self))
    }

    static func hidden(_ name: String, in html: String) -> String? {
        guard let regex = try? Regex("name=\"\(name)\" value=\"([^\"]*)\"") , let match = html.firstMatch(of: regex) else { return nil }
        return match.output[1].substring.map(String.init)
    }

    static func queryItems(_ location: String) -> [String: String] {
        var out: [String: String] = [:]
        for item in URLComponents(string: location)?.queryItems ?? [] { out[item.name] = item.value }
        return out
    }

    /// Authorize, show the page, sign in with the password: the redirect to the client.
    static func signIn(_ f: Fixture, _ browser: inout Browser, challenge: String, extra: [(String, String)] = []) async throws -> String {
        let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: extra))")
        try #require(start.status == .seeOther, "\(start.status) \(start.text)")
        let page = try await browser.get(try #require(start.headers[.location]))
        try #require(page.status == .ok, "\(page.text)")
        let csrf = try #require(hidden("csrf", in: page.text)), reference = try #require(hidden("r", in: page.text))
        let signed = try await browser.post(
            "\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
        try #require(signed.status == .seeOther, "\(signed.status) \(signed.text)")
        let resume = try #require(signed.headers[.location])
        #expect(resume.hasPrefix("\(f.base)/oauth/authorize/resume?"))
        let done = try await browser.get(resume)
        try #require(done.status == .found, "\(done.text)")
        return try #require(done.headers[.location])
    }

    @Test("refusals: unknown client and bad redirect URIs are pages (never redirects); PKCE, scope and response_type go back to the client")
    func refusals() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)

            // Before the redirect URI is trusted: an HTML page, no Location.
            for query in [
                f.authorizeQuery(challenge: challenge).replacingOccurrences(of: f.clientId, with: "no-such-client"),
                f.authorizeQuery(challenge: challenge, drop: ["client_id"]),
                f.authorizeQuery(challenge: challenge, drop: ["redirect_uri"], extra: [("redirect_uri", "com.evil.app:/callback")]),
                f.authorizeQuery(challenge: challenge, drop: ["redirect_uri"], extra: [("redirect_uri", Self.redirect + "/x")]),
                f.authorizeQuery(challenge: challenge) + "&state=again",
            ] {
                let reply = try await browser.get("\(f.base)/oauth/authorize?\(query)")
                #expect(reply.status == .badRequest, "\(query): \(reply.status)")
                #expect(reply.headers[.location] == nil, "\(query)")
                #expect(reply.headers[.contentType]?.hasPrefix("text/html") == true)
                #expect(reply.headers[.init("X-Frame-Options")!] == "DENY")
            }

            // After: the error goes back to the client, with state and iss (RFC 9207).
            let cases: [(String, String, String)] = [
                ("no PKCE", f.authorizeQuery(challenge: challenge, drop: ["code_challenge", "code_challenge_method"]), "invalid_request"),
                ("plain PKCE", f.authorizeQuery(challenge: challenge, drop: ["code_challenge_method"], extra: [("code_challenge_method", "plain")]), "invalid_request"),
                ("no method", f.authorizeQuery(challenge: challenge, drop: ["code_challenge_method"]), "invalid_request"),
                ("bad scope", f.authorizeQuery(challenge: challenge, drop: ["scope"], extra: [("scope", "openid admin")]), "invalid_scope"),
                ("token", f.authorizeQuery(challenge: challenge, drop: ["response_type"], extra: [("response_type", "token")]), "unsupported_response_type"),
                ("max_age", f.authorizeQuery(challenge: challenge, extra: [("max_age", "-5")]), "invalid_request"),
                ("prompt", f.authorizeQuery(challenge: challenge, extra: [("prompt", "none login")]), "invalid_request"),
            ]
            for (name, query, code) in cases {
                let reply = try await browser.get("\(f.base)/oauth/authorize?\(query)")
                #expect(reply.status == .found, "\(name): \(reply.status) \(reply.text)")
                let location = reply.headers[.location] ?? ""
                #expect(location.hasPrefix(Self.redirect + "?"), "\(name): \(location)")
                let items = Self.queryItems(location)
                #expect(items["error"] == code, "\(name): \(location)")
                #expect(items["state"] == "st-123" && items["iss"] == f.issuer && items["code"] == nil, "\(name): \(location)")
            }
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM oauth_codes c JOIN apps a ON a.id = c.app_ref WHERE a.app_id = \(f.appId)", as: Int.self) == 0)
        }
    }

    @Test("several redirect URIs: redirect_uri is required; a loopback one matches on any port")
    func redirectRules() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, redirectURIs: [Self.redirect, "http://127.0.0.1/cb"])
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let missing = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, drop: ["redirect_uri"]))")
            #expect(missing.status == .badRequest && missing.headers[.location] == nil)
            let loopback = try await browser.get(
                "\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, drop: ["redirect_uri"], extra: [("redirect_uri", "http://127.0.0.1:53117/cb")]))")
            #expect(loopback.status == .seeOther, "\(loopback.text)")
            // The page allows its form to end at the loopback client (CSP form-action).
            let page = try await browser.get(try #require(loopback.headers[.location]))
            #expect(page.headers[.contentSecurityPolicy]?.contains("form-action 'self' http://127.0.0.1:*") == true, "\(page.headers)")
        }
    }

    @Test("a password sign-in through the page's forms ends in a redirect with code, state and iss, a code row and the browser session")
    func passwordSignIn() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, settings: ["locales": .array([.string("EN"), .string("FR")])])
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("nonce", "n-1"), ("login_hint", f.handle)]))")
            #expect(start.status == .seeOther)
            #expect(browser.cookies["cosync-browser"] != nil, "\(start.headers)")
            let page = try await browser.get(try #require(start.headers[.location]))
            #expect(page.status == .ok)
            // The page: strict headers, accessible form, the handle from login_hint.
            let csp = page.headers[.contentSecurityPolicy] ?? ""
            for part in ["default-src 'none'", "style-src 'self'", "img-src 'self' data:", "form-action 'self' com.example.app:", "frame-ancestors 'none'", "base-uri 'none'"] {
                #expect(csp.contains(part), "\(csp)")
            }
            #expect(page.headers[.init("X-Frame-Options")!] == "DENY" && page.headers[.init("Referrer-Policy")!] == "no-referrer")
            #expect(page.headers[.cacheControl] == "no-store")
            #expect(page.text.contains("<html lang=\"en\">") && page.text.contains("<h1>") && page.text.contains("<label for=\"handle\">"))
            #expect(page.text.contains("<label for=\"password\">") && page.text.contains("value=\"\(f.handle)\""))
            #expect(!page.text.contains("<script"), "no script of its own")
            let setCookie = start.headers[values: .setCookie].joined(separator: "\n")
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Lax") && setCookie.contains("Path=/"))
            let css = try await browser.get("\(f.base)/oauth/assets/hosted.css")
            #expect(css.status == .ok && css.headers[.contentType]?.hasPrefix("text/css") == true)

            // A wrong password: the form again, with the handle, and an error.
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            let wrong = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "nope")])
            #expect(wrong.status == .unauthorized && wrong.text.contains("role=\"alert\"") && wrong.text.contains("value=\"\(f.handle)\""))

            let signed = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            #expect(signed.status == .seeOther, "\(signed.text)")
            let sso = try #require(browser.cookies["cosync-sso-\(f.appId)"])
            #expect(signed.headers[values: .setCookie].contains { $0.hasPrefix("cosync-sso-\(f.appId)=") && $0.contains("HttpOnly") && $0.contains("SameSite=Lax") })
            let done = try await browser.get(try #require(signed.headers[.location]))
            #expect(done.status == .found)
            let location = try #require(done.headers[.location])
            let items = Self.queryItems(location)
            #expect(location.hasPrefix(Self.redirect + "?") && items["state"] == "st-123" && items["iss"] == f.issuer, "\(location)")
            let code = try #require(items["code"])
            #expect(code.count == 43)

            // The code row: hashed, the session, PKCE, nonce, amr, auth_time.
            let userId = try await f.userId()
            let row = try await TestEnvironment.value(
                """
                SELECT concat_ws('|', c.redirect_uri, c.scope, c.nonce, c.code_challenge, array_to_string(c.amr, ','),
                    (c.user_id = \(userId))::text, (c.auth_time = s.proven_at)::text, (c.expires_at <= now() + interval '61 seconds')::text)
                FROM oauth_codes c JOIN sessions s ON s.id = c.session_id WHERE c.code_hash = \(Secrets.sha256(code))
                """, as: String.self)
            #expect(row == "\(Self.redirect)|openid profile|n-1|\(challenge)|pwd|true|true|true", "\(row ?? "no row")")
            // The browser session (its SHA-256) names the same session; the request row is gone.
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM oauth_browser_sessions b JOIN oauth_codes c ON c.session_id = b.session_id WHERE b.token_hash = \(Secrets.sha256(sso)) AND c.code_hash = \(Secrets.sha256(code))",
                as: Int.self) == 1)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM oauth_requests WHERE handle_hash = \(Secrets.sha256(reference))", as: Int.self) == 0)
            // The resume step works once; the page's request is answered.
            #expect(try await browser.get(try #require(signed.headers[.location])).status == .badRequest)
            #expect(try await browser.get("\(f.base)/oauth/login?r=\(reference)").status == .badRequest)

            // ui_locales picks the page's language among the app's locales.
            let french = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("ui_locales", "fr-CA en"), ("prompt", "login")]))")
            let frenchPage = try await browser.get(try #require(french.headers[.location]))
            #expect(frenchPage.text.contains("<html lang=\"fr\">") && frenchPage.text.contains("Mot de passe"), "\(frenchPage.text)")
        }
    }

    @Test("CSRF: a wrong token, or a request continued by another browser, is refused and signs nobody in")
    func csrf() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let pageURL = try #require(start.headers[.location])
            let page = try await browser.get(pageURL)
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            let userId = try await f.userId()
            let sessionsBefore = try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE user_id = \(userId)", as: Int.self)

            var forged = Array(csrf)
            forged[0] = forged[0] == "A" ? "B" : "A"
            for token in [String(forged), "", "x"] {
                let reply = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", token), ("handle", f.handle), ("password", "pw")])
                #expect(reply.status == .forbidden && reply.headers[.location] == nil, "\(token): \(reply.status)")
            }
            // The token of another request does not do either.
            let other = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let otherPage = try await browser.get(try #require(other.headers[.location]))
            let otherToken = try #require(Self.hidden("csrf", in: otherPage.text))
            #expect(try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", otherToken), ("handle", f.handle), ("password", "pw")]).status == .forbidden)

            // Another browser (no binding cookie, or its own) cannot continue the request.
            var stranger = Browser(api: api)
            #expect(try await stranger.get(pageURL).status == .badRequest)
            _ = try await stranger.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            #expect(try await stranger.get(pageURL).status == .badRequest)
            let replayed = try await stranger.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            #expect(replayed.status == .forbidden)

            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE user_id = \(userId)", as: Int.self) == sessionsBefore)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM oauth_codes WHERE user_id = \(userId)", as: Int.self) == 0)
        }
    }

    @Test("second factor: the password, then the TOTP on the code form, through loginComplete; amr says so")
    func totp() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, settings: ["twoFactorVerification": .string("google")])
            let access = try await f.sdk.login(f.handle, "pw").object.string("access-token")
            let setup = try await f.sdk.post("/api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: access)
            let key = try #require(setup.object["googleSecretKey"]?.stringValue, "\(setup.text)")

            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let page = try await browser.get(try #require(start.headers[.location]))
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            let codeForm = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            #expect(codeForm.status == .ok && codeForm.text.contains("autocomplete=\"one-time-code\""), "\(codeForm.text)")
            let loginToken = try #require(Self.hidden("login_token", in: codeForm.text))
            #expect(Self.hidden("csrf", in: codeForm.text) == csrf)

            let wrong = try await browser.post(
                "\(f.base)/oauth/login/code", [("r", reference), ("csrf", csrf), ("login_token", loginToken), ("code", ReferenceTOTP.code(key: key, offsetSteps: 6))])
            #expect(wrong.status == .unauthorized && wrong.text.contains("role=\"alert\""))
            let right = try await browser.post(
                "\(f.base)/oauth/login/code", [("r", reference), ("csrf", csrf), ("login_token", loginToken), ("code", ReferenceTOTP.code(key: key))])
            #expect(right.status == .seeOther, "\(right.text)")
            let done = try await browser.get(try #require(right.headers[.location]))
            let code = try #require(Self.queryItems(done.headers[.location] ?? "")["code"])
            let amr = try await TestEnvironment.value("SELECT array_to_string(amr, ',') FROM oauth_codes WHERE code_hash = \(Secrets.sha256(code))", as: String.self)
            #expect(amr == "pwd,otp,mfa")
            #expect(try await TestEnvironment.value(
                "SELECT s.method FROM oauth_codes c JOIN sessions s ON s.id = c.session_id WHERE c.code_hash = \(Secrets.sha256(code))", as: String.self)
                == "second_factor")
        }
    }

    @Test("prompt=none: login_required without a browser session; with one, a confidential client's code at once (single sign-on), as without prompt")
    func promptNone() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, confidential: true)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let none = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none")]))")
            #expect(none.status == .found)
            let refused = Self.queryItems(none.headers[.location] ?? "")
            #expect(refused["error"] == "login_required" && refused["state"] == "st-123" && refused["iss"] == f.issuer, "\(refused)")

            let first = Self.queryItems(try await Self.signIn(f, &browser, challenge: challenge))
            let firstSession = try await Self.session(ofCode: first["code"])

            for extra in [[("prompt", "none")], [], [("max_age", "3600")]] {
                let silent = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, state: "s2", extra: extra))")
                #expect(silent.status == .found, "\(extra): \(silent.text)")
                let items = Self.queryItems(silent.headers[.location] ?? "")
                let code = try #require(items["code"], "\(extra): \(items)")
                #expect(items["state"] == "s2" && items["iss"] == f.issuer)
                #expect(try await TestEnvironment.value("SELECT session_id FROM oauth_codes WHERE code_hash = \(Secrets.sha256(code))", as: UUID.self) == firstSession)
            }
            // prompt=login shows the form even so.
            let again = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "login")]))")
            #expect(again.status == .seeOther)
            // A session that ended (any revocation) is no single sign-on.
            try await TestEnvironment.sql("DELETE FROM sessions WHERE id = \(firstSession)")
            let ended = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none")]))")
            #expect(Self.queryItems(ended.headers[.location] ?? "")["error"] == "login_required")
        }
    }

    @Test("max_age: a session proven longer ago signs in again, on the form with the handle filled in")
    func maxAge() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, confidential: true)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let first = Self.queryItems(try await Self.signIn(f, &browser, challenge: challenge))
            let session = try await Self.session(ofCode: first["code"])
            try await TestEnvironment.sql("UPDATE sessions SET proven_at = now() - interval '1 hour' WHERE id = \(session)")

            let none = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none"), ("max_age", "600")]))")
            #expect(Self.queryItems(none.headers[.location] ?? "")["error"] == "login_required")

            let stale = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("max_age", "600")]))")
            #expect(stale.status == .seeOther)
            let page = try await browser.get(try #require(stale.headers[.location]))
            #expect(page.status == .ok && page.text.contains("value=\"\(f.handle)\""), "the form shows the signed-in user's handle")
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            let signed = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            let done = try await browser.get(try #require(signed.headers[.location]))
            let code = try #require(Self.queryItems(done.headers[.location] ?? "")["code"])
            let age = try await TestEnvironment.value(
                "SELECT extract(epoch FROM now() - auth_time)::float8 FROM oauth_codes WHERE code_hash = \(Secrets.sha256(code))", as: Double.self)
            #expect((age ?? .infinity) < 60, "auth_time is the new proof")
            // And the fresh browser session passes max_age from now on.
            let silent = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none"), ("max_age", "600")]))")
            #expect(Self.queryItems(silent.headers[.location] ?? "")["code"] != nil)
        }
    }

    @Test("public client, signed-in browser: prompt=none is interaction_required; otherwise a CSRF-protected \"Continue as\" page whose POST alone issues the code")
    func publicClientContinueAs() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, settings: ["locales": .array([.string("EN"), .string("FR")])])
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            // Without a browser session, prompt=none is still login_required.
            let anonymous = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none")]))")
            #expect(Self.queryItems(anonymous.headers[.location] ?? "")["error"] == "login_required")
            let first = Self.queryItems(try await Self.signIn(f, &browser, challenge: challenge))
            let session = try await Self.session(ofCode: first["code"])
            let codes = { try await TestEnvironment.value("SELECT count(*)::int FROM oauth_codes WHERE session_id = \(session)", as: Int.self) }
            #expect(try await codes() == 1)

            // prompt=none: OpenID Connect Core §3.1.2.6, the user must act: no code.
            let none = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, state: "s-none", extra: [("prompt", "none")]))")
            #expect(none.status == .found)
            let refused = Self.queryItems(none.headers[.location] ?? "")
            #expect(refused["error"] == "interaction_required" && refused["code"] == nil && refused["state"] == "s-none" && refused["iss"] == f.issuer, "\(refused)")

            // Without prompt: the "Continue as" page, not a code.
            let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, state: "s2"))")
            #expect(start.status == .seeOther)
            let location = try #require(start.headers[.location])
            #expect(location.hasPrefix("\(f.base)/oauth/login/continue?r="), "\(location)")
            let page = try await browser.get(location)
            #expect(page.status == .ok)
            #expect(page.text.contains("Continue as \(f.handle)") && page.text.contains("Test client") && page.text.contains("<html lang=\"en\">"))
            #expect(page.text.contains("Use another account") && page.text.contains("aria-describedby=\"continue-help\""))
            let csp = page.headers[.contentSecurityPolicy] ?? ""
            #expect(csp.contains("frame-ancestors 'none'") && csp.contains("form-action 'self' com.example.app:"), "\(csp)")
            #expect(page.headers[HTTPField.Name("X-Frame-Options")!] == "DENY" && page.headers[.cacheControl] == "no-store")
            #expect(try await codes() == 1, "showing the page issues nothing")
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))

            // Refusals: a forged token, the sign-in form's token, another browser with the right token.
            var other = Browser(api: api)
            _ = try await other.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let loginToken = try await TestEnvironment.services().oauth.csrf.token(
                browserKey: try #require(browser.cookies["cosync-browser"]), appId: f.appId, purpose: "login:" + reference)
            for (pairs, who) in [([("r", reference), ("csrf", "forged")], "forged"), ([("r", reference), ("csrf", loginToken)], "login token")] {
                let reply = try await browser.post("\(f.base)/oauth/login/continue", pairs)
                #expect(reply.status == .forbidden && reply.headers[.location] == nil, "\(who): \(reply.status)")
            }
            other.cookies["cosync-sso-\(f.appId)"] = browser.cookies["cosync-sso-\(f.appId)"]
            let stolen = try await other.post("\(f.base)/oauth/login/continue", [("r", reference), ("csrf", csrf)])
            #expect(stolen.status == .forbidden && stolen.headers[.location] == nil)
            #expect(try await codes() == 1)

            // The user continues: the code, through the resume step, on the same session.
            let chosen = try await browser.post("\(f.base)/oauth/login/continue", [("r", reference), ("csrf", csrf)])
            #expect(chosen.status == .seeOther, "\(chosen.text)")
            let resume = try #require(chosen.headers[.location])
            #expect(resume.hasPrefix("\(f.base)/oauth/authorize/resume?"))
            let done = try await browser.get(resume)
            let items = Self.queryItems(done.headers[.location] ?? "")
            #expect(done.status == .found && items["state"] == "s2" && items["iss"] == f.issuer)
            #expect(try await Self.session(ofCode: items["code"]) == session)
            // Used once.
            #expect(try await browser.post("\(f.base)/oauth/login/continue", [("r", reference), ("csrf", csrf)]).status == .badRequest)

            // "Use another account" is the sign-in form; prompt=login goes there at once; the page speaks French when asked.
            let again = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("ui_locales", "fr")]))")
            let french = try await browser.get(try #require(again.headers[.location]))
            #expect(french.text.contains("Continuer en tant que \(f.handle)") && french.text.contains("<html lang=\"fr\">"), "\(french.text)")
            let otherURL = try #require(try Regex("href=\"([^\"]*/oauth/login\\?r=[^\"]*)\"").firstMatch(in: french.text)?.output[1].substring)
            let form = try await browser.get(String(otherURL).replacingOccurrences(of: "&amp;", with: "&"))
            #expect(form.status == .ok && form.text.contains("name=\"password\""))
            let login = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "login")]))")
            #expect(login.headers[.location]?.hasPrefix("\(f.base)/oauth/login?r=") == true)
            // A session that ended: the continue page falls back to the sign-in form, and its POST issues nothing.
            let last = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let lastPage = try await browser.get(try #require(last.headers[.location]))
            let lastCSRF = try #require(Self.hidden("csrf", in: lastPage.text)), lastRef = try #require(Self.hidden("r", in: lastPage.text))
            try await TestEnvironment.sql("DELETE FROM sessions WHERE id = \(session)")
            #expect(try await browser.get("\(f.base)/oauth/login/continue?r=\(AuthorizationRules.formEncode(lastRef))").text.contains("name=\"password\""))
            let late = try await browser.post("\(f.base)/oauth/login/continue", [("r", lastRef), ("csrf", lastCSRF)])
            #expect(late.headers[.location] == nil)
        }
    }

    @Test("the resume step answers only in the browser that started the request (its binding cookie)")
    func resumeBinding() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let page = try await browser.get(try #require(start.headers[.location]))
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            let signed = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            let resume = try #require(signed.headers[.location])

            // Another browser (its own binding cookie), and one without any: the error page, no redirect.
            var other = Browser(api: api)
            _ = try await other.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            #expect(other.cookies["cosync-browser"] != nil && other.cookies["cosync-browser"] != browser.cookies["cosync-browser"])
            var bare = Browser(api: api)
            for (name, reply) in [("other", try await other.get(resume)), ("no cookie", try await bare.get(resume))] {
                #expect(reply.status == .badRequest && reply.headers[.location] == nil, "\(name): \(reply.status)")
                #expect(reply.text.contains("started in another browser"), "\(name)")
            }
            // The browser that started it still gets its code, once.
            let done = try await browser.get(resume)
            #expect(done.status == .found && Self.queryItems(done.headers[.location] ?? "")["code"] != nil, "\(done.text)")
            #expect(try await browser.get(resume).status == .badRequest)
        }
    }

    @Test("PAR: the client pushes the request (201, request_uri), the browser uses it once")
    func pushedRequest() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            let pushedForm = f.authorizeQuery(challenge: challenge, state: "pushed-state")
            let pushed = try await api.call(.post, "\(f.base)/oauth/par", token: nil, body: pushedForm, contentType: "application/x-www-form-urlencoded")
            #expect(pushed.status == .created, "\(pushed.text)")
            #expect(pushed.headers[.cacheControl] == "no-store")
            let requestURI = try #require(pushed.object["request_uri"]?.stringValue)
            #expect(requestURI.hasPrefix("urn:ietf:params:oauth:request_uri:") && pushed.object["expires_in"] == .int(90))

            // Refused pushes answer in the RFC 6749 JSON shape.
            let unknown = try await api.call(
                .post, "\(f.base)/oauth/par", token: nil, body: pushedForm.replacingOccurrences(of: f.clientId, with: "nobody"),
                contentType: "application/x-www-form-urlencoded")
            #expect(unknown.status == .unauthorized && unknown.object["error"] == .string("invalid_client"))
            let plain = try await api.call(
                .post, "\(f.base)/oauth/par", token: nil, body: pushedForm.replacingOccurrences(of: "code_challenge_method=S256", with: "code_challenge_method=plain"),
                contentType: "application/x-www-form-urlencoded")
            #expect(plain.status == .badRequest && plain.object["error"] == .string("invalid_request"))

            var browser = Browser(api: api)
            let query = Self.form([("client_id", f.clientId), ("request_uri", requestURI)])
            // The request_uri belongs to its client.
            let otherClient = try await Self.fixture(api)
            #expect(try await browser.get("\(otherClient.base)/oauth/authorize?\(Self.form([("client_id", otherClient.clientId), ("request_uri", requestURI)]))").status == .badRequest)
            let start = try await browser.get("\(f.base)/oauth/authorize?\(query)")
            #expect(start.status == .seeOther, "\(start.text)")
            let page = try await browser.get(try #require(start.headers[.location]))
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            let signed = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            let done = try await browser.get(try #require(signed.headers[.location]))
            let items = Self.queryItems(done.headers[.location] ?? "")
            #expect(items["state"] == "pushed-state" && items["code"] != nil, "\(items)")

            // Single use.
            let again = try await browser.get("\(f.base)/oauth/authorize?\(query)")
            #expect(again.status == .badRequest && again.headers[.location] == nil && again.text.contains("invalid_request_uri"))
        }
    }

    /// An ID token of the app's issuer, signed with the app's key and its kid.
    static func idToken(_ f: Fixture, sub: UUID, sid: UUID) async throws -> String {
        let services = try await TestEnvironment.services()
        let kid = try #require(try await TestEnvironment.value(
            "SELECT k.kid FROM app_keys k JOIN apps a ON a.id = k.app_ref WHERE a.app_id = \(f.appId) AND k.active", as: String.self))
        let sealed = try #require(try await TestEnvironment.value("SELECT private_key_sealed FROM app_keys WHERE kid = \(kid)", as: Data.self))
        let pem = try services.configuration.secretBox.openString(sealed, purpose: .appKey(kid: kid))
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: pem), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        let now = Int(Date().timeIntervalSince1970)
        return try await keys.sign(
            IDClaims(iss: f.issuer, sub: sub.uuidString.lowercased(), aud: f.clientId, sid: sid.uuidString.lowercased(), iat: now - 7200, exp: now - 3600),
            kid: JWKIdentifier(string: kid))
    }

    struct IDClaims: JWTPayload {
        let iss: String, sub: String, aud: String, sid: String, iat: Int, exp: Int
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test("logout: with id_token_hint the session ends (session.revoked), the cookie goes and the browser returns to the registered URI")
    func logout() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let items = Self.queryItems(try await Self.signIn(f, &browser, challenge: challenge))
            let session = try await Self.session(ofCode: items["code"])
            let userId = try await f.userId()
            let hint = try await Self.idToken(f, sub: userId, sid: session)

            // Refusals are pages: an unregistered post-logout URI, a hint of another client, a forged hint.
            for query in [
                Self.form([("id_token_hint", hint), ("post_logout_redirect_uri", "com.evil.app:/x")]),
                Self.form([("id_token_hint", hint), ("client_id", "someone-else")]),
                Self.form([("id_token_hint", String(hint.dropLast(4)) + "AAAA")]),
                Self.form([("post_logout_redirect_uri", Self.logoutRedirect)]),
            ] {
                let reply = try await browser.get("\(f.base)/oauth/logout?\(query)")
                #expect(reply.status == .badRequest && reply.headers[.location] == nil, "\(query): \(reply.status)")
            }
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE id = \(session)", as: Int.self) == 1)

            let out = try await browser.get(
                "\(f.base)/oauth/logout?\(Self.form([("id_token_hint", hint), ("post_logout_redirect_uri", Self.logoutRedirect), ("state", "bye")]))")
            #expect(out.status == .found, "\(out.text)")
            #expect(out.headers[.location] == Self.logoutRedirect + "?state=bye")
            #expect(browser.cookies["cosync-sso-\(f.appId)"] == nil, "the browser session's cookie is cleared")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE id = \(session)", as: Int.self) == 0)
            #expect(try await TestEnvironment.value(
                """
                SELECT count(*)::int FROM events WHERE type = 'session.revoked' AND user_id = \(userId)
                  AND body LIKE \("%\"reason\":\"logout\"%") AND body LIKE \("%\(session.uuidString.lowercased())%")
                """, as: Int.self) == 1)
            let none = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none")]))")
            #expect(Self.queryItems(none.headers[.location] ?? "")["error"] == "login_required")
        }
    }

    @Test("logout without id_token_hint: the user confirms on a page (CSRF-protected POST), then the browser's session ends")
    func logoutConfirmed() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let items = Self.queryItems(try await Self.signIn(f, &browser, challenge: challenge))
            let session = try await Self.session(ofCode: items["code"])

            let ask = try await browser.get("\(f.base)/oauth/logout?\(Self.form([("client_id", f.clientId), ("post_logout_redirect_uri", Self.logoutRedirect)]))")
            #expect(ask.status == .ok && ask.headers[.contentSecurityPolicy]?.contains("form-action 'self' com.example.app:") == true)
            let csrf = try #require(Self.hidden("csrf", in: ask.text))
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE id = \(session)", as: Int.self) == 1)
            // A forged confirmation ends nothing.
            let forged = try await browser.post("\(f.base)/oauth/logout", [("csrf", "forged"), ("client_id", f.clientId)])
            #expect(forged.status == .forbidden)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE id = \(session)", as: Int.self) == 1)

            let out = try await browser.post(
                "\(f.base)/oauth/logout", [("csrf", csrf), ("client_id", f.clientId), ("post_logout_redirect_uri", Self.logoutRedirect)])
            #expect(out.status == .found && out.headers[.location] == Self.logoutRedirect, "\(out.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE id = \(session)", as: Int.self) == 0)
            // Without a redirect: the signed-out page.
            let page = try await browser.get("\(f.base)/oauth/logout")
            #expect(page.status == .ok)
            let token = try #require(Self.hidden("csrf", in: page.text))
            let signedOut = try await browser.post("\(f.base)/oauth/logout", [("csrf", token)])
            #expect(signedOut.status == .ok && signedOut.headers[.location] == nil)
        }
    }

    @Test("signup (code flow) and forgot password on the page, through the app's flows")
    func signupAndReset() async throws {
        let sendGrid = try await TestEnvironment.sendGrid.value
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api, settings: ["signupFlow": .string("code")])
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let start = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let page = try await browser.get(try #require(start.headers[.location]))
            let csrf = try #require(Self.hidden("csrf", in: page.text)), reference = try #require(Self.hidden("r", in: page.text))
            #expect(page.text.contains("/oauth/login/signup?r=") && page.text.contains("/oauth/login/forgot?r="))

            let newcomer = "new\(Secrets.hexIdentifier().prefix(8))@example.com"
            let sent = try await browser.post("\(f.base)/oauth/login/signup", [("r", reference), ("csrf", csrf), ("handle", newcomer), ("password", "secret-1")])
            #expect(sent.status == .ok && sent.text.contains("name=\"code\""), "\(sent.text)")
            let mail = try #require(try await sendGrid.waitForMails(to: newcomer).last)
            let code = try #require(sixDigitCode(in: mail.text.isEmpty ? mail.html : mail.text))
            let signed = try await browser.post("\(f.base)/oauth/login/signup/code", [("r", reference), ("csrf", csrf), ("handle", newcomer), ("code", code)])
            #expect(signed.status == .seeOther, "\(signed.text)")
            let done = try await browser.get(try #require(signed.headers[.location]))
            #expect(Self.queryItems(done.headers[.location] ?? "")["code"] != nil)

            // Forgot password: a code by e-mail, a new password, then the sign-in form.
            var other = Browser(api: api)
            let second = try await other.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            let secondPage = try await other.get(try #require(second.headers[.location]))
            let token = try #require(Self.hidden("csrf", in: secondPage.text)), ref2 = try #require(Self.hidden("r", in: secondPage.text))
            let asked = try await other.post("\(f.base)/oauth/login/forgot", [("r", ref2), ("csrf", token), ("handle", newcomer)])
            #expect(asked.status == .ok && asked.text.contains("name=\"code\""), "\(asked.text)")
            // An unknown account gets the same page.
            let unknown = try await other.post(
                "\(f.base)/oauth/login/forgot", [("r", ref2), ("csrf", token), ("handle", "nobody-\(Secrets.hexIdentifier().prefix(6))@example.com")])
            #expect(unknown.status == .ok && unknown.text.contains("name=\"code\""))
            // The newcomer's mails: the signup code, the welcome, the reset code (in any order).
            let mails = try await sendGrid.waitForMails(to: newcomer, count: 3)
            let codes = mails.compactMap { sixDigitCode(in: $0.text.isEmpty ? $0.html : $0.text) }.filter { $0 != code }
            let resetCode = try #require(codes.last, "\(mails.count) mails")
            let changed = try await other.post(
                "\(f.base)/oauth/login/reset", [("r", ref2), ("csrf", token), ("handle", newcomer), ("code", resetCode), ("password", "secret-2")])
            #expect(changed.status == .ok && changed.text.contains("role=\"status\""), "\(changed.text)")
            let back = try await other.post("\(f.base)/oauth/login", [("r", ref2), ("csrf", token), ("handle", newcomer), ("password", "secret-2")])
            #expect(back.status == .seeOther, "\(back.text)")
        }
    }

    @Test("end to end: the page's code at the token endpoint, its ID token as id_token_hint at logout; the refresh token dies with the session")
    func endToEnd() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (verifier, challenge) = Self.pkce()
            var browser = Browser(api: api)
            let items = Self.queryItems(try await Self.signIn(f, &browser, challenge: challenge, extra: [("nonce", "nonce-e2e")]))
            let code = try #require(items["code"])
            let exchange = try await api.call(
                .post, "\(f.base)/oauth/token", token: nil,
                body: Self.form([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", Self.redirect), ("client_id", f.clientId),
                                 ("code_verifier", verifier)]),
                contentType: "application/x-www-form-urlencoded")
            #expect(exchange.status == .ok, "\(exchange.text)")
            let idToken = try #require(exchange.object["id_token"]?.stringValue)
            let refresh = try #require(exchange.object["refresh_token"]?.stringValue)
            let claims = Base64URL.jwtPart(idToken, 1) ?? [:]
            #expect(claims["nonce"] == .string("nonce-e2e") && claims["amr"] == .array([.string("pwd")]) && claims["iss"] == .string(f.issuer))

            let out = try await browser.get(
                "\(f.base)/oauth/logout?\(Self.form([("id_token_hint", idToken), ("post_logout_redirect_uri", Self.logoutRedirect), ("state", "s")]))")
            #expect(out.status == .found && out.headers[.location] == Self.logoutRedirect + "?state=s", "\(out.status) \(out.text)")
            let again = try await api.call(
                .post, "\(f.base)/oauth/token", token: nil,
                body: Self.form([("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", f.clientId)]),
                contentType: "application/x-www-form-urlencoded")
            #expect(again.status == .badRequest && again.object["error"] == .string("invalid_grant"), "\(again.text)")
        }
    }

    @Test("waiting requests are counted per client address: past the window's quota, a page (429) and no row")
    func requestQuota() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await Self.fixture(api)
            let (_, challenge) = Self.pkce()
            var browser = Browser(api: api)
            #expect(try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))").status == .seeOther)
            try await TestEnvironment.sql(
                """
                UPDATE rate_limits SET count = 300 WHERE subject LIKE 'oauth-request-ip:%'
                  AND app_ref = (SELECT id FROM apps WHERE app_id = \(f.appId))
                """)
            let refused = try await browser.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge))")
            #expect(refused.status == .tooManyRequests && refused.headers[.location] == nil, "\(refused.status)")
            let pushed = try await api.call(
                .post, "\(f.base)/oauth/par", token: nil, body: f.authorizeQuery(challenge: challenge), contentType: "application/x-www-form-urlencoded")
            #expect(pushed.status == .tooManyRequests, "\(pushed.text)")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM oauth_requests r JOIN apps a ON a.id = r.app_ref WHERE a.app_id = \(f.appId)", as: Int.self) == 1)
        }
    }

    @Test("the request rules on their own: scopes, PKCE shape, prompt values, redirect building")
    func rules() throws {
        #expect(AuthorizationRules.redirect("https://a.example/cb?x=1", [("code", "a b"), ("state", nil), ("iss", "https://i/apps/1")])
            == "https://a.example/cb?x=1&code=a%20b&iss=https%3A%2F%2Fi%2Fapps%2F1")
        #expect(AuthorizationRules.redirect("com.example.app:/cb", [("error", "login_required")]) == "com.example.app:/cb?error=login_required")
    }
}
