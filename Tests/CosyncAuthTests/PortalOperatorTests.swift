import CosyncAuth
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// The Portal's operator views and the import page (issue 23) at the HTTP level, on the real
/// PostgreSQL: operators only (a developer gets 404), suspending an account ends its sessions at once,
/// the import's dry run and import (the imported users then sign in through the end-user API with
/// their legacy password hashes), CSRF and role refusals.
@Suite("Portal operator views and import", .serialized)
struct PortalOperatorTests {
    typealias Browser = PortalPageTests.Browser

    /// A multipart/form-data POST with the browser's cookies.
    static func upload(_ browser: Browser, _ path: String, csrf: String?, file: Data?) async throws -> API.Reply {
        let boundary = "----cosync" + Secrets.hexIdentifier().prefix(16)
        var body = Data()
        func add(_ text: String) { body.append(Data(text.utf8)) }
        if let csrf { add("--\(boundary)\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n\(csrf)\r\n") }
        if let file {
            add("--\(boundary)\r\nContent-Disposition: form-data; name=\"export\"; filename=\"export.zip\"\r\nContent-Type: application/zip\r\n\r\n")
            body.append(file)
            add("\r\n")
        }
        add("--\(boundary)--\r\n")
        var headers = browser.cookieHeader
        headers[.contentType] = "multipart/form-data; boundary=\(boundary)"
        let reply = try await browser.api.client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(bytes: body)) { response in
            API.Reply(status: response.status, headers: response.headers, text: String(buffer: response.body))
        }
        browser.keep(reply)
        return reply
    }

    /// A legacy export ZIP of a generated app with a random appId (make_fixture.py with a random seed,
    /// three apps, nine bench users; make_export_zip.py of the third app) and the manifest.
    static func exportZip() throws -> (zip: Data, appId: String, appToken: String, handle: String, password: String) {
        let (folder, manifest) = try LegacyFixture.make(["--apps", "3", "--users", "9", "--pool-size", "3"])
        let app = try #require(manifest["apps"]?.arrayValue?.dropFirst(2).first?.objectValue)
        let appId = try #require(app["appId"]?.stringValue), token = try #require(app["appToken"]?.stringValue)
        let zip = folder.appendingPathComponent("export.zip")
        let make = Process()
        make.executableURL = URL(fileURLWithPath: try LegacyFixture.python())
        make.arguments = [LegacyFixture.root.appendingPathComponent("Tests/system/legacy/make_export_zip.py").path, folder.path, appId, zip.path]
        make.standardOutput = FileHandle.nullDevice
        try make.run()
        make.waitUntilExit()
        try #require(make.terminationStatus == 0)
        // Bench user i belongs to apps[i % 3]; user 2 is the third app's, password pool[2 % 3].
        let pool = try #require(manifest["bench"]?["pool"]?.arrayValue)
        let password = try #require(pool[2]["password"]?.stringValue)
        return (try Data(contentsOf: zip), appId, token, "user0000002@bench.example", password)
    }

    /// The job page until its phase is not `phase` any more (at most ~60 s).
    static func waitWhile(_ phase: String, _ browser: Browser, _ path: String) async throws -> API.Reply {
        var page = try await browser.get(path)
        for _ in 0..<300 where page.text.contains("data-phase=\"\(phase)\"") {
            try await Task.sleep(for: .milliseconds(200))
            page = try await browser.get(path)
        }
        return page
    }

    @Test("the operator views: an operator sees tenants with their figures and the accounts; a developer gets 404 for pages and forms")
    func operatorOnly() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Tenant view " + Secrets.hexIdentifier().prefix(6), settings: ["signupFlow": .string("none")])
            let appId = created.string("appId")
            let appToken = created.string("appToken")
            let sdk = SDK(api: api, appToken: appToken)
            let handle = PortalPageTests.unique("tenant")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            #expect(try await sdk.login(handle, "pw").status == .ok)
            let (developer, developerCookie) = try await PortalPageTests.account(appId: appId, role: .owner, by: operatorSession)

            let browser = Browser(api: api, session: operatorCookie)
            let home = try await browser.get("/portal")
            #expect(home.text.contains("id=\"nav-tenants\"") && home.text.contains("id=\"nav-accounts\""))
            let tenants = try await browser.get("/portal/tenants?q=" + PortalPageTests.encode(String(appId.prefix(12))))
            #expect(tenants.status == .ok)
            PortalPageTests.expectSecure(tenants, "tenants")
            PortalPageTests.expectNoInline(tenants.text, "tenants")
            // Name, id, status, 1 user, 1 live session, a last sign-in, events of 7 days.
            let row = try #require(tenants.text.components(separatedBy: "<tr>").first { $0.contains("/portal/apps/\(appId)\"") })
            #expect(row.contains("<td class=\"num\">1</td><td class=\"num\">2</td>") && row.contains(" UTC</td>"), "\(row)")
            #expect(try await browser.get("/portal/tenants?cursor=nonsense").status == .badRequest)
            let accounts = try await browser.get("/portal/accounts?q=" + PortalPageTests.encode(developer.account.email))
            #expect(accounts.status == .ok && accounts.text.contains(developer.account.email) && accounts.text.contains("/portal/apps/\(appId)\""))
            PortalPageTests.expectNoInline(accounts.text, "accounts")

            let dev = Browser(api: api, session: developerCookie)
            let devHome = try await dev.get("/portal")
            #expect(devHome.status == .ok && !devHome.text.contains("nav-tenants") && !devHome.text.contains("nav-accounts"))
            for path in ["/portal/tenants", "/portal/accounts", "/portal/import"] {
                #expect(try await dev.get(path).status == .notFound, "\(path)")
            }
            let id = operatorSession.account.id.uuidString.lowercased()
            for (path, purpose, fields) in [
                ("/portal/accounts/\(id)/suspend", "account-status:\(id)", [(String, String)]()),
                ("/portal/accounts/invite", "invite-operator", [("email", PortalPageTests.unique("x"))]),
                ("/portal/accounts/\(developer.account.id.uuidString.lowercased())/roles/\(appId)/remove",
                 "remove-role:\(developer.account.id.uuidString.lowercased()):\(appId)", []),
            ] {
                let token = try PortalPageTests.forgedToken(cookie: developerCookie, purpose: purpose)
                #expect(try await dev.post(path, fields + [("csrf", token)]).status == .notFound, "\(path)")
            }
            #expect(try await TestEnvironment.value(
                "SELECT status FROM portal_accounts WHERE id = \(operatorSession.account.id)", as: String.self) == "active")
        }
    }

    @Test("suspending a portal account ends its session at once; activating, removing a role and inviting an operator work; CSRF-less 403")
    func accountActions() async throws {
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Accounts " + Secrets.hexIdentifier().prefix(6)).string("appId")
            let (developer, developerCookie) = try await PortalPageTests.account(appId: appId, role: .editor, by: operatorSession)
            let dev = Browser(api: api, session: developerCookie)
            #expect(try await dev.get("/portal/apps/\(appId)").status == .ok)

            let browser = Browser(api: api, session: operatorCookie)
            let id = developer.account.id.uuidString.lowercased()
            let page = try await browser.get("/portal/accounts?q=" + PortalPageTests.encode(developer.account.email))
            let token = try #require(PortalPageTests.csrf(page.text, after: "/portal/accounts/\(id)/suspend\""))
            #expect(try await browser.post("/portal/accounts/\(id)/suspend", []).status == .forbidden, "CSRF-less")
            #expect(try await dev.get("/portal/apps/\(appId)").status == .ok, "nothing changed")
            let suspended = try await browser.post("/portal/accounts/\(id)/suspend", [("csrf", token)])
            #expect(suspended.status == .ok && suspended.text.contains("suspended"), "\(suspended.status)")
            // The developer's next request finds no session.
            let after = try await dev.get("/portal/apps/\(appId)")
            #expect(after.status == .seeOther && after.headers[.location] == "/portal/sign-in")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM portal_sessions WHERE account_id = \(developer.account.id)", as: Int.self) == 0)
            let audit = try await TestEnvironment.value(
                "SELECT actor FROM audit_log WHERE action = 'portal.account.suspend' AND detail->>'account' = \(developer.account.email)", as: String.self)
            #expect(audit == operatorSession.auditActor)
            // An operator cannot suspend themselves.
            let me = operatorSession.account.id.uuidString.lowercased()
            let own = try await browser.post("/portal/accounts/\(me)/suspend", [("csrf", try PortalPageTests.forgedToken(cookie: operatorCookie, purpose: "account-status:\(me)"))])
            #expect(own.status == .conflict && own.text.contains("id=\"form-error\""))

            let activate = try await browser.post("/portal/accounts/\(id)/activate", [("csrf", token)])
            #expect(activate.status == .ok)
            #expect(try await TestEnvironment.value("SELECT status FROM portal_accounts WHERE id = \(developer.account.id)", as: String.self) == "active")

            // Remove the role: the app is gone from the developer's reach.
            let listed = try await browser.get("/portal/accounts?q=" + PortalPageTests.encode(developer.account.email))
            let removeToken = try #require(PortalPageTests.csrf(listed.text, after: "/roles/\(appId)/remove\""))
            #expect(try await browser.post("/portal/accounts/\(id)/roles/\(appId)/remove", [("csrf", removeToken)]).status == .ok)
            #expect(try await services().portal.role(of: developer, appId: appId) == nil)
            #expect(try await browser.post("/portal/accounts/\(id)/roles/\(appId)/remove", [("csrf", removeToken)]).status == .notFound)

            // Invite an operator: the link is shown once.
            let inviteToken = try #require(PortalPageTests.csrf(listed.text, after: "action=\"/portal/accounts/invite\""))
            let email = PortalPageTests.unique("op2")
            let invited = try await browser.post("/portal/accounts/invite", [("email", email), ("csrf", inviteToken)])
            #expect(invited.status == .ok && invited.text.contains("id=\"invite-link\""))
            let code = try #require(PortalPageTests.text(invited.text, id: "invite-link")?.split(separator: "/").last.map(String.init))
            #expect(try await services().portal.inviteEmail(code: code) == email)
            let bad = try await browser.post("/portal/accounts/invite", [("email", "not an address"), ("csrf", inviteToken)])
            #expect(bad.status == .badRequest && bad.text.contains("id=\"form-error\""))
        }
    }

    func services() async throws -> CosyncServices { try await TestEnvironment.services() }

    @Test("import: upload an export ZIP, see the dry run, import with progress; the users sign in with their legacy passwords")
    func importZip() async throws {
        let export = try Self.exportZip()
        let (operatorSession, operatorCookie) = try await PortalPageTests.account(operator: true)
        let actor = operatorSession.auditActor
        try await TestEnvironment.withLiveServer { api in
            let browser = Browser(api: api, session: operatorCookie)
            let form = try await browser.get("/portal/import")
            #expect(form.status == .ok && form.text.contains("enctype=\"multipart/form-data\"") && form.text.contains("id=\"export\""))
            PortalPageTests.expectNoInline(form.text, "import")
            #expect(!form.text.contains("http-equiv"))
            let token = try #require(PortalPageTests.csrf(form.text, after: "id=\"import-upload\""))
            // CSRF-less and wrong-token uploads are refused; a form that is not multipart is a 400.
            #expect(try await Self.upload(browser, "/portal/import", csrf: nil, file: export.zip).status == .forbidden)
            #expect(try await Self.upload(browser, "/portal/import", csrf: "forged", file: export.zip).status == .forbidden)
            #expect(try await browser.post("/portal/import", [("csrf", token)]).status == .badRequest)
            let empty = try await Self.upload(browser, "/portal/import", csrf: token, file: nil)
            #expect(empty.status == .badRequest && empty.text.contains("id=\"form-error\""))
            let notZip = try await Self.upload(browser, "/portal/import", csrf: token, file: Data("not a zip".utf8))
            let notZipJob = try #require(notZip.headers[.location])
            let failed = try await Self.waitWhile("checking", browser, notZipJob)
            #expect(failed.text.contains("id=\"import-failed\""), "\(failed.text)")
            // A ZIP bomb (32 MiB of one byte in ~32 KB) is refused by the check, with the reason.
            let bomb = try await Self.upload(browser, "/portal/import", csrf: token, file: try LegacyZipLimitTests.bomb())
            let bombPage = try await Self.waitWhile("checking", browser, try #require(bomb.headers[.location]))
            #expect(bombPage.text.contains("id=\"import-failed\"") && bombPage.text.contains("ZIP bomb"), "\(bombPage.text)")

            let uploaded = try await Self.upload(browser, "/portal/import", csrf: token, file: export.zip)
            #expect(uploaded.status == .seeOther, "\(uploaded.status) \(uploaded.text)")
            let job = try #require(uploaded.headers[.location])
            let checked = try await Self.waitWhile("checking", browser, job)
            #expect(checked.text.contains("data-phase=\"checked\"") && checked.text.contains("id=\"import-summary\""), "\(checked.text)")
            #expect(checked.text.contains("<th scope=\"row\">users</th><td class=\"num\">3</td>"), "the dry run counts the app's users")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM apps WHERE app_id = \(export.appId)", as: Int.self) == 0,
                    "a dry run writes nothing")
            let status = try await browser.get(job + "/status")
            #expect(status.status == .ok && status.object["phase"] == .string("checked"))
            let runToken = try #require(PortalPageTests.csrf(checked.text, after: "id=\"import-run\""))
            #expect(try await browser.post(job + "/run", []).status == .forbidden, "CSRF-less")
            let started = try await browser.post(job + "/run", [("csrf", runToken)])
            #expect(started.status == .seeOther)
            let done = try await Self.waitWhile("running", browser, job)
            #expect(done.text.contains("id=\"import-done\""), "\(done.text)")
            // The upload, the dry run and the import are audited with the operator's identity, on the app.
            func count(_ action: String, status: String = "success", appId: String? = nil) async throws -> Int {
                let rows = try await TestEnvironment.value(
                    """
                    SELECT count(*)::int FROM audit_log WHERE actor = \(actor) AND action = \(action) AND status = \(status)
                    AND (\(appId ?? "") = '' OR (app_id = \(appId ?? "") AND app_ref IS NOT NULL))
                    """, as: Int.self)
                return rows ?? 0
            }
            #expect(try await count("import.upload") == 3)
            #expect(try await count("import.check", status: "error") == 2, "the file that is not a ZIP, and the bomb")
            #expect(try await count("import.check") == 1)
            #expect(try await count("import.run", appId: export.appId) == 1)
            #expect(try await count("app.import", appId: export.appId) == 1)
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE app_id = \(export.appId) AND actor = 'import'", as: Int.self) == 0)

            // The imported user signs in with the old app token and the old password.
            let sdk = SDK(api: api, appToken: export.appToken)
            let login = try await sdk.login(export.handle, export.password)
            #expect(login.status == .ok, "\(login.status) \(login.text)")
            #expect(try await sdk.login(export.handle, "wrong password").status != .ok)

            // The app's own import page: an export of another app is refused by the check.
            let appId = try await api.createApp("Import scope " + Secrets.hexIdentifier().prefix(6)).string("appId")
            let appForm = try await browser.get("/portal/apps/\(appId)/import")
            #expect(appForm.status == .ok && appForm.text.contains("id=\"nav-import\""))
            let appToken = try #require(PortalPageTests.csrf(appForm.text, after: "id=\"import-upload\""))
            let wrong = try await Self.upload(browser, "/portal/apps/\(appId)/import", csrf: appToken, file: export.zip)
            let wrongJob = try #require(wrong.headers[.location])
            let wrongPage = try await Self.waitWhile("checking", browser, wrongJob)
            #expect(wrongPage.text.contains("id=\"import-failed\"") && wrongPage.text.contains(export.appId), "\(wrongPage.text)")
            // Another account does not see the job.
            let (_, otherCookie) = try await PortalPageTests.account(operator: true)
            #expect(try await Browser(api: api, session: otherCookie).get(job + "/status").status == .notFound)
        }
    }

    @Test("import: viewers and editors see no upload form and a forged upload or run answers 403; another app 404")
    func importRoles() async throws {
        let (operatorSession, _) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Import roles " + Secrets.hexIdentifier().prefix(6)).string("appId")
            let other = try await api.createApp("Import other " + Secrets.hexIdentifier().prefix(6)).string("appId")
            for role in [PortalRole.viewer, .editor] {
                let (_, cookie) = try await PortalPageTests.account(appId: appId, role: role, by: operatorSession)
                let browser = Browser(api: api, session: cookie)
                let page = try await browser.get("/portal/apps/\(appId)/import")
                #expect(page.status == .ok && !page.text.contains("id=\"import-upload\"") && page.text.contains("class=\"notice\""), "\(role)")
                let token = try PortalPageTests.forgedToken(cookie: cookie, purpose: "import:\(appId)")
                let upload = try await Self.upload(browser, "/portal/apps/\(appId)/import", csrf: token, file: Data("PK".utf8))
                #expect(upload.status == .forbidden, "\(role): \(upload.status)")
                let jobId = UUID().uuidString.lowercased()
                let run = try await browser.post(
                    "/portal/apps/\(appId)/import/\(jobId)/run", [("csrf", try PortalPageTests.forgedToken(cookie: cookie, purpose: "import-run:\(jobId)"))])
                #expect(run.status == .forbidden)
                #expect(try await browser.get("/portal/apps/\(other)/import").status == .notFound)
                let otherToken = try PortalPageTests.forgedToken(cookie: cookie, purpose: "import:\(other)")
                #expect(try await Self.upload(browser, "/portal/apps/\(other)/import", csrf: otherToken, file: Data("PK".utf8)).status == .notFound)
            }
        }
    }
}
