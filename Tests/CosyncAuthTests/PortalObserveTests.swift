import CosyncAuth
import CosyncPortal
import Foundation
import HTTPTypes
import Testing

/// The Portal's observation pages (issue 23): the overview's SVG charts (the counts real sign-ins
/// and failures made), the audit log with filters, the outbox, and the webhook pages (an endpoint
/// made through the page is the one the admin API lists; a replay queues the message again), with the
/// role refusals. The charts' pure drawing is tested on its own (escaping, zero data, huge numbers).
@Suite("Portal observe pages")
struct PortalObserveTests {
    typealias Browser = PortalPageTests.Browser

    static func today() -> String { String(ISO8601.milliseconds(Date()).prefix(10)) }

    // MARK: the charts, drawn from numbers

    @Test("charts: text is escaped, zero data draws an empty chart, huge and negative numbers do not trap")
    func chartsPure() {
        let hostile = "<script>alert('x')</script> & \"q\""
        let svg = PortalCharts.columns(
            id: "a b<c", title: hostile, summary: hostile, labels: [hostile, "11-27"], values: [3, 5], kind: "sign\"ins")
        #expect(!svg.contains("<script>") && !svg.contains("'x'") && svg.contains("&lt;script&gt;") && svg.contains("&quot;q&quot;"), "\(svg)")
        #expect(svg.contains("role=\"img\"") && svg.contains("aria-label=\"") && svg.contains("<title id=\"chart-a-b-c-title\">"))
        #expect(svg.contains("class=\"chart chart-sign-ins\"") && !svg.contains(" style="))
        #expect(svg.components(separatedBy: "<rect class=\"bar\"").count == 3)

        let zero = PortalCharts.columns(id: "z", title: "Zero", summary: "none", labels: Array(repeating: "d", count: 30), values: Array(repeating: 0, count: 30), kind: "z")
        #expect(zero.contains("height=\"0\"") && !zero.contains("nan") && !zero.contains("inf") && zero.hasSuffix("</svg>"))
        let empty = PortalCharts.columns(id: "e", title: "Empty", summary: "", labels: [], values: [], kind: "e")
        #expect(empty.hasPrefix("<svg") && empty.hasSuffix("</svg>"))
        #expect(PortalCharts.bars(id: "b", title: "B", summary: "", labels: [], values: [], kind: "b").hasSuffix("</svg>"))

        let huge = PortalCharts.columns(
            id: "h", title: "Huge", summary: "", labels: ["a", "b", "c", "d"], values: [Int.max, Int.min, -1, Int.max / 2], kind: "h")
        #expect(huge.contains("\(Int.max)") && !huge.contains("nan") && !huge.contains("e+"), "\(huge)")
        let bars = PortalCharts.bars(
            id: "h", title: "Huge", summary: "", labels: [String(repeating: "x", count: 5_000), hostile], values: [Int.max, Int.max], kind: "h")
        #expect(bars.contains("…") && !bars.contains("<script>"))
        #expect(PortalCharts.total([Int.max, Int.max, -5]) == Int.max && PortalCharts.total([2, -1, 3]) == 5 && PortalCharts.total([]) == 0)
        #expect(PortalCharts.escape("a\u{0}b\u{1F}c") == "a b c")
    }

    // MARK: the overview

