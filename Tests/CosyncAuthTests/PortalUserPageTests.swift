import CosyncAuth
import Foundation
import HTTPTypes
import Testing

/// The Portal's users slice at the HTTP level (issue 23): the users search (handle, user name, user
/// id, pages), a user's page and its actions (each checked through the end-user or admin API as the
/// admin API's own action would change the user), and the pending signups and invitations page.
/// Refusals: a viewer's forged POSTs 403, a POST without csrf 403, another app's user 404, deleting
/// needs an owner and a fresh sign-in.
@Suite("Portal user pages")
struct PortalUserPageTests {
    typealias Browser = PortalPageTests.Browser
    static let password = "Long-enough-1"

    static func csrf(_ html: String, after marker: String) throws -> String {
        try #require(PortalPageTests.csrf(html, after: marker), "no csrf after \(marker)")
    }

    /// An app (signup flow none, passwords of at least 10 characters) and a user made through the admin API.
    static func app(_ api: API, settings: [String: JSONValue] = [:]) async throws -> (appId: String, token: String) {
        var all: [String: JSONValue] = ["signupFlow": .string("none"), "passwordFilter": .bool(true), "passwordMinLength": .int(10)]
        for (key, value) in settings { all[key] = value }
        let created = try await api.createApp("Portal users " + Secrets.hexIdentifier().prefix(6), settings: all)
        return (created.string("appId"), created.string("appToken"))
    }

