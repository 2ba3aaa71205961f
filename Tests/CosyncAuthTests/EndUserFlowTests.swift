import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// End-to-end through a live port, with bodies built the way the SDK builds them, codes read from the
/// e-mails the fake SendGrid received.
@Suite("End-user API: flows")
struct EndUserFlowTests {
    static func unique(_ name: String) -> String { "\(name)+\(Secrets.hexIdentifier().prefix(8))@example.com" }

    func makeApp(_ api: API, _ settings: [String: JSONValue]) async throws -> (SDK, [String: JSONValue]) {
        let created = try await api.createApp("E2E \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))", settings: settings)
        return (SDK(api: api, appToken: created.string("appToken")), created)
    }

    @Test("signup (code) → e-mailed code → completeSignup → login → getUser; JWT passes the SDK's isValidJWT")
    func signupCodeFlow() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await makeApp(api, [
                "signupFlow": .string("code"), "locales": .array([.string("EN"), .string("FR")]),
                "metaData": .array([.object(["path": .string("user.firstName"), "fieldName": .string("firstName"), "required": .bool(true)])]),
            ])
            let settings = try await sdk.get("/api/appuser/getApplication")
            #expect(settings.object["signupFlow"] == .string("code") && settings.object["userNamesEnabled"] == .bool(false))
            let handle = Self.unique("ann")
            let signup = try await sdk.post("/api/appuser/signup", [
                ("handle", SDK.handle(handle)), ("password", SDK.md5("Secret1!")),
                ("metaData", #"{"user":{"firstName":" Ann Lee "},"junk":"dropped"}"#), ("locale", "fr"),
            ])
            #expect(signup.status == .ok && signup.text == "true", "\(signup.text)")
            // Pending: login says "not verified".
            #expect(try await sdk.login(handle, "Secret1!").object["code"] == .int(608))

            let mails = try await TestEnvironment.sendGrid.value.waitForMails(to: handle)
            let mail = try #require(mails.first)
            #expect(mail.authorization == "Bearer \(TestEnvironment.sendGridKey)")
            let code = try #require(sixDigitCode(in: mail.text))
            #expect(mail.subject.contains(app.string("name")))
            #expect(mail.html.contains(handle))

            let wrong = try await sdk.post("/api/appuser/completeSignup", [("handle", SDK.handle(handle)), ("code", code == "123456" ? "654321" : "123456")])
            #expect(wrong.text == #"{"code":602,"message":"invalid data"}"#)
            let done = try await sdk.post("/api/appuser/completeSignup", [("handle", SDK.handle(handle)), ("code", code)])
            #expect(done.status == .ok, "\(done.text)")
            let jwt = done.object.string("jwt")
            #expect(!done.object.string("access-token").isEmpty && !done.object.string("signed-user-token").isEmpty)
            #expect(SDKJWTCheck.isValid(jwt: jwt, rawPublicKey: app.string("rawPublicKey")))
            #expect(!SDKJWTCheck.isValid(jwt: jwt + "x", rawPublicKey: app.string("rawPublicKey")))
            #expect(SDKJWTCheck.header(jwt) == ["alg": .string("RS256"), "typ": .string("JWT")])
            let claims = SDKJWTCheck.payload(jwt)
            #expect(claims["sub"] == .string(handle) && claims["aud"] == .string("none") && claims["email"] == .string(handle))
            #expect(claims["user"] == .object(["firstName": .string("Ann Lee")]))
            #expect(claims["junk"] == nil)
            let exp = claims["exp"]?.intValue ?? 0, iat = claims["iat"]?.intValue ?? 0
            #expect(exp - iat == 24 * 3600)
            // Completing twice: already registered.
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", SDK.handle(handle)), ("code", code)]).object["code"] == .int(601))

            let login = try await sdk.login(handle, "Secret1!")
            #expect(login.status == .ok && SDKJWTCheck.isValid(jwt: login.object.string("jwt"), rawPublicKey: app.string("rawPublicKey")))
            let access = login.object.string("access-token")
            let user = try await sdk.get("/api/appuser/getUser", accessToken: access)
            #expect(user.object.string("handle") == handle && user.object.string("locale") == "FR")
            #expect(user.object["loginProvider"] == .string("") && user.object["phoneVerified"] == .bool(false))
            #expect(user.object.string("appId") == app.string("appId"))
            let lastLogin = user.object.string("lastLogin")
            #expect(lastLogin.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil, "\(lastLogin)")
            // Welcome mail after completion.
            let all = try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: 2)
            #expect(all.count == 2)
        }
    }

    @Test("signup (link): the e-mailed link completes the signup and shows the clickThrough page")
    func signupLinkFlow() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("link")])
            let handle = Self.unique("lin")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw12345"))]).text == "true")
            let mail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: handle).first)
            let href = try #require(mail.html.range(of: #"href="[^"]+""#, options: .regularExpression).map { String(mail.html[$0].dropFirst(6).dropLast()) })
            let url = try #require(URLComponents(string: href.replacingOccurrences(of: "&amp;", with: "&")))
            #expect(url.path == "/api/appuser/completeSignup")
            #expect(url.queryItems?.first(where: { $0.name == "handle" })?.value == handle)
            let page = try await api.call(.get, "\(url.path)?\(url.percentEncodedQuery ?? "")", token: nil)
            #expect(page.status == .ok, "\(page.text)")
            #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(page.text.contains(handle))
            #expect(try await sdk.login(handle, "pw12345").status == .ok)
            let again = try await api.call(.get, "\(url.path)?\(url.percentEncodedQuery ?? "")", token: nil)
            #expect(again.status == .badRequest && again.text.contains("601"))
        }
    }

    @Test("signup (none) returns tokens at once and sends the welcome e-mail")
    func signupNoneFlow() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await makeApp(api, ["signupFlow": .string("none"), "realmAppId": .string("realm-abc")])
            let handle = Self.unique("non")
            let reply = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))])
            #expect(reply.status == .ok)
            #expect(Set(reply.object.keys) == ["jwt", "access-token"])
            #expect(SDKJWTCheck.payload(reply.object.string("jwt"))["aud"] == .string("realm-abc"))
            #expect(SDKJWTCheck.isValid(jwt: reply.object.string("jwt"), rawPublicKey: app.string("rawPublicKey")))
            let mail = try await TestEnvironment.sendGrid.value.waitForMails(to: handle)
            #expect(mail.first?.subject.hasPrefix("Welcome") == true)
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).object["code"] == .int(601))
        }
    }

    @Test("invite → e-mailed code → register, with invite metadata merged")
    func inviteRegister() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await makeApp(api, [
                "signupFlow": .string("none"),
                "metaDataInvite": .array([.object(["path": .string("team"), "fieldName": .string("team"), "required": .bool(true)])]),
                "metaData": .array([.object(["path": .string("name"), "fieldName": .string("name")])]),
            ])
            let inviter = Self.unique("boss")
            let access = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(inviter)), ("password", SDK.md5("pw"))]).object.string("access-token")
            let invitee = Self.unique("newbie")
            #expect(try await sdk.post("/api/appuser/invite", [("handle", SDK.handle(invitee)), ("senderUserId", nil), ("metaData", "{}")], accessToken: access).object["code"] == .int(604))
            let invited = try await sdk.post("/api/appuser/invite", [("handle", SDK.handle(invitee)), ("senderUserId", nil), ("metaData", #"{"team":"blue"}"#)], accessToken: access)
            #expect(invited.text == "true", "\(invited.text)")
            #expect(try await sdk.post("/api/appuser/invite", [("handle", SDK.handle(inviter)), ("metaData", #"{"team":"x"}"#)], accessToken: access).object["code"] == .int(601))
            let inviteMail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: invitee).first)
            let code = try #require(sixDigitCode(in: inviteMail.text))
            #expect(try await sdk.post("/api/appuser/register", [("handle", SDK.handle(invitee)), ("password", SDK.md5("pw2")), ("code", "1")]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/register", [("handle", SDK.handle(invitee)), ("password", "short"), ("code", code)]).object["code"] == .int(602))
            let registered = try await sdk.post("/api/appuser/register", [
                ("handle", SDK.handle(invitee.uppercased())), ("password", SDK.md5("pw2")), ("code", code), ("metaData", #"{"name":"Neo","team":"red"}"#),
            ])
            #expect(registered.status == .ok, "\(registered.text)")
            #expect(!registered.object.string("signed-user-token").isEmpty)
            let claims = SDKJWTCheck.payload(registered.object.string("jwt"))
            #expect(claims["sub"] == .string(invitee) && claims["team"] == .string("blue") && claims["name"] == .string("Neo"))
            #expect(SDKJWTCheck.isValid(jwt: registered.object.string("signed-user-token"), rawPublicKey: app.string("rawPublicKey")))
            #expect(try await sdk.post("/api/appuser/register", [("handle", SDK.handle(invitee)), ("password", SDK.md5("pw2")), ("code", code)]).object["code"] == .int(601))
            #expect(try await sdk.login(invitee, "pw2").status == .ok)

            // The admin API invites too (sender "superuser"), through the same outbox.
            let appId = app.string("appId")
            let guest = Self.unique("guest")
            let adminInvite = try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string(guest), "metaData": .object(["team": .string("ops")])]))
            #expect(adminInvite.status == .created, "\(adminInvite.text)")
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string(guest)])).status.code == 422, "team is required")
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string(invitee), "metaData": .object(["team": .string("x")])])).status == .conflict)
            let invites = try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"]?.arrayValue ?? []
            #expect(invites.contains { $0["handle"] == .string(guest) && $0["senderHandle"] == .string("superuser") })
            let guestMail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: guest).first)
            #expect(sixDigitCode(in: guestMail.text) != nil)
            // The worker marks the message sent after SendGrid answered, so the mail can arrive first.
            let outbox = try await waitForItems(count: 1, timeout: .seconds(10)) {
                let messages = (try? await api.call(.get, "/admin/v1/apps/\(appId)/messages?to=\(guest.replacingOccurrences(of: "+", with: "%2B"))"))?
                    .object["messages"]?.arrayValue ?? []
                return messages.filter { $0["status"] == .string("sent") }
            }
            #expect(outbox.count == 1 && outbox.first?["status"] == .string("sent") && outbox.first?["template"] == .string("invite"))
        }
    }

    @Test("forgotPassword → e-mailed code → resetPassword; old password and old access tokens stop working")
    func recovery() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none"), "userNamesEnabled": .bool(true)])
            let handle = Self.unique("forget")
            let oldAccess = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("old"))]).object.string("access-token")
            #expect(try await sdk.post("/api/appuser/forgotPassword", [("handle", SDK.handle(Self.unique("nobody")))]).object["code"] == .int(603))
            #expect(try await sdk.post("/api/appuser/forgotPassword", [("handle", SDK.handle(handle))]).text == "true")
            let resetMail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: 2).first { $0.subject.hasPrefix("Reset") })
            let code = try #require(sixDigitCode(in: resetMail.text))
            #expect(try await sdk.post("/api/appuser/resetPassword", [("handle", SDK.handle(handle)), ("password", SDK.md5("new")), ("code", "000000")]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/resetPassword", [("handle", SDK.handle(handle)), ("password", SDK.md5("new")), ("code", "12ab")]).object["code"] == .int(602))
            let reset = try await sdk.post("/api/appuser/resetPassword", [("handle", SDK.handle(handle)), ("password", SDK.md5("new")), ("code", code)])
            #expect(reset.text == "true", "reset with \(code) from \(resetMail.text): \(reset.text)")
            #expect(try await sdk.post("/api/appuser/resetPassword", [("handle", SDK.handle(handle)), ("password", SDK.md5("x")), ("code", code)]).object["code"] == .int(602), "single use")
            #expect(try await sdk.login(handle, "old").object["code"] == .int(600))
            let login = try await sdk.login(handle, "new")
            #expect(login.status == .ok)
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: oldAccess).object["code"] == .int(405), "reset revokes access tokens")

            // changePassword: wrong current → 602; success ends the user's other sessions and keeps the
            // caller's (the shipped SDK cannot get a new token without asking the user to log in again).
            let access = login.object.string("access-token")
            let otherDevice = try await sdk.login(handle, "new").object.string("access-token")
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: otherDevice).status == .ok)
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("nope")), ("newPassword", SDK.md5("newer"))], accessToken: access).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("new")), ("newPassword", SDK.md5("new"))], accessToken: access).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("new")), ("newPassword", SDK.md5("newer"))], accessToken: access).text == "true")
            let after = try await sdk.get("/api/appuser/getUser", accessToken: access)
            #expect(after.status == .ok && after.object["handle"] == .string(handle), "the caller's token lives on: \(after.text)")
            #expect(try await sdk.post("/api/appuser/setLocale", [("locale", "EN")], accessToken: access).text == "true")
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: otherDevice).object["code"] == .int(405), "the other device's session ended")
            #expect(try await sdk.login(handle, "newer").status == .ok)
        }
    }

    @Test("concurrent setUserMetadata of different fields both land; writes of a user deleted meanwhile answer 405")
    func concurrentProfileWrites() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, [
                "signupFlow": .string("none"),
                "metaData": .array([
                    .object(["path": .string("profile.nick"), "fieldName": .string("nick"), "canEdit": .bool(true)]),
                    .object(["path": .string("profile.city"), "fieldName": .string("city"), "canEdit": .bool(true)]),
                ]),
            ])
            let handle = Self.unique("meta")
            let access = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).object.string("access-token")
            let userId = try #require(try await TestEnvironment.value("SELECT id FROM users WHERE handle = \(handle)", as: UUID.self))
            // Both writes hold a caller resolved before either wrote: each must merge into the
            // metadata as it is when it writes, not into the snapshot its token check read.
            let holder = try await TestEnvironment.holding("SELECT 1 FROM users WHERE id = \(userId) FOR UPDATE", for: .milliseconds(1000))
            // Straight into the flow (the test client sends one request at a time), truly parallel.
            let services = try await TestEnvironment.services()
            let caller = try await services.resolver.caller(accessToken: access, whenMissing: .invalidAccessToken)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for change in [#"{"profile":{"nick":"Zed"}}"#, #"{"profile":{"city":"Oslo"}}"#] {
                    group.addTask { try await services.flows.setUserMetadata(caller: { caller }, fields: Fields(["metaData": change])) }
                }
                try await group.waitForAll()
            }
            try await holder.value
            let user = try await sdk.get("/api/appuser/getUser", accessToken: access)
            #expect(user.object["metaData"] == .object(["profile": .object(["nick": .string("Zed"), "city": .string("Oslo")])]), "\(user.text)")

            // A deletion in flight: the write waits for it, then answers 405 (it answered true and
            // recorded an event for a user that no longer existed).
            let deletion = try await TestEnvironment.deletingUser(userId, holding: .milliseconds(1000))
            let locale = try await sdk.post("/api/appuser/setLocale", [("locale", "EN")], accessToken: access)
            try await deletion.value
            #expect(locale.object["code"] == .int(405), "\(locale.status) \(locale.text)")
        }
    }

    @Test("profile: setLocale, setUserName, userNameAvailable, setUserMetadata, deleteAccount")
    func profile() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, [
                "signupFlow": .string("none"), "userNamesEnabled": .bool(true), "locales": .array([.string("EN"), .string("DE")]),
                "metaData": .array([
                    .object(["path": .string("profile.nick"), "fieldName": .string("nick"), "canEdit": .bool(true)]),
                    .object(["path": .string("profile.tier"), "fieldName": .string("tier")]),
                ]),
            ])
            let handle = Self.unique("prof")
            let access = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw")),
                                                                    ("metaData", #"{"profile":{"tier":"gold"}}"#)]).object.string("access-token")
            #expect(try await sdk.post("/api/appuser/setLocale", [("locale", "de")], accessToken: access).text == "true")
            #expect(try await sdk.post("/api/appuser/setLocale", [("locale", "JA")], accessToken: access).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/setLocale", [], accessToken: access).object["code"] == .int(403))

            let name = "u" + Secrets.hexIdentifier().prefix(8).filter(\.isLetter)
            #expect(try await sdk.get("/api/appuser/userNameAvailable?userName=\(name)", accessToken: access).text == #"{"available":true}"#)
            #expect(try await sdk.get("/api/appuser/userNameAvailable?userName=9bad", accessToken: access).object["available"] == .bool(false))
            #expect(try await sdk.post("/api/appuser/setUserName", [("userName", "bad name!")], accessToken: access).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/setUserName", [("userName", name.uppercased())], accessToken: access).text == "true")
            #expect(try await sdk.get("/api/appuser/userNameAvailable?userName=\(name)", accessToken: access).object["available"] == .bool(false))
            #expect(try await sdk.post("/api/appuser/setUserName", [("userName", "other")], accessToken: access).object["code"] == .int(602), "set once")
            #expect(try await sdk.login(name, "pw").status == .ok, "login by user name")

            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", #"{"profile":{"nick":"Zed"}}"#)], accessToken: access).text == "true")
            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", #"{"profile":{"tier":"platinum"}}"#)], accessToken: access).object["code"] == .int(604))
            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", "not json")], accessToken: access).object["code"] == .int(602))
            let user = try await sdk.get("/api/appuser/getUser", accessToken: access)
            #expect(user.object["metaData"] == .object(["profile": .object(["nick": .string("Zed"), "tier": .string("gold")])]))
            #expect(user.object.string("userName") == name && user.object.string("locale") == "DE")

            #expect(try await sdk.post("/api/appuser/deleteAccount", [], accessToken: access).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/deleteAccount", [("handle", SDK.handle(handle)), ("password", SDK.md5("wrong"))], accessToken: access).object["code"] == .int(600))
            #expect(try await sdk.post("/api/appuser/deleteAccount", [("handle", SDK.handle(Self.unique("x"))), ("password", SDK.md5("pw"))], accessToken: access).object["code"] == .int(600))
            #expect(try await sdk.post("/api/appuser/deleteAccount", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))], accessToken: access).text == "true")
            #expect(try await sdk.login(handle, "pw").object["code"] == .int(600))
            // A deleted account's token answers 405, like every token that no longer authenticates.
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: access).object["code"] == .int(405))
            // The same handle signs up again: the old account's token does not open the new account.
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: access).object["code"] == .int(405))
        }
    }

    @Test("anonymous login creates the user once and matches the handle exactly")
    func anonymous() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await makeApp(api, ["anonymousLoginEnabled": .bool(true),
                "metaData": .array([.object(["path": .string("name"), "fieldName": .string("name"), "required": .bool(true)])])])
            let handle = "ANON_\(UUID().uuidString)"
            let first = try await sdk.post("/api/appuser/loginAnonymous", [("handle", handle)])
            #expect(first.status == .ok, "\(first.text)")
            #expect(SDKJWTCheck.payload(first.object.string("jwt"))["name"] == .string("ANON_name"))
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", handle)]).status == .ok)
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", "nope")]).object["code"] == .int(600))
            let users = try await api.call(.get, "/admin/v1/apps/\(app.string("appId"))/users?query=anon_").object["users"]?.arrayValue ?? []
            #expect(users.count == 1 && users.first?["handle"] == .string(handle))
        }
    }

    @Test("transport quirks: // paths, trailing /, name case, JSON bodies, duplicate keys, unknown routes")
    func transport() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let handle = Self.unique("quirk")
            let access = try await sdk.post("//api/appuser/signup/", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw")), ("handle", "second@x.io")]).object.string("access-token")
            #expect(!access.isEmpty)
            #expect(try await sdk.get("//api//appuser/GETUSER", accessToken: access).object.string("handle") == handle, "first duplicate key wins")
            let json = try await api.call(.post, "/api/appuser/login", token: nil,
                                          body: #"{"handle":"\#(handle)","password":"\#(SDK.md5("pw"))"}"#,
                                          headers: [.init("app-token")!: sdk.appToken])
            #expect(json.status == .ok, "\(json.text)")
            let unknown = try await api.call(.post, "/api/appuser/nope", token: nil)
            #expect(unknown.status == .notFound && unknown.text == #"{"code":500,"message":"service not found"}"#)
            #expect(try await api.call(.post, "/api/appuser/login", token: nil, body: "handle=a@b.c&password=x", contentType: nil).object["code"] == .int(400))
            #expect(try await api.call(.get, "/api/appuser/getUser", token: nil).object["code"] == .int(602))
            #expect(try await api.call(.get, "/api/appuser/getUser", token: nil, headers: [.init("access-token")!: "garbage"]).object["code"] == .int(405))
        }
    }
}