    @Test("the overview's charts show the sign-ins, failures and new users made through the end-user API")
    func overviewCounts() async throws {
        let (_, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Portal observe counts", settings: ["signupFlow": .string("none")])
            let appId = created.string("appId"), token = created.string("appToken")
            let sdk = SDK(api: api, appToken: token)
            let handle = PortalPageTests.unique("counted")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            for _ in 0..<3 { #expect(try await sdk.login(handle, "pw").status == .ok) }
            for _ in 0..<2 { #expect(try await sdk.login(handle, "wrong").status != .ok) }

            let browser = Browser(api: api, session: operatorCookie)
            let page = try await browser.get("/portal/apps/\(appId)")
            #expect(page.status == .ok)
            PortalPageTests.expectSecure(page, "overview")
            PortalPageTests.expectNoInline(page.text, "overview")
            for id in ["chart-sign-ins", "chart-failures", "chart-lockouts", "chart-new-users", "chart-outbox"] {
                #expect(page.text.contains("id=\"\(id)\""), "overview lacks the chart \(id)")
            }
            #expect(page.text.components(separatedBy: "role=\"img\"").count >= 6)
            // Today's row of the numbers' table: sign-ins, failures, lockouts, new users.
            let row = "<tr><th scope=\"row\">\(Self.today())</th><td>3</td><td>2</td><td>0</td><td>1</td></tr>"
            #expect(page.text.contains(row), "today's row: \(page.text.components(separatedBy: "<tbody>").dropFirst().first?.prefix(300) ?? "")")
            #expect(page.text.contains("aria-label=\"Sign-ins\"") && page.text.contains("3 in the last 30 days."))
            #expect(page.text.contains("id=\"nav-audit\"") && page.text.contains("id=\"nav-outbox\"") && page.text.contains("id=\"nav-webhooks\""))
        }
    }

    // MARK: audit and outbox

    @Test("the audit page filters by action, actor, user and dates; a bad filter is a 400 with its message; the outbox shows no contents")
    func auditAndOutbox() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Portal observe audit", settings: ["signupFlow": .string("none")])
            let appId = created.string("appId")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = PortalPageTests.unique("audited")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let users = try await api.call(.get, "/admin/v1/apps/\(appId)/users")
            let userId = try #require(users.object["users"]?.arrayValue?.first?["userId"]?.stringValue)
            #expect(try await api.call(.patch, "/admin/v1/apps/\(appId)/users/\(userId)", json: .object(["locale": .string("EN")])).status == .ok)
            let browser = Browser(api: api, session: operatorCookie)

            let all = try await browser.get("/portal/apps/\(appId)/audit")
            #expect(all.status == .ok && all.text.contains("id=\"audit\"") && all.text.contains("app.create"))
            PortalPageTests.expectNoInline(all.text, "audit")
            let byAction = try await browser.get("/portal/apps/\(appId)/audit?action=user.update")
            #expect(byAction.status == .ok && byAction.text.contains("<code>user.update</code>") && !byAction.text.contains("<code>app.create</code>"))
            let byPrefix = try await browser.get("/portal/apps/\(appId)/audit?action=app.*")
            #expect(byPrefix.text.contains("<code>app.create</code>") && !byPrefix.text.contains("<code>user.update</code>"))
            let byUser = try await browser.get("/portal/apps/\(appId)/audit?user=\(userId)")
            #expect(byUser.text.contains("<code>user.update</code>") && !byUser.text.contains("<code>app.create</code>"))
            let byActor = try await browser.get("/portal/apps/\(appId)/audit?actor=\(PortalPageTests.encode(operatorSession.auditActor))")
            #expect(byActor.status == .ok && !byActor.text.contains("<code>user.update</code>"), "the operator token did the update, not the Portal")
            let future = try await browser.get("/portal/apps/\(appId)/audit?from=2999-01-01")
            #expect(future.status == .ok && !future.text.contains("<code>app.create</code>"))
            let today = try await browser.get("/portal/apps/\(appId)/audit?from=\(Self.today())&to=\(Self.today())")
            #expect(today.text.contains("<code>app.create</code>"))
            for bad in ["user=not-a-uuid", "from=2026-13-01", "to=yesterday", "action=" + String(repeating: "a", count: 101)] {
                let reply = try await browser.get("/portal/apps/\(appId)/audit?\(bad)")
                #expect(reply.status == .badRequest && reply.text.contains("id=\"form-error\""), "\(bad): \(reply.status)")
            }
            #expect(try await browser.get("/portal/apps/\(appId)/audit?cursor=zz").status == .badRequest)

            // The outbox: an invite's e-mail is listed, its code is not.
            let invite = try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string(PortalPageTests.unique("invitee"))]))
            #expect(invite.status == .created)
            let messages = try await api.call(.get, "/admin/v1/apps/\(appId)/messages")
            let body = try #require(messages.object["messages"]?.arrayValue?.first?["body"]?.stringValue)
            let outbox = try await browser.get("/portal/apps/\(appId)/outbox")
            #expect(outbox.status == .ok && outbox.text.contains("id=\"outbox\"") && outbox.text.contains("<td>invite</td>"), "\(outbox.text)")
            // The body (its code, until the outbox redacts it once sent) is never on the page.
            #expect(!outbox.text.contains(body), "the outbox page shows no message body")
            if let code = sixDigitCode(in: body) { #expect(!outbox.text.contains(code), "the outbox page shows no code") }
            PortalPageTests.expectNoInline(outbox.text, "outbox")
        }
    }

    // MARK: webhooks

    /// The value of the hidden csrf of the form whose opening tag contains `marker`.
    static func csrf(_ html: String, form marker: String) throws -> String {
        try #require(PortalPageTests.csrf(html, after: marker), "no form \(marker)")
    }

    @Test("webhooks: an endpoint made through the page is the one the admin API lists; its secret is shown once; a delivery and its attempts; a replay queues it again")
    func webhooks() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        let receiver = try await WebhookReceiver.start()
        defer { receiver.stop() }
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Portal observe hooks", settings: ["signupFlow": .string("none")])
            let appId = created.string("appId")
            let browser = Browser(api: api, session: operatorCookie)
            let list = try await browser.get("/portal/apps/\(appId)/webhooks")
            #expect(list.status == .ok && list.text.contains("id=\"webhook-create-submit\""))
            let token = try Self.csrf(list.text, form: "id=\"new-webhook\"")

            // The URL guard's refusal is shown as the API gives it.
            let refused = try await browser.post(
                "/portal/apps/\(appId)/webhooks", [("url", "http://10.1.2.3/hook"), ("type:user.created", "1"), ("csrf", token)])
            #expect(refused.status == .badRequest && refused.text.contains("id=\"form-error\"") && refused.text.contains("url "), "\(refused.status)")
            let noTypes = try await browser.post("/portal/apps/\(appId)/webhooks", [("url", receiver.url), ("csrf", token)])
            #expect(noTypes.status == .badRequest && noTypes.text.contains("eventTypes"))

            let made = try await browser.post(
                "/portal/apps/\(appId)/webhooks",
                [("url", receiver.url), ("description", "portal test"), ("type:user.created", "1"), ("type:user.login.succeeded", "1"), ("csrf", token)])
            #expect(made.status == .seeOther)
            let location = try #require(made.headers[.location])
            let webhookId = try #require(location.split(separator: "/").last.map(String.init))
            let listed = try await api.call(.get, "/admin/v1/apps/\(appId)/webhooks")
            let endpoint = try #require(listed.object["webhooks"]?.arrayValue?.first?.objectValue)
            #expect(endpoint["webhookId"]?.stringValue == webhookId && endpoint["url"]?.stringValue == receiver.url)
            #expect(endpoint["eventTypes"] == .array([.string("user.created"), .string("user.login.succeeded")]))
            let audit = try await TestEnvironment.value(
                "SELECT actor FROM audit_log WHERE app_id = \(appId) AND action = 'webhook.create'", as: String.self)
            #expect(audit == operatorSession.auditActor)

            let shown = try await browser.get(location)
            let secret = try #require(PortalPageTests.text(shown.text, id: "webhook-secret"))
            #expect(secret.hasPrefix("whsec_"), "\(secret)")
            #expect(try await browser.get(location).text.contains("id=\"webhook-secret\"") == false, "the secret is shown once")
            try receiver.configure(secrets: [secret])

            // An event: delivered, listed with its attempt.
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(PortalPageTests.unique("hooked"))), ("password", SDK.md5("pw"))]).status == .ok)
            let first = try await receiver.wait { $0.contains { $0.type == "user.created" } }
            let messageId = try #require(first.first { $0.type == "user.created" }?.id)
            var page = try await browser.get(location)
            for _ in 0..<50 where !page.text.contains(">delivered<") {
                try await Task.sleep(for: .milliseconds(100))
                page = try await browser.get(location)
            }
            #expect(page.text.contains("id=\"deliveries\"") && page.text.contains(messageId) && page.text.contains("class=\"replay-delivery\""))
            PortalPageTests.expectNoInline(page.text, "webhook")
            let deliveryPath = "\(location)/deliveries/\(messageId)"
            let delivery = try await browser.get(deliveryPath)
            #expect(delivery.status == .ok && delivery.text.contains("id=\"attempts\"") && delivery.text.contains("<td>1</td>"), "\(delivery.status)")
            // Facts it does not have are left out (an empty value would still open its Mustache section).
            #expect(!delivery.text.contains("Next attempt") && !delivery.text.contains("Last error</dt>"))
            #expect(page.text.contains("id=\"webhook-state\">enabled</dd>") && !page.text.contains("Previous secret signs until"))
            #expect(try await browser.get("\(location)/deliveries/msg_\(UUID().uuidString.lowercased())").status == .notFound)

            // Replay: queued again with the same webhook-id.
            let replay = try await browser.post("\(deliveryPath)/replay", [("csrf", try Self.csrf(delivery.text, form: "id=\"replay-delivery\""))])
            #expect(replay.status == .seeOther, "\(replay.status) \(replay.text)")
            let again = try await receiver.wait { all in all.filter { $0.id == messageId }.count >= 2 }
            #expect(again.filter { $0.id == messageId }.count >= 2, "the replayed message arrived again")
            let replayed = try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE app_id = \(appId) AND action = 'webhook.replay'", as: Int.self)
            #expect(replayed == 1)

            // Edit (through the service: the API sees it), disable, rotate (a new secret once), delete.
            let edit = try await browser.post(
                location, [("url", receiver.url), ("description", "edited"), ("type:user.created", "1"), ("enabled", "1"),
                           ("csrf", try Self.csrf(page.text, form: "id=\"edit-webhook\""))])
            #expect(edit.status == .seeOther)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/webhooks/\(webhookId)").object["description"] == .string("edited"))
            let badEdit = try await browser.post(
                location, [("url", "ftp://example.com/"), ("type:user.created", "1"), ("csrf", try Self.csrf(page.text, form: "id=\"edit-webhook\""))])
            #expect(badEdit.status == .badRequest && badEdit.text.contains("id=\"form-error\""))
            let rotate = try await browser.post("\(location)/rotate-secret", [("csrf", try Self.csrf(page.text, form: "id=\"rotate-webhook-secret\""))])
            #expect(rotate.status == .seeOther)
            let rotated = try await browser.get(location)
            let newSecret = try #require(PortalPageTests.text(rotated.text, id: "webhook-secret"))
            #expect(newSecret != secret && newSecret.hasPrefix("whsec_"))
            let disable = try await browser.post("\(location)/disable", [("csrf", try Self.csrf(page.text, form: "id=\"disable-webhook\""))])
            #expect(disable.status == .seeOther)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/webhooks/\(webhookId)").object["enabled"] == .bool(false))

            // A stale session signs in again before rotating or deleting.
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '6 minutes' WHERE id = \(operatorSession.id)")
            let stale = try await browser.post("\(location)/delete", [("csrf", try Self.csrf(page.text, form: "id=\"delete-webhook\""))])
            #expect(stale.status == .seeOther && stale.headers[.location]?.hasPrefix("/portal/reauth?next=") == true)
            let staleRotate = try await browser.post("\(location)/rotate-secret", [("csrf", try Self.csrf(page.text, form: "id=\"rotate-webhook-secret\""))])
            #expect(staleRotate.headers[.location]?.hasPrefix("/portal/reauth?next=") == true)
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() WHERE id = \(operatorSession.id)")
            let deleted = try await browser.post("\(location)/delete", [("csrf", try Self.csrf(page.text, form: "id=\"delete-webhook\""))])
            #expect(deleted.status == .seeOther)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/webhooks/\(webhookId)").status == .notFound)
            #expect(try await browser.get(location).status == .notFound)
        }
    }

    // MARK: refusals

    /// The CSRF purpose of a webhook form, as the pages bind it.
    static func purpose(_ action: String, appId: String, webhookId: String = "", messageId: String = "") -> String {
        "webhook-\(action):\(appId):\(webhookId.lowercased()):\(messageId)"
    }

    @Test("a viewer sees the pages without controls and a forged POST answers 403; an editor cannot delete; another app answers 404; no CSRF answers 403")
    func refusals() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let mine = try await api.createApp("Portal observe viewer").string("appId")
            let other = try await api.createApp("Portal observe other").string("appId")
            let hook = try await api.call(
                .post, "/admin/v1/apps/\(mine)/webhooks", json: .object(["url": .string("http://127.0.0.1:9/hook"), "eventTypes": .array([.string("user.created")])]))
            #expect(hook.status == .created)
            let webhookId = hook.object.string("webhookId")
            let (_, viewerCookie) = try await PortalPageTests.account(appId: mine, role: .viewer, by: operatorSession)
            let (_, editorCookie) = try await PortalPageTests.account(appId: mine, role: .editor, by: operatorSession)
            let viewer = Browser(api: api, session: viewerCookie)
            let base = "/portal/apps/\(mine)/webhooks"

            for path in ["/portal/apps/\(mine)", "/portal/apps/\(mine)/audit", "/portal/apps/\(mine)/outbox", base, "\(base)/\(webhookId)"] {
                let reply = try await viewer.get(path)
                #expect(reply.status == .ok, "\(path): \(reply.status)")
                #expect(!reply.text.contains("method=\"post\" action=\"/portal/apps/"), "\(path) shows a form that changes something")
                PortalPageTests.expectSecure(reply, path)
            }
            let message = "msg_\(UUID().uuidString.lowercased())"
            let posts: [(String, String, [(String, String)])] = [
                (base, Self.purpose("create", appId: mine), [("url", "http://127.0.0.1:9/x"), ("type:user.created", "1")]),
                ("\(base)/\(webhookId)", Self.purpose("edit", appId: mine, webhookId: webhookId), [("url", "http://127.0.0.1:9/y")]),
                ("\(base)/\(webhookId)/disable", Self.purpose("disable", appId: mine, webhookId: webhookId), []),
                ("\(base)/\(webhookId)/rotate-secret", Self.purpose("rotate", appId: mine, webhookId: webhookId), []),
                ("\(base)/\(webhookId)/delete", Self.purpose("delete", appId: mine, webhookId: webhookId), []),
                ("\(base)/\(webhookId)/deliveries/\(message)/replay",
                 Self.purpose("replay", appId: mine, webhookId: webhookId, messageId: message), []),
            ]
            for (path, purpose, fields) in posts {
                let forged = try await viewer.post(path, fields + [("csrf", try PortalPageTests.forgedToken(cookie: viewerCookie, purpose: purpose))])
                #expect(forged.status == .forbidden, "viewer \(path): \(forged.status)")
                let bare = try await Browser(api: api, session: operatorCookie).post(path, fields)
                #expect(bare.status == .forbidden, "no CSRF \(path): \(bare.status)")
            }
            let stored = try await api.call(.get, "/admin/v1/apps/\(mine)/webhooks/\(webhookId)")
            #expect(stored.object["url"] == .string("http://127.0.0.1:9/hook") && stored.object["enabled"] == .bool(true), "nothing changed")
            #expect(try await api.call(.get, "/admin/v1/apps/\(mine)/webhooks").object["webhooks"]?.arrayValue?.count == 1)

            // An editor edits but neither deletes nor rotates the signing secret (key material: owners
            // and operators only), and sees neither form.
            let editor = Browser(api: api, session: editorCookie)
            let editorPage = try await editor.get("\(base)/\(webhookId)")
            #expect(editorPage.text.contains("id=\"edit-webhook\"") && !editorPage.text.contains("id=\"delete-webhook\""))
            #expect(!editorPage.text.contains("id=\"rotate-webhook-secret\""), "an editor sees the secret rotation")
            let deletePurpose = Self.purpose("delete", appId: mine, webhookId: webhookId)
            #expect(try await editor.post("\(base)/\(webhookId)/delete", [("csrf", try PortalPageTests.forgedToken(cookie: editorCookie, purpose: deletePurpose))]).status == .forbidden)
            let rotatePurpose = Self.purpose("rotate", appId: mine, webhookId: webhookId)
            let editorRotate = try await editor.post(
                "\(base)/\(webhookId)/rotate-secret", [("csrf", try PortalPageTests.forgedToken(cookie: editorCookie, purpose: rotatePurpose))])
            #expect(editorRotate.status == .forbidden, "an editor's rotation: \(editorRotate.status)")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE app_id = \(mine) AND action LIKE 'webhook.%secret%'", as: Int.self) == 0)
            // An owner (not an operator) sees the rotation form.
            let (_, ownerCookie) = try await PortalPageTests.account(appId: mine, role: .owner, by: operatorSession)
            let ownerPage = try await Browser(api: api, session: ownerCookie).get("\(base)/\(webhookId)")
            #expect(ownerPage.text.contains("id=\"rotate-webhook-secret\"") && ownerPage.text.contains("id=\"delete-webhook\""))

            // Another app, a webhook of no app, a malformed id: 404.
            for path in ["/portal/apps/\(other)/audit", "/portal/apps/\(other)/outbox", "/portal/apps/\(other)/webhooks",
                         "/portal/apps/\(other)/webhooks/\(webhookId)", "\(base)/\(UUID().uuidString)", "\(base)/not-an-id",
                         "\(base)/\(webhookId)/deliveries/not-a-message"] {
                #expect(try await viewer.get(path).status == .notFound, "\(path)")
            }
            let otherPurpose = Self.purpose("create", appId: other)
            #expect(try await viewer.post("/portal/apps/\(other)/webhooks", [("csrf", try PortalPageTests.forgedToken(cookie: viewerCookie, purpose: otherPurpose))]).status == .notFound)
        }
    }
}