    static func user(_ api: API, appId: String, handle: String, userName: String? = nil) async throws -> String {
        var input: [String: JSONValue] = ["handle": .string(handle), "password": .string(password)]
        if let userName { input["userName"] = .string(userName) }
        let reply = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(input))
        #expect(reply.status == .created, "\(reply.text)")
        return reply.object.string("userId")
    }

    static func accessToken(_ sdk: SDK, _ handle: String, _ password: String = password) async throws -> String {
        let reply = try await sdk.login(handle, password)
        #expect(reply.status == .ok, "login of \(handle): \(reply.status) \(reply.text)")
        return reply.object.string("access-token")
    }

    /// The legacy code of getUser with `token` (200 when it works; 405 when its session ended).
    static func getUser(_ sdk: SDK, _ token: String) async throws -> Int {
        let reply = try await sdk.get("/api/appuser/getUser", accessToken: token)
        if reply.status == .ok { return 200 }
        return reply.object["code"]?.intValue ?? Int(reply.status.code)
    }

    @Test("the users search finds by handle prefix, user name prefix and exact user id, a page at a time")
    func search() async throws {
        let (_, cookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let (appId, _) = try await Self.app(api)
            let handle = PortalPageTests.unique("searchme")
            let userId = try await Self.user(api, appId: appId, handle: handle, userName: "Zorro" + Secrets.hexIdentifier().prefix(6))
            let userName = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)").object.string("userName")
            let other = try await Self.user(api, appId: appId, handle: PortalPageTests.unique("other"))
            let browser = Browser(api: api, session: cookie)
            for q in [String(handle.prefix(10)), String(userName.prefix(7)).lowercased(), userId, userId.uppercased()] {
                let page = try await browser.get("/portal/apps/\(appId)/users?q=" + PortalPageTests.encode(q))
                #expect(page.status == .ok)
                #expect(page.text.contains("/users/\(userId)\"") && !page.text.contains(other), "q=\(q)")
            }
            // The id search is the admin API's too.
            let admin = try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=\(userId)")
            #expect(admin.object["users"]?.arrayValue?.count == 1)
            // Pages: 55 more users; the first page has 50 and a next link, which shows the rest.
            try await TestEnvironment.sql(
                """
                INSERT INTO users (app_ref, handle)
                SELECT a.id, 'bulk' || lpad(g::text, 3, '0') || '@portal.test' FROM apps a, generate_series(1, 55) g WHERE a.app_id = \(appId)
                """)
            let first = try await browser.get("/portal/apps/\(appId)/users?q=bulk")
            #expect(first.text.components(separatedBy: "class=\"user-link\"").count - 1 == 50)
            let next = try #require(PortalPageTests.text(first.text, id: "next-page").flatMap { _ in
                first.text.range(of: "id=\"next-page\" href=\"").map { first.text[$0.upperBound...].prefix { $0 != "\"" } }
            })
            let second = try await browser.get(String(next).replacingOccurrences(of: "&amp;", with: "&"))
            #expect(second.status == .ok && second.text.contains("bulk055@portal.test") && !second.text.contains("bulk001@portal.test"))
            #expect(second.text.components(separatedBy: "class=\"user-link\"").count - 1 == 5)
            #expect(try await browser.get("/portal/apps/\(appId)/users?cursor=%%%").status == .badRequest)
        }
    }

    @Test("suspend, activate, set password, sign out everywhere, revoke, detach: each changes the user as the admin API does")
    func actions() async throws {
        let (operatorSession, _) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let (appId, token) = try await Self.app(api)
            let (_, editorCookie) = try await PortalPageTests.account(appId: appId, role: .editor, by: operatorSession)
            let sdk = SDK(api: api, appToken: token)
            let handle = PortalPageTests.unique("acted")
            let userId = try await Self.user(api, appId: appId, handle: handle)
            let path = "/portal/apps/\(appId)/users/\(userId)"
            let browser = Browser(api: api, session: editorCookie)
            var page = try await browser.get(path)
            #expect(page.status == .ok)
            PortalPageTests.expectNoInline(page.text, "user")
            for id in ["user-suspend", "user-set-password", "newPassword", "user-sign-out-everywhere", "identities", "sessions"] {
                #expect(page.text.contains("id=\"\(id)\""), "the user page lacks #\(id)")
            }
            #expect(!page.text.contains("id=\"user-delete\""), "deleting is the owners'")

            // Suspend: the login is refused, the session's token stops; activate: the login works again.
            let access = try await Self.accessToken(sdk, handle)
            var reply = try await browser.post("\(path)/suspend", [("csrf", try Self.csrf(page.text, after: "id=\"user-suspend\""))])
            #expect(reply.status == .seeOther && reply.headers[.location] == "\(path)?done=suspended")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)").object.string("status") == "suspended")
            #expect(try await sdk.login(handle, Self.password).status != .ok)
            #expect(try await Self.getUser(sdk, access) != 200)
            let audit = try await TestEnvironment.value(
                "SELECT actor FROM audit_log WHERE app_id = \(appId) AND action = 'user.update' ORDER BY id DESC LIMIT 1", as: String.self)
            #expect(audit?.hasPrefix("portal:dev-") == true, "\(audit ?? "none")")
            page = try await browser.get(reply.headers[.location] ?? path)
            #expect(page.text.contains("role=\"status\"") && page.text.contains("id=\"user-activate\"") && !page.text.contains("id=\"user-suspend\""))
            reply = try await browser.post("\(path)/activate", [("csrf", try Self.csrf(page.text, after: "id=\"user-activate\""))])
            #expect(reply.status == .seeOther)
            #expect(try await sdk.login(handle, Self.password).status == .ok)

            // Set password: the app's rule refuses a weak one with the service's message; a good one logs in.
            page = try await browser.get(path)
            let passwordToken = try Self.csrf(page.text, after: "id=\"user-set-password\"")
            let weak = try await browser.post("\(path)/password", [("newPassword", "short"), ("csrf", passwordToken)])
            #expect(weak.status == .badRequest && weak.text.contains("id=\"form-error\"") && weak.text.contains("at least 10 characters"), "\(weak.text)")
            let empty = try await browser.post("\(path)/password", [("newPassword", ""), ("csrf", passwordToken)])
            #expect(empty.status == .badRequest && empty.text.contains("id=\"form-error\""))
            reply = try await browser.post("\(path)/password", [("newPassword", "Another-long-2"), ("csrf", passwordToken)])
            #expect(reply.status == .seeOther && reply.headers[.location] == "\(path)?done=password")
            #expect(try await sdk.login(handle, Self.password).status != .ok)
            let one = try await Self.accessToken(sdk, handle, "Another-long-2")
            let two = try await Self.accessToken(sdk, handle, "Another-long-2")

            // Revoke one session (the first slice's form), then sign out everywhere: every token answers 405.
            page = try await browser.get(path)
            let sessionId = try #require(page.text.range(of: "/sessions/").map { page.text[$0.upperBound...].prefix(36) }.map(String.init))
            reply = try await browser.post(
                "\(path)/sessions/\(sessionId)/revoke", [("csrf", try Self.csrf(page.text, after: "/sessions/\(sessionId)/revoke\""))])
            #expect(reply.status == .seeOther && reply.headers[.location] == "\(path)?done=revoked")
            let codes = [try await Self.getUser(sdk, one), try await Self.getUser(sdk, two)].sorted()
            #expect(codes == [200, 405], "\(codes)")
            page = try await browser.get(path)
            reply = try await browser.post("\(path)/sign-out-everywhere", [("csrf", try Self.csrf(page.text, after: "id=\"user-sign-out-everywhere\""))])
            #expect(reply.status == .seeOther && reply.headers[.location] == "\(path)?done=signed-out")
            let afterAll = [try await Self.getUser(sdk, one), try await Self.getUser(sdk, two)]
            #expect(afterAll == [405, 405], "\(afterAll)")
            let sessions = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)/sessions")
            #expect(sessions.object["sessions"]?.arrayValue?.isEmpty == true)

            // Detach: a Google identity goes; the last one (the password) is refused with the service's message.
            try await TestEnvironment.sql(
                """
                INSERT INTO identities (app_ref, user_id, kind, subject, email)
                SELECT app_ref, id, 'google', 'google-sub-' || id::text, handle FROM users WHERE id = \(try #require(UUID(uuidString: userId)))
                """)
            page = try await browser.get(path)
            #expect(page.text.components(separatedBy: "class=\"detach-identity\"").count - 1 == 2)
            let identities = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)/identities").object["identities"]?.arrayValue ?? []
            let google = try #require(identities.first { $0["kind"] == .string("google") }?["identityId"]?.stringValue)
            let passwordId = try #require(identities.first { $0["kind"] == .string("password") }?["identityId"]?.stringValue)
            reply = try await browser.post(
                "\(path)/identities/\(google)/detach", [("csrf", try Self.csrf(page.text, after: "/identities/\(google)/detach\""))])
            #expect(reply.status == .seeOther && reply.headers[.location] == "\(path)?done=detached")
            let left = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)/identities").object["identities"]?.arrayValue ?? []
            #expect(left.count == 1)
            page = try await browser.get(path)
            let last = try await browser.post(
                "\(path)/identities/\(passwordId)/detach", [("csrf", try Self.csrf(page.text, after: "/identities/\(passwordId)/detach\""))])
            #expect(last.status == .conflict && last.text.contains("id=\"form-error\"") && last.text.contains("last way to sign in"), "\(last.text)")
            #expect(try await sdk.login(handle, "Another-long-2").status == .ok, "the refused detach left the password")
        }
    }

    @Test("deleting a user: owners only, after a fresh sign-in, with the box ticked; the user is gone")
    func delete() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let (appId, token) = try await Self.app(api)
            let (_, editorCookie) = try await PortalPageTests.account(appId: appId, role: .editor, by: operatorSession)
            let handle = PortalPageTests.unique("doomed")
            let userId = try await Self.user(api, appId: appId, handle: handle)
            let path = "/portal/apps/\(appId)/users/\(userId)"
            // An editor: no delete form, and a forged one is refused.
            let editor = Browser(api: api, session: editorCookie)
            let forged = try PortalPageTests.forgedToken(cookie: editorCookie, purpose: "user-delete:\(appId):\(userId)")
            #expect(try await editor.post("\(path)/delete", [("confirm", "yes"), ("csrf", forged)]).status == .forbidden)

            let browser = Browser(api: api, session: operatorCookie)
            var page = try await browser.get(path)
            #expect(page.text.contains("id=\"user-delete\"") && page.text.contains("id=\"user-delete-confirm\""))
            let deleteToken = try Self.csrf(page.text, after: "id=\"user-delete\"")
            // A session proven more than 5 minutes ago signs in again first, and comes back to the user.
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '6 minutes' WHERE id = \(operatorSession.id)")
            let stale = try await browser.post("\(path)/delete", [("confirm", "yes"), ("csrf", deleteToken)])
            #expect(stale.status == .seeOther)
            #expect(stale.headers[.location] == "/portal/reauth?next=" + PortalPageTests.encode(path), "\(stale.headers[.location] ?? "")")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)").status == .ok)
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() WHERE id = \(operatorSession.id)")
            let unticked = try await browser.post("\(path)/delete", [("csrf", deleteToken)])
            #expect(unticked.status == .badRequest && unticked.text.contains("id=\"form-error\""))
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)").status == .ok)
            let deleted = try await browser.post("\(path)/delete", [("confirm", "yes"), ("csrf", deleteToken)])
            #expect(deleted.status == .seeOther && deleted.headers[.location] == "/portal/apps/\(appId)/users?deleted=1")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)").status == .notFound)
            #expect(try await SDK(api: api, appToken: token).login(handle, Self.password).status != .ok)
            page = try await browser.get("/portal/apps/\(appId)/users?deleted=1")
            #expect(page.text.contains("role=\"status\""))
            #expect(try await browser.get(path).status == .notFound)
            let audit = try await TestEnvironment.value(
                "SELECT actor FROM audit_log WHERE app_id = \(appId) AND action = 'user.delete'", as: String.self)
            #expect(audit == operatorSession.auditActor)
        }
    }

    @Test("refusals: a viewer has no forms and its forged POSTs answer 403; no csrf 403; another app's user 404")
    func refusals() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let (appId, token) = try await Self.app(api, settings: ["signupFlow": .string("code")])
            let (otherId, _) = try await Self.app(api)
            let (_, viewerCookie) = try await PortalPageTests.account(appId: appId, role: .viewer, by: operatorSession)
            let (_, editorCookie) = try await PortalPageTests.account(appId: appId, role: .editor, by: operatorSession)
            let handle = PortalPageTests.unique("guarded")
            let userId = try await Self.user(api, appId: appId, handle: handle)
            let otherUser = try await Self.user(api, appId: otherId, handle: PortalPageTests.unique("elsewhere"))
            let sdk = SDK(api: api, appToken: token)
            _ = try await Self.accessToken(sdk, handle)
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(PortalPageTests.unique("pending"))), ("password", SDK.md5("pw"))]).status == .ok)
            let invited = try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string(PortalPageTests.unique("invitee"))]))
            #expect(invited.status == .created)
            let signupId = try #require(try await api.call(.get, "/admin/v1/apps/\(appId)/signups").object["signups"]?.arrayValue?.first?["id"]?.stringValue)
            let inviteId = try #require(try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"]?.arrayValue?.first?["id"]?.stringValue)
            let path = "/portal/apps/\(appId)/users/\(userId)"
            let sessionId = try #require(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)/sessions").object["sessions"]?.arrayValue?.first?["sessionId"]?.stringValue)
            let identityId = try #require(
                try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)/identities").object["identities"]?.arrayValue?.first?["identityId"]?.stringValue)

            let viewer = Browser(api: api, session: viewerCookie)
            for page in [path, "/portal/apps/\(appId)/pending", "/portal/apps/\(appId)/users"] {
                let reply = try await viewer.get(page)
                #expect(reply.status == .ok, "\(page)")
                #expect(!reply.text.contains("<form method=\"post\" action=\"/portal/apps/") && !reply.text.contains("method=\"post\" action=\"/portal/apps/"), "\(page) offers a form to a viewer")
            }
            let forms: [(String, String, [(String, String)])] = [
                ("\(path)/suspend", "user-suspend:\(appId):\(userId)", []),
                ("\(path)/activate", "user-activate:\(appId):\(userId)", []),
                ("\(path)/password", "user-password:\(appId):\(userId)", [("newPassword", "Hijacked-long-3")]),
                ("\(path)/sign-out-everywhere", "user-sign-out-everywhere:\(appId):\(userId)", []),
                ("\(path)/delete", "user-delete:\(appId):\(userId)", [("confirm", "yes")]),
                ("\(path)/sessions/\(sessionId)/revoke", "revoke:\(appId):\(userId):\(sessionId)", []),
                ("\(path)/identities/\(identityId)/detach", "user-detach-\(identityId):\(appId):\(userId)", []),
                ("/portal/apps/\(appId)/pending/invite", "pending-invite:\(appId)", [("handle", PortalPageTests.unique("forged"))]),
                ("/portal/apps/\(appId)/pending/signups/\(signupId)/cancel", "pending-cancel:signups:\(appId):\(signupId)", []),
                ("/portal/apps/\(appId)/pending/invites/\(inviteId)/cancel", "pending-cancel:invites:\(appId):\(inviteId)", []),
            ]
            let editor = Browser(api: api, session: editorCookie)
            for (action, purpose, fields) in forms {
                let forged = try PortalPageTests.forgedToken(cookie: viewerCookie, purpose: purpose)
                let reply = try await viewer.post(action, fields + [("csrf", forged)])
                #expect(reply.status == .forbidden, "viewer \(action): \(reply.status)")
                // Without a csrf, or with another purpose's, an editor is refused too.
                #expect(try await editor.post(action, fields).status == .forbidden, "no csrf \(action)")
                let wrong = try PortalPageTests.forgedToken(cookie: editorCookie, purpose: "settings:\(appId)")
                #expect(try await editor.post(action, fields + [("csrf", wrong)]).status == .forbidden, "wrong csrf \(action)")
            }
            // Nothing changed.
            let user = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)")
            #expect(user.object.string("status") == "active")
            #expect(try await sdk.login(handle, Self.password).status == .ok)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/signups").object["signups"]?.arrayValue?.count == 1)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"]?.arrayValue?.count == 1)

            // Another app's user through this app's pages: 404, for the operator (a role on both) too.
            let operatorBrowser = Browser(api: api, session: operatorCookie)
            #expect(try await operatorBrowser.get("/portal/apps/\(appId)/users/\(otherUser)").status == .notFound)
            #expect(try await operatorBrowser.get("/portal/apps/\(appId)/users/not-a-uuid").status == .notFound)
            let suspendToken = try PortalPageTests.forgedToken(cookie: operatorCookie, purpose: "user-suspend:\(appId):\(otherUser)")
            #expect(try await operatorBrowser.post("/portal/apps/\(appId)/users/\(otherUser)/suspend", [("csrf", suspendToken)]).status == .notFound)
            #expect(try await api.call(.get, "/admin/v1/apps/\(otherId)/users/\(otherUser)").object.string("status") == "active")
            // An app the account has no role on: 404 for its pages and its users.
            for page in ["/portal/apps/\(otherId)/users/\(otherUser)", "/portal/apps/\(otherId)/pending"] {
                #expect(try await editor.get(page).status == .notFound, "\(page)")
            }
            let otherToken = try PortalPageTests.forgedToken(cookie: editorCookie, purpose: "user-suspend:\(otherId):\(otherUser)")
            #expect(try await editor.post("/portal/apps/\(otherId)/users/\(otherUser)/suspend", [("csrf", otherToken)]).status == .notFound)
        }
    }

    @Test("pending signups and invitations: listed, cancelled, and an invitation sent and sent again through the admin service")
    func pending() async throws {
        let (operatorSession, _) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let (appId, token) = try await Self.app(api, settings: ["signupFlow": .string("code")])
            let (_, editorCookie) = try await PortalPageTests.account(appId: appId, role: .editor, by: operatorSession)
            let sdk = SDK(api: api, appToken: token)
            let signupHandle = PortalPageTests.unique("signup")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(signupHandle)), ("password", SDK.md5("pw"))]).status == .ok)
            let browser = Browser(api: api, session: editorCookie)
            let path = "/portal/apps/\(appId)/pending"
            var page = try await browser.get(path)
            #expect(page.status == .ok)
            PortalPageTests.expectNoInline(page.text, "pending")
            #expect(page.text.contains("id=\"nav-pending\"") && page.text.contains("id=\"signups\"") && page.text.contains("id=\"invites\""))
            #expect(page.text.contains(signupHandle) && page.text.contains("class=\"cancel-signup\""))

            // Invite: a bad address shows the service's message; a good one is stored and e-mailed.
            let inviteToken = try Self.csrf(page.text, after: "id=\"invite-user\"")
            let bad = try await browser.post("\(path)/invite", [("handle", "not-an-address"), ("locale", "EN"), ("csrf", inviteToken)])
            #expect(bad.status == .badRequest && bad.text.contains("id=\"form-error\"") && bad.text.contains("e-mail address"), "\(bad.text)")
            let badLocale = try await browser.post("\(path)/invite", [("handle", PortalPageTests.unique("x")), ("locale", "QQ"), ("csrf", inviteToken)])
            #expect(badLocale.status == .badRequest && badLocale.text.contains("locale"))
            let invitee = PortalPageTests.unique("invitee")
            var reply = try await browser.post("\(path)/invite", [("handle", invitee), ("locale", "EN"), ("csrf", inviteToken)])
            #expect(reply.status == .seeOther, "\(reply.status) \(reply.text)")
            let invites = try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"]?.arrayValue ?? []
            #expect(invites.count == 1 && invites.first?["handle"] == .string(invitee.lowercased()))
            let inviteId = try #require(invites.first?["id"]?.stringValue)
            let mails = { try await TestEnvironment.value(
                "SELECT count(*)::int FROM messages WHERE recipient = \(invitee.lowercased())", as: Int.self) ?? -1 }
            let mailed = try await mails()
            page = try await browser.get(try #require(reply.headers[.location]))
            #expect(page.text.contains("role=\"status\"") && page.text.contains(invitee.lowercased()))
            // Resend: the same invitation (one row), its e-mail again.
            #expect(page.text.contains("class=\"resend-invite\""))
            reply = try await browser.post(
                "\(path)/invite", [("handle", invitee.lowercased()), ("locale", "EN"), ("metaData", ""), ("csrf", try Self.csrf(page.text, after: "class=\"resend-invite\""))])
            #expect(reply.status == .seeOther)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"]?.arrayValue?.count == 1)
            #expect(try await mails() == mailed + 1, "the resend e-mails the invitation again")

            // Cancel both.
            page = try await browser.get(path)
            reply = try await browser.post("\(path)/invites/\(inviteId)/cancel", [("csrf", try Self.csrf(page.text, after: "/invites/\(inviteId)/cancel\""))])
            #expect(reply.status == .seeOther && reply.headers[.location] == "\(path)?done=cancelled")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"]?.arrayValue?.isEmpty == true)
            let signupId = try #require(try await api.call(.get, "/admin/v1/apps/\(appId)/signups").object["signups"]?.arrayValue?.first?["id"]?.stringValue)
            reply = try await browser.post("\(path)/signups/\(signupId)/cancel", [("csrf", try Self.csrf(page.text, after: "/signups/\(signupId)/cancel\""))])
            #expect(reply.status == .seeOther)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/signups").object["signups"]?.arrayValue?.isEmpty == true)
            // The same form again: gone (404, not 5xx); a bad kind or cursor: no 5xx.
            #expect(try await browser.post("\(path)/signups/\(signupId)/cancel", [("csrf", try Self.csrf(page.text, after: "/signups/\(signupId)/cancel\""))]).status == .notFound)
            #expect(try await browser.get("\(path)?signupsCursor=nonsense").status == .badRequest)
            let audit = try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE app_id = \(appId) AND actor LIKE 'portal:%'", as: Int.self)
            #expect((audit ?? 0) >= 3)
        }
    }
}
