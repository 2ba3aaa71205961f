import CosyncAuth
import Crypto
import Foundation
import HTTPTypes
import Testing

/// The Portal's pages at the HTTP level (issue 23): security headers, CSRF refusals, role refusals,
/// and the main walk of an operator and a developer. The browser walk (Selenium, axe) is
/// Tests/system/portal.
@Suite("Portal pages")
struct PortalPageTests {
    static func unique(_ name: String) -> String { "\(name)-\(Secrets.hexIdentifier().prefix(10))@portal.test" }

    /// A browser of the Portal: keeps the cookies the server sets, sends forms.
    final class Browser: @unchecked Sendable {
        let api: API
        var cookies: [String: String] = [:]

        init(api: API, session: String? = nil) {
            self.api = api
            if let session { cookies["cosync-portal"] = session }
        }

        func keep(_ reply: API.Reply) {
            for line in reply.headers[values: .setCookie] {
                let pair = line.split(separator: ";", maxSplits: 1).first ?? ""
                guard let eq = pair.firstIndex(of: "=") else { continue }
                let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
                if value.isEmpty || line.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = value }
            }
        }

        var cookieHeader: HTTPFields {
            cookies.isEmpty ? [:] : [.cookie: cookies.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "; ")]
        }

        func get(_ path: String) async throws -> API.Reply {
            let reply = try await api.call(.get, path, token: nil, headers: cookieHeader)
            keep(reply)
            return reply
        }

        func post(_ path: String, _ fields: [(String, String)]) async throws -> API.Reply {
            let body = fields.map { "\(PortalPageTests.encode($0.0))=\(PortalPageTests.encode($0.1))" }.joined(separator: "&")
            let reply = try await api.call(.post, path, token: nil, body: body, headers: cookieHeader, contentType: "application/x-www-form-urlencoded")
            keep(reply)
            return reply
        }
    }

    static func encode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// The value of the first hidden `csrf` field after `marker` (the start of the page when nil).
    static func csrf(_ html: String, after marker: String? = nil) -> String? {
        var text = Substring(html)
        if let marker, let range = html.range(of: marker) { text = html[range.upperBound...] }
        guard let start = text.range(of: "name=\"csrf\" value=\"") else { return nil }
        let rest = text[start.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    /// The text of the element with id `id` (up to the next `<`).
    static func text(_ html: String, id: String) -> String? {
        guard let start = html.range(of: "id=\"\(id)\"") else { return nil }
        let rest = html[start.upperBound...]
        guard let open = rest.firstIndex(of: ">") else { return nil }
        let after = rest[rest.index(after: open)...]
        return after.firstIndex(of: "<").map { String(after[..<$0]) }
    }

    /// The token a form of `purpose` carries for the session `cookie`, made as the server makes it
    /// (the tests hold the master key): lets a test send a well-formed form the page never showed.
    static func forgedToken(cookie: String, purpose: String) throws -> String {
        let box = try SecretBox(masterKey: TestEnvironment.masterKey)
        return HostedCSRF(key: box.derivedKey(label: "portal-csrf")).token(browserKey: cookie, appId: "portal", purpose: purpose)
    }

    /// A signed-in Portal account through the core: invited (or bootstrapped as the operator), accepted,
    /// its TOTP confirmed. Returns the session and its cookie value.
    static func account(
        operator isOperator: Bool = false, appId: String? = nil, role: PortalRole? = nil, by inviter: PortalSession? = nil
    ) async throws -> (session: PortalSession, cookie: String) {
        let services = try await TestEnvironment.services()
        let email = unique(isOperator ? "operator" : "dev")
        let code: String
        if let inviter {
            code = try await services.portal.invite(email: email, isOperator: isOperator, appId: appId, role: role, by: inviter)
        } else {
            code = try await services.portal.bootstrapOperator(email: email)
        }
        let enrolment = try #require(try await services.portal.acceptInvite(code: code, password: "correct horse battery staple"))
        let totp = TOTP.code(secret: enrolment.totpSecret, step: TOTP.step(at: Date()))
        let signedIn = try await services.portal.confirmTOTP(ticket: enrolment.ticket, code: totp)
        return (signedIn.session, signedIn.cookie)
    }

    static let securityHeaders: [(String, String)] = [
        ("X-Frame-Options", "DENY"), ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"), ("X-Content-Type-Options", "nosniff"),
    ]

    static func expectSecure(_ reply: API.Reply, _ what: String) {
        let csp = reply.headers[HTTPField.Name("Content-Security-Policy")!] ?? ""
        for part in ["script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "default-src 'none'", "form-action 'self'"] {
            #expect(csp.contains(part), "\(what): CSP lacks \(part): \(csp)")
        }
        #expect(!csp.contains("unsafe-inline"), "\(what): \(csp)")
        for (name, value) in securityHeaders {
            #expect(reply.headers[HTTPField.Name(name)!] == value, "\(what): \(name) = \(reply.headers[HTTPField.Name(name)!] ?? "none")")
        }
    }

    /// No inline script or style in a page: every `<script>` has a `src`, no `style` element or attribute,
    /// no `on…=` handler.
    static func expectNoInline(_ html: String, _ what: String) {
        #expect(!html.contains("<script>") && !html.contains("<style") && !html.contains(" style=") && !html.contains(" onclick="), "\(what)")
        #expect(html.components(separatedBy: "<h1").count == 2, "\(what): one h1")
        #expect(html.contains("<main id=\"main\"") && html.contains("id=\"nav\""), "\(what): landmarks")
    }

    @Test("pages and redirects carry the strict headers; the assets are served; cookies are HttpOnly and SameSite=Strict")
    func headers() async throws {
        try await TestEnvironment.withLiveServer { api in
            let browser = Browser(api: api)
            let signIn = try await browser.get("/portal/sign-in")
            #expect(signIn.status == .ok)
            Self.expectSecure(signIn, "sign-in")
            Self.expectNoInline(signIn.text, "sign-in")
            #expect(signIn.headers[.contentType]?.hasPrefix("text/html") == true)
            for id in ["email", "password", "sign-in-submit"] { #expect(signIn.text.contains("id=\"\(id)\""), "sign-in lacks #\(id)") }
            let cookie = try #require(signIn.headers[values: .setCookie].first { $0.hasPrefix("cosync-portal-browser=") })
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/"))
            // The test server's public URL is http://localhost: no Secure, no __Host- prefix (a development setting).
            #expect(!cookie.contains("Secure"))

            let home = try await Browser(api: api).get("/portal")
            #expect(home.status == .seeOther && home.headers[.location] == "/portal/sign-in")
            Self.expectSecure(home, "redirect")

            let css = try await api.call(.get, "/portal/assets/portal.css", token: nil)
            #expect(css.status == .ok && css.headers[.contentType]?.hasPrefix("text/css") == true && css.text.contains(":focus-visible"))
            let js = try await api.call(.get, "/portal/assets/portal.js", token: nil)
            #expect(js.status == .ok && js.headers[.contentType]?.hasPrefix("text/javascript") == true)

            // A trailing slash and doubled slashes reach the same page (the path normalizer).
            #expect(try await Browser(api: api).get("/portal//sign-in/").status == .ok)
            // Methods the page does not have are not 5xx.
            let put = try await api.call(.put, "/portal/sign-in", token: nil, body: "x")
            #expect(put.status.code < 500)
        }
    }

    @Test("a POST without a valid CSRF token is refused 403, before and after sign-in")
    func csrfRefused() async throws {
        let (session, cookie) = try await Self.account(operator: true)
        _ = session
        try await TestEnvironment.withLiveServer { api in
            // Before sign-in: the sign-in form.
            let anonymous = Browser(api: api)
            _ = try await anonymous.get("/portal/sign-in")
            let noToken = try await anonymous.post("/portal/sign-in", [("email", "x@portal.test"), ("password", "whatever")])
            #expect(noToken.status == .forbidden)
            Self.expectSecure(noToken, "403")
            let otherBrowser = try await Browser(api: api).post("/portal/sign-in", [("email", "x@portal.test"), ("password", "p"), ("csrf", "forged")])
            #expect(otherBrowser.status == .forbidden)

            // Signed in: creating an app.
            let browser = Browser(api: api, session: cookie)
            let form = try await browser.get("/portal/apps/new")
            #expect(form.status == .ok)
            let name = "Portal CSRF " + Secrets.hexIdentifier().prefix(6)
            #expect(try await browser.post("/portal/apps/new", [("name", name), ("product", "cosyncAuth")]).status == .forbidden)
            #expect(try await browser.post("/portal/apps/new", [("name", name), ("csrf", "AAAA"), ("product", "cosyncAuth")]).status == .forbidden)
            // A token of another purpose (the sign-out form's) does not create an app.
            let signOutToken = try #require(Self.csrf(form.text, after: "id=\"sign-out\""))
            #expect(try await browser.post("/portal/apps/new", [("name", name), ("csrf", signOutToken), ("product", "cosyncAuth")]).status == .forbidden)
            // The page's own token does.
            let token = try #require(Self.csrf(form.text, after: "action=\"/portal/apps/new\""))
            let created = try await browser.post("/portal/apps/new", [("name", name), ("csrf", token), ("product", "cosyncAuth")])
            #expect(created.status == .seeOther, "\(created.status) \(created.text)")
            // The token is bound to the session: another session's cookie with this token is refused.
            let (_, otherCookie) = try await Self.account(operator: true)
            let stranger = Browser(api: api, session: otherCookie)
            #expect(try await stranger.post("/portal/apps/new", [("name", name), ("csrf", token), ("product", "cosyncAuth")]).status == .forbidden)
            // Signing out without the token is refused too; with it, the session ends.
            #expect(try await browser.post("/portal/sign-out", []).status == .forbidden)
            let out = try await browser.post("/portal/sign-out", [("csrf", signOutToken)])
            #expect(out.status == .seeOther && out.headers[.location] == "/portal/sign-in")
            #expect(try await Browser(api: api, session: cookie).get("/portal").status == .seeOther)
        }
    }

    @Test("a viewer sees no change controls and a forged POST answers 403; an app without a role answers 404")
    func roles() async throws {
        let (operatorSession, _) = try await Self.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let mine = try await api.createApp("Portal viewer app").string("appId")
            let other = try await api.createApp("Portal other app").string("appId")
            let (_, viewerCookie) = try await Self.account(appId: mine, role: .viewer, by: operatorSession)
            let viewer = Browser(api: api, session: viewerCookie)

            let list = try await viewer.get("/portal")
            #expect(list.status == .ok)
            #expect(list.text.contains("/portal/apps/\(mine)") && !list.text.contains(other), "a viewer's list shows only its apps")
            #expect(!list.text.contains("id=\"new-app\""))

            let settings = try await viewer.get("/portal/apps/\(mine)/settings")
            #expect(settings.status == .ok)
            Self.expectSecure(settings, "settings")
            #expect(!settings.text.contains("settings-submit") && !settings.text.contains("<form method=\"post\" action=\"/portal/apps/"))
            let keys = try await viewer.get("/portal/apps/\(mine)/keys")
            #expect(keys.status == .ok && !keys.text.contains("rotate-token-submit") && keys.text.contains("id=\"raw-public-key\""))
            let members = try await viewer.get("/portal/apps/\(mine)/members")
            #expect(members.status == .ok && !members.text.contains("invite-submit"))

            // Forged POSTs with well-formed tokens (the page never gave them): refused by role.
            for (path, purpose, fields) in [
                ("/portal/apps/\(mine)/settings", "settings:\(mine)", [("signupFlow", "none")]),
                ("/portal/apps/\(mine)/keys/rotate-token", "rotate-token:\(mine)", [("graceSeconds", "0")]),
                ("/portal/apps/\(mine)/members", "invite:\(mine)", [("email", Self.unique("x")), ("role", "owner")]),
            ] {
                let token = try Self.forgedToken(cookie: viewerCookie, purpose: purpose)
                let reply = try await viewer.post(path, fields + [("csrf", token)])
                #expect(reply.status == .forbidden, "\(path): \(reply.status)")
            }
            let app = try await api.call(.get, "/admin/v1/apps/\(mine)")
            #expect(app.object["signupFlow"] == .string("code"), "the viewer's POST changed nothing: \(app.object["signupFlow"] ?? .null)")

            // Another app, and an app that does not exist: the same 404.
            for path in ["/portal/apps/\(other)", "/portal/apps/\(other)/settings", "/portal/apps/\(other)/keys", "/portal/apps/\(other)/users",
                         "/portal/apps/\(Secrets.hexIdentifier())", "/portal/apps/not-an-app/members"] {
                let reply = try await viewer.get(path)
                #expect(reply.status == .notFound, "\(path): \(reply.status)")
            }
            let token = try Self.forgedToken(cookie: viewerCookie, purpose: "settings:\(other)")
            #expect(try await viewer.post("/portal/apps/\(other)/settings", [("signupFlow", "none"), ("csrf", token)]).status == .notFound)
            // Only operators create apps.
            #expect(try await viewer.get("/portal/apps/new").status == .forbidden)
        }
    }

    @Test("the walk: create an app, change its settings (the API's errors shown), rotate the token, find a user, revoke a session")
    func walk() async throws {
        let (operatorSession, operatorCookie) = try await Self.account(operator: true)
        _ = operatorSession
        try await TestEnvironment.withLiveServer { api in
            let browser = Browser(api: api, session: operatorCookie)
            let home = try await browser.get("/portal")
            #expect(home.status == .ok && home.text.contains("id=\"new-app\"") && home.text.contains("id=\"apps\""))
            Self.expectNoInline(home.text, "apps")

            // Create an app: the keys page shows its token once.
            let form = try await browser.get("/portal/apps/new")
            let name = "Portal walk " + Secrets.hexIdentifier().prefix(6)
            let created = try await browser.post(
                "/portal/apps/new", [("name", name), ("product", "cosyncAuth"), ("csrf", try #require(Self.csrf(form.text, after: "/portal/apps/new")))])
            #expect(created.status == .seeOther)
            let location = try #require(created.headers[.location])
            let appId = try #require(location.split(separator: "/").dropLast().last.map(String.init))
            let keys = try await browser.get(location)
            #expect(keys.status == .ok)
            let firstToken = try #require(Self.text(keys.text, id: "app-token"))
            #expect(!firstToken.isEmpty && Self.text(keys.text, id: "app-id") == appId)
            #expect(try await browser.get(location).text.contains("id=\"app-token\"") == false, "the token is shown once")
            let audit = try await TestEnvironment.value(
                "SELECT actor FROM audit_log WHERE app_id = \(appId) AND action = 'app.create'", as: String.self)
            #expect(audit == operatorSession.auditActor)

            // Settings: an invalid metadata field shows the admin API's message; a valid one is saved.
            let settings = try await browser.get("/portal/apps/\(appId)/settings")
            let settingsToken = try #require(Self.csrf(settings.text, after: "/settings\""))
            let bad = try await browser.post(
                "/portal/apps/\(appId)/settings",
                [("signupFlow", "code"), ("metadataFields", "[{\"path\": \"sub.x\", \"fieldName\": \"X\"}]"), ("csrf", settingsToken)])
            #expect(bad.status == .badRequest && bad.text.contains("id=\"form-error\"") && bad.text.contains("metaData[0].path"), "\(bad.text)")
            let notJSON = try await browser.post("/portal/apps/\(appId)/settings", [("metadataFields", "[{"), ("csrf", settingsToken)])
            #expect(notJSON.status == .badRequest && notJSON.text.contains("id=\"form-error\""))
            let good = try await browser.post(
                "/portal/apps/\(appId)/settings",
                [("signupFlow", "none"), ("metadataFields", "[{\"path\": \"user.firstName\", \"fieldName\": \"First name\"}]"), ("csrf", settingsToken)])
            #expect(good.status == .ok && !good.text.contains("id=\"form-error\""), "\(good.text)")
            let stored = try await api.call(.get, "/admin/v1/apps/\(appId)")
            #expect(stored.object["signupFlow"] == .string("none"))
            #expect(stored.object["metaData"]?.arrayValue?.first?["path"] == .string("user.firstName"))

            // An end user with two sessions.
            let sdk = SDK(api: api, appToken: firstToken)
            let handle = Self.unique("user")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let one = try await sdk.login(handle, "pw").object.string("access-token")
            let two = try await sdk.login(handle, "pw").object.string("access-token")
            #expect(!one.isEmpty && !two.isEmpty)

            // Rotate the token (the session is fresh): the new one is shown once, the old one stops.
            let keysPage = try await browser.get("/portal/apps/\(appId)/keys")
            let rotateToken = try #require(Self.csrf(keysPage.text, after: "id=\"rotate-token\""))
            let badGrace = try await browser.post("/portal/apps/\(appId)/keys/rotate-token", [("graceSeconds", "-1"), ("csrf", rotateToken)])
            #expect(badGrace.status == .badRequest && badGrace.text.contains("id=\"form-error\""))
            let rotated = try await browser.post("/portal/apps/\(appId)/keys/rotate-token", [("graceSeconds", "0"), ("csrf", rotateToken)])
            #expect(rotated.status == .seeOther, "\(rotated.status) \(rotated.text)")
            let after = try await browser.get("/portal/apps/\(appId)/keys")
            let newToken = try #require(Self.text(after.text, id: "app-token"))
            #expect(newToken != firstToken)
            #expect(try await sdk.login(handle, "pw").status != .ok, "the old app token stopped")
            #expect(try await SDK(api: api, appToken: newToken).login(handle, "pw").status == .ok)

            // A session proven more than 5 minutes ago must sign in again first (and comes back to the keys page).
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '6 minutes' WHERE id = \(operatorSession.id)")
            let stale = try await browser.post("/portal/apps/\(appId)/keys/rotate-token", [("graceSeconds", "0"), ("csrf", rotateToken)])
            #expect(stale.status == .seeOther && stale.headers[.location] == "/portal/reauth?next=%2Fportal%2Fapps%2F\(appId)%2Fkeys")
            #expect(try await browser.get("/portal/apps/\(appId)/keys").text.contains("id=\"app-token\"") == false, "nothing rotated")

            // Find the user, revoke one session.
            let users = try await browser.get("/portal/apps/\(appId)/users?q=" + Self.encode(String(handle.prefix(12))))
            #expect(users.status == .ok && users.text.contains("class=\"user-link\"") && users.text.contains(handle))
            let userId = try #require(users.text.range(of: "/users/").map { users.text[$0.upperBound...].prefix(36) }.map(String.init))
            let user = try await browser.get("/portal/apps/\(appId)/users/\(userId)")
            #expect(user.status == .ok && user.text.contains("class=\"revoke-session\"") && user.text.contains(">Revoke<"))
            let sessionId = try #require(user.text.range(of: "/sessions/").map { user.text[$0.upperBound...].prefix(36) }.map(String.init))
            let revokeToken = try #require(Self.csrf(user.text, after: "/sessions/\(sessionId)/revoke\""))
            let userUUID = try #require(UUID(uuidString: userId))
            let count: @Sendable () async throws -> Int? = {
                try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE user_id = \(userUUID)", as: Int.self)
            }
            let before = try await count()
            let revoked = try await browser.post("/portal/apps/\(appId)/users/\(userId)/sessions/\(sessionId)/revoke", [("csrf", revokeToken)])
            #expect(revoked.status == .seeOther)
            #expect(try await count() == (before ?? 0) - 1 && (before ?? 0) >= 3, "one of the user's sessions ended")
            let gone = try await browser.get("/portal/apps/\(appId)/users/\(userId)?revoked=1")
            #expect(gone.status == .ok && !gone.text.contains(sessionId) && gone.text.contains("role=\"status\""))
            // The same form again: the session is gone (404, not 5xx).
            #expect(try await browser.post("/portal/apps/\(appId)/users/\(userId)/sessions/\(sessionId)/revoke", [("csrf", revokeToken)]).status == .notFound)

            // Members: the owner invites; the link is shown.
            let membersPage = try await browser.get("/portal/apps/\(appId)/members")
            let inviteToken = try #require(Self.csrf(membersPage.text, after: "id=\"invite-heading\""))
            let invited = try await browser.post(
                "/portal/apps/\(appId)/members", [("email", Self.unique("invitee")), ("role", "editor"), ("csrf", inviteToken)])
            #expect(invited.status == .ok)
            let link = try #require(Self.text(invited.text, id: "invite-link"))
            #expect(link.hasPrefix("http://localhost:8080/portal/invite/"))
            let invitePath = String(link.dropFirst("http://localhost:8080".count))
            let invitePage = try await Browser(api: api).get(invitePath)
            #expect(invitePage.status == .ok && invitePage.text.contains("id=\"password-confirm\""))
        }
    }

    @Test("sign-in through the pages: password, then the code; the invitation and enrolment pages; reauth keeps next local")
    func signInPages() async throws {
        let services = try await TestEnvironment.services()
        let email = Self.unique("pages")
        let code = try await services.portal.bootstrapOperator(email: email)
        try await TestEnvironment.withLiveServer { api in
            let browser = Browser(api: api)
            let invite = try await browser.get("/portal/invite/\(code)")
            #expect(invite.status == .ok && invite.text.contains(email))
            let inviteToken = try #require(Self.csrf(invite.text))
            let differ = try await browser.post(
                "/portal/invite/\(code)", [("password", "correct horse battery"), ("password-confirm", "another"), ("csrf", inviteToken)])
            #expect(differ.status == .badRequest && differ.text.contains("id=\"form-error\""))
            let accepted = try await browser.post(
                "/portal/invite/\(code)", [("password", "correct horse battery"), ("password-confirm", "correct horse battery"), ("csrf", inviteToken)])
            #expect(accepted.status == .seeOther && accepted.headers[.location] == "/portal/enrol")
            let enrol = try await browser.get("/portal/enrol")
            #expect(enrol.status == .ok && enrol.text.contains("<svg"))
            let key = try #require(Self.text(enrol.text, id: "totp-key"))
            let secret = try #require(TOTP.secret(fromKey: key))
            let enrolToken = try #require(Self.csrf(enrol.text))
            let wrong = try await browser.post("/portal/enrol", [("code", "000000"), ("csrf", enrolToken)])
            #expect(wrong.status.code == 401 && wrong.text.contains("id=\"totp-key\""))
            let step = TOTP.step(at: Date())
            let done = try await browser.post("/portal/enrol", [("code", TOTP.code(secret: secret, step: step)), ("csrf", enrolToken)])
            #expect(done.status == .seeOther && done.headers[.location] == "/portal", "\(done.status) \(done.text)")
            #expect(try await browser.get("/portal").status == .ok)

            // Reauth: `next` is kept only when it is a Portal path.
            for (next, kept) in [("/portal/apps", true), ("//evil.example/portal", false), ("https://evil.example", false), ("/portal/../admin", false)] {
                let page = try await browser.get("/portal/reauth?next=" + Self.encode(next))
                #expect(page.status == .ok)
                #expect(page.text.contains("name=\"next\" value=\"\(kept ? next : "/portal")\""), "\(next)")
            }

            // Sign in again with the password and a later code.
            let fresh = Browser(api: api)
            let signIn = try await fresh.get("/portal/sign-in")
            let wrongPassword = try await fresh.post(
                "/portal/sign-in", [("email", email), ("password", "not it at all"), ("csrf", try #require(Self.csrf(signIn.text)))])
            #expect(wrongPassword.status.code < 500 && wrongPassword.text.contains("id=\"form-error\""))
            let step1 = try await fresh.post(
                "/portal/sign-in", [("email", email), ("password", "correct horse battery"), ("csrf", try #require(Self.csrf(signIn.text)))])
            #expect(step1.status == .ok && step1.text.contains("id=\"code-submit\""), "\(step1.text)")
            let ticket = try #require(step1.text.range(of: "name=\"ticket\" value=\"").map { step1.text[$0.upperBound...].prefix { $0 != "\"" } })
            let step2 = try await fresh.post(
                "/portal/sign-in/code",
                [("ticket", String(ticket)), ("code", TOTP.code(secret: secret, step: step + 1)), ("csrf", try #require(Self.csrf(step1.text)))])
            #expect(step2.status == .seeOther && step2.headers[.location] == "/portal", "\(step2.status) \(step2.text)")
            #expect(try await fresh.get("/portal").status == .ok)
        }
    }

    /// A hand-over cookie as the server seals one (the tests hold the master key).
    static func forgedOnce(_ fields: [String: String], lifetime: TimeInterval = 120) throws -> String {
        let box = try SecretBox(masterKey: TestEnvironment.masterKey)
        var all = fields
        all["exp"] = String(Int(Date().timeIntervalSince1970 + lifetime))
        let sealed = try AES.GCM.seal(try JSONEncoder().encode(all), using: box.derivedKey(label: "portal-once-cookie"))
        return Base64URL.encode(try #require(sealed.combined))
    }

    @Test("the token shown once: bound to the session that made it, short-lived, cleared when shown and at sign-out, never to a viewer")
    func showOnceBound() async throws {
        let (operatorSession, operatorCookie) = try await Self.account(operator: true)
        let (_, strangerCookie) = try await Self.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let browser = Browser(api: api, session: operatorCookie)
            let form = try await browser.get("/portal/apps/new")
            let created = try await browser.post(
                "/portal/apps/new",
                [("name", "Portal once " + Secrets.hexIdentifier().prefix(6)), ("product", "cosyncAuth"),
                 ("csrf", try #require(Self.csrf(form.text, after: "/portal/apps/new")))])
            #expect(created.status == .seeOther)
            let location = try #require(created.headers[.location])
            let appId = try #require(location.split(separator: "/").dropLast().last.map(String.init))
            let setCookie = try #require(created.headers[values: .setCookie].first { $0.hasPrefix("cosync-portal-once=") })
            let maxAge = try #require(setCookie.range(of: "Max-Age=").map { Int(setCookie[$0.upperBound...].prefix { $0.isNumber }) ?? 0 })
            #expect(maxAge > 0 && maxAge <= 120, "the hand-over cookie lives \(maxAge) s")
            let captured = try #require(browser.cookies["cosync-portal-once"])

            // Another account's session with the captured cookie: nothing shown, and the cookie is cleared.
            let stranger = Browser(api: api, session: strangerCookie)
            stranger.cookies["cosync-portal-once"] = captured
            let strangerKeys = try await stranger.get(location)
            #expect(strangerKeys.status == .ok && !strangerKeys.text.contains("id=\"app-token\"") && !strangerKeys.text.contains("id=\"app-secret\""))
            #expect(stranger.cookies["cosync-portal-once"] == nil, "the keys page clears a hand-over cookie it does not show")

            // Its own session: shown once, cleared in the same answer.
            let keys = try await browser.get(location)
            #expect(Self.text(keys.text, id: "app-token")?.isEmpty == false)
            #expect(browser.cookies["cosync-portal-once"] == nil)
            #expect(try await browser.get(location).text.contains("id=\"app-token\"") == false)

            // A viewer never sees one, even with a cookie sealed for its own session.
            let (viewerSession, viewerCookie) = try await Self.account(appId: appId, role: .viewer, by: operatorSession)
            let viewer = Browser(api: api, session: viewerCookie)
            viewer.cookies["cosync-portal-once"] = try Self.forgedOnce(
                ["kind": "rotated", "appId": appId, "token": "forged-token-value", "sid": viewerSession.id.uuidString.lowercased()])
            let viewerKeys = try await viewer.get(location)
            #expect(viewerKeys.status == .ok && !viewerKeys.text.contains("forged-token-value"))

            // Sign-out clears the cookie; the captured one then opens nothing (its session is gone).
            browser.cookies["cosync-portal-once"] = captured
            let home = try await browser.get("/portal")
            let signOut = try #require(Self.csrf(home.text, after: "id=\"sign-out\""))
            let out = try await browser.post("/portal/sign-out", [("csrf", signOut)])
            #expect(out.status == .seeOther)
            #expect(out.headers[values: .setCookie].contains { $0.hasPrefix("cosync-portal-once=;") && $0.contains("Max-Age=0") })
            let replay = Browser(api: api, session: operatorCookie)
            replay.cookies["cosync-portal-once"] = captured
            let after = try await replay.get(location)
            #expect(after.status == .seeOther && !after.text.contains("id=\"app-token\""))
        }
    }

    @Test("keys are the owners': an editor gets no rotate form and a forged rotation answers 403; editors keep settings; owners see no invite link")
    func keysOwnerOnly() async throws {
        let (operatorSession, _) = try await Self.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Portal keys owners").string("appId")
            let (_, editorCookie) = try await Self.account(appId: appId, role: .editor, by: operatorSession)
            let (_, ownerCookie) = try await Self.account(appId: appId, role: .owner, by: operatorSession)
            let before = try await TestEnvironment.value("SELECT encode(t.token_hash, 'hex') FROM app_tokens t JOIN apps a ON a.id = t.app_ref WHERE a.app_id = \(appId) AND t.expires_at IS NULL", as: String.self)

            let editor = Browser(api: api, session: editorCookie)
            let keys = try await editor.get("/portal/apps/\(appId)/keys")
            #expect(keys.status == .ok && !keys.text.contains("rotate-token-submit") && keys.text.contains("id=\"raw-public-key\""))
            let forged = try await editor.post(
                "/portal/apps/\(appId)/keys/rotate-token",
                [("graceSeconds", "0"), ("csrf", try Self.forgedToken(cookie: editorCookie, purpose: "rotate-token:\(appId)"))])
            #expect(forged.status == .forbidden, "\(forged.status)")
            let unchanged = try await TestEnvironment.value("SELECT encode(t.token_hash, 'hex') FROM app_tokens t JOIN apps a ON a.id = t.app_ref WHERE a.app_id = \(appId) AND t.expires_at IS NULL", as: String.self)
            #expect(unchanged == before, "the editor's POST rotated nothing")
            let settings = try await editor.get("/portal/apps/\(appId)/settings")
            let saved = try await editor.post(
                "/portal/apps/\(appId)/settings",
                [("signupFlow", "none"), ("metadataFields", "[]"), ("csrf", try #require(Self.csrf(settings.text, after: "/settings\"")))])
            #expect(saved.status == .ok && !saved.text.contains("id=\"form-error\""), "an editor still saves settings")

            let owner = Browser(api: api, session: ownerCookie)
            let ownerKeys = try await owner.get("/portal/apps/\(appId)/keys")
            let rotated = try await owner.post(
                "/portal/apps/\(appId)/keys/rotate-token",
                [("graceSeconds", "0"), ("csrf", try #require(Self.csrf(ownerKeys.text, after: "id=\"rotate-token\"")))])
            #expect(rotated.status == .seeOther, "\(rotated.status)")
            #expect(Self.text(try await owner.get("/portal/apps/\(appId)/keys").text, id: "app-token")?.isEmpty == false)

            // An owner's invitation: the e-mail is said to be sent; the link (the invitee's credential) is not shown.
            let members = try await owner.get("/portal/apps/\(appId)/members")
            let invited = try await owner.post(
                "/portal/apps/\(appId)/members",
                [("email", Self.unique("owner-invitee")), ("role", "viewer"), ("csrf", try #require(Self.csrf(members.text, after: "id=\"invite-heading\"")))])
            #expect(invited.status == .ok && invited.text.contains("id=\"invite-sent\"") && !invited.text.contains("id=\"invite-link\""))
            #expect(!invited.text.contains("/portal/invite/"))
        }
    }

    @Test("reauth's next refuses percent-encoded and backslash paths (encoded dot segments leave /portal)")
    func reauthNextEncoded() async throws {
        let (_, cookie) = try await Self.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let browser = Browser(api: api, session: cookie)
            for next in ["/portal/%2e%2e/admin/v1/openapi.json", "/portal/%2E%2E/%2e%2e/healthz", "/portal/.%2e/admin", "/portal/%2fevil",
                         "/portal/\\..\\admin"] {
                let page = try await browser.get("/portal/reauth?next=" + Self.encode(next))
                #expect(page.status == .ok)
                #expect(page.text.contains("name=\"next\" value=\"/portal\""), "\(next) was kept")
            }
            // A query may still carry percent-encoding.
            let page = try await browser.get("/portal/reauth?next=" + Self.encode("/portal?q=a%20b"))
            #expect(page.text.contains("name=\"next\" value=\"/portal?q=a%20b\""))
        }
    }

    @Test("answers the Portal does not render itself (unknown paths, missing methods) carry the strict headers too")
    func headersEverywhere() async throws {
        let (_, cookie) = try await Self.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let session: HTTPFields = [.cookie: "cosync-portal=\(cookie)"]
            for (method, path) in [
                (HTTPRequest.Method.get, "/portal/nope"), (.get, "/portal/sign-out"), (.put, "/portal/sign-in"), (.delete, "/portal"),
                (.get, "/portal//apps"), (.get, "/portal/apps/x/nope/deeper"), (.patch, "/portal/apps/new"), (.post, "/portal/assets/portal.css"),
            ] {
                for headers in [HTTPFields(), session] {
                    let reply = try await api.call(method, path, token: nil, body: method == .get ? nil : "x", headers: headers)
                    #expect(reply.status == .notFound, "\(method) \(path): \(reply.status)")
                    Self.expectSecure(reply, "\(method) \(path)")
                    #expect(reply.headers[.contentType]?.hasPrefix("text/html") == true, "\(method) \(path): the Portal's own page")
                }
            }
            // The assets keep their caching and get the other headers.
            let css = try await api.call(.get, "/portal/assets/portal.css", token: nil)
            #expect(css.headers[.cacheControl] == "public, max-age=3600" && css.headers[HTTPField.Name("X-Frame-Options")!] == "DENY")
            // Other paths are untouched.
            let other = try await api.call(.get, "/no-such-path", token: nil)
            #expect(other.headers[HTTPField.Name("Content-Security-Policy")!] == nil)
        }
    }
}
