import CosyncAuth
import CosyncAuthHTTP
import Foundation
import PostgresNIO
import Testing

/// Settings, error codes, brute-force protection, concurrency and tenant isolation of the end-user API,
/// through a live port.
@Suite("End-user API: rules")
struct EndUserRulesTests {
    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }

    func makeApp(_ api: API, _ settings: [String: JSONValue]) async throws -> (SDK, String) {
        let created = try await api.createApp("Rules \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))", settings: settings)
        return (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
    }

    func patch(_ api: API, _ appId: String, _ settings: [String: JSONValue]) async throws {
        let reply = try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(settings))
        try #require(reply.status == .ok, "\(reply.text)")
    }

    /// Test set-up through the real database, with bound parameters.
    func sql(_ query: PostgresQuery) async throws { try await TestEnvironment.sql(query) }

    @Test("the credential is resolved at the edge in the contract's order: body, then token; a field the contract checks first still wins")
    func credentialPrecedence() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let bogus = "not-a-token"
            // verifyPhone checks `code` before the token; setUserMetadata checks `metaData` first.
            #expect(try await sdk.post("/api/appuser/verifyPhone", [], accessToken: bogus).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", "{not json")], accessToken: bogus).object["code"] == .int(602))
            // With those fields present, the bad token decides.
            #expect(try await sdk.post("/api/appuser/verifyPhone", [("code", "123456")], accessToken: bogus).object["code"] == .int(405))
            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", "{}")], accessToken: bogus).object["code"] == .int(405))
            // Every other access-token endpoint checks the token before its fields.
            #expect(try await sdk.post("/api/appuser/setUserName", [], accessToken: bogus).object["code"] == .int(405))
            #expect(try await sdk.post("/api/appuser/setPhone", [], accessToken: bogus).object["code"] == .int(405))
            // No token at all: the endpoint's own code.
            #expect(try await sdk.post("/api/appuser/setLocale", [("locale", "EN")], withAppToken: false).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", "a")], withAppToken: false).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/login", [("handle", "a@b.c")], withAppToken: false).object["code"] == .int(400))
            // getApplication: no token is E602, an empty one names no app (E400).
            #expect(try await api.call(.get, "/api/appuser/getApplication").object["code"] == .int(602))
            #expect(try await api.call(.get, "/api/appuser/getApplication?appToken=").object["code"] == .int(400))
        }
    }

    @Test("every app setting changes behaviour as the spec says")
    func settingsHonoured() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none")])
            let handle = Self.unique("set")
            let access = try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))]).object.string("access-token")

            try await patch(api, appId, ["signupEnabled": .bool(false)])
            #expect(try await sdk.post("/api/appuser/signup", [("handle", Self.unique("x")), ("password", SDK.md5("pw"))]).object["code"] == .int(407))
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", Self.unique("x")), ("code", "123456")]).object["code"] == .int(407))
            try await patch(api, appId, ["signupEnabled": .bool(true), "invitationEnabled": .bool(false)])
            #expect(try await sdk.post("/api/appuser/invite", [("handle", Self.unique("i")), ("senderUserId", "s")], accessToken: access).object["code"] == .int(406))
            #expect(try await sdk.post("/api/appuser/register", [("handle", Self.unique("i")), ("password", SDK.md5("pw")), ("code", "123456")]).object["code"] == .int(406))
            try await patch(api, appId, ["invitationEnabled": .bool(true)])
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", "ANON_x")]).object["code"] == .int(414))
            #expect(try await sdk.login("justaname", "pw").object["code"] == .int(606))
            #expect(try await sdk.post("/api/appuser/forgotPassword", [("handle", "justaname")]).object["code"] == .int(606))
            #expect(try await sdk.post("/api/appuser/setUserName", [("userName", "abc")], accessToken: access).object["code"] == .int(606))
            #expect(try await sdk.get("/api/appuser/userNameAvailable?userName=abc", accessToken: access).object["code"] == .int(606))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", Self.unique("l")), ("password", SDK.md5("pw")), ("locale", "FR")]).object["code"] == .int(602))
            try await patch(api, appId, ["metaData": .array([.object(["path": .string("a"), "fieldName": .string("a"), "required": .bool(true)])])])
            #expect(try await sdk.post("/api/appuser/signup", [("handle", Self.unique("m")), ("password", SDK.md5("pw"))]).object["code"] == .int(604))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", Self.unique("m")), ("password", SDK.md5("pw")), ("metaData", #"{"a":5}"#)]).object["code"] == .int(604))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", Self.unique("m")), ("password", SDK.md5("pw")), ("metaData", "{broken")]).object["code"] == .int(604))
            // The existing user lacks the now-required field: its JWT cannot be built.
            #expect(try await sdk.login(handle, "pw").object["code"] == .int(604))
            try await patch(api, appId, ["metaData": .array([])])

            try await patch(api, appId, ["status": .string("suspended")])
            #expect(try await sdk.login(handle, "pw").object["code"] == .int(402))
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: access).object["code"] == .int(402))
            #expect(try await sdk.get("/api/appuser/getApplication").object["status"] == .string("inactive"), "getApplication still answers")
            try await patch(api, appId, ["status": .string("migrated")])
            #expect(try await sdk.login(handle, "pw").object["code"] == .int(413))
            try await patch(api, appId, ["status": .string("active")])

            let users = try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=\(handle)").object["users"]?.arrayValue ?? []
            let userId = try #require(users.first?["userId"]?.stringValue)
            #expect(try await api.call(.patch, "/admin/v1/apps/\(appId)/users/\(userId)", json: .object(["status": .string("suspended")])).status == .ok)
            #expect(try await sdk.login(handle, "pw").object["code"] == .int(404))
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: access).object["code"] == .int(405), "suspension revokes access tokens")
        }
    }

    @Test("missing and malformed fields get the legacy codes")
    func fieldErrors() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("code")])
            #expect(try await sdk.post("/api/appuser/login", [("handle", "a@b.co")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/login", [("password", SDK.md5("x"))]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", "a@b.co"), ("password", "notmd5")]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", "a@b.co"), ("password", SDK.md5("x").uppercased())]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", "a@b.co"), ("password", "")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", "a@b.co")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", "a@b.co"), ("code", "1e3")]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", "nobody@b.co"), ("code", "123456")]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/register", [("handle", "a@b.co"), ("code", "1")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/forgotPassword", []).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/resetPassword", [("handle", "a@b.co"), ("code", "1")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", "a@b.co"), ("code", "1")], withAppToken: false).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", "a@b.co"), ("password", SDK.md5("x"))], withAppToken: false).object["code"] == .int(400))
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("x"))]).object["code"] == .int(602))
            #expect(try await sdk.post("/api/appuser/invite", [("handle", "a@b.co")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/deleteAccount", []).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/setLocale", [("locale", "EN")]).object["code"] == .int(403))
            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", "{}")]).object["code"] == .int(403))
            // A pending signup with 5 wrong codes dies.
            let handle = Self.unique("brute")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))]).text == "true")
            let mail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: handle).first)
            let code = try #require(sixDigitCode(in: mail.text))
            let wrong = code == "111111" ? "222222" : "111111"
            for _ in 0..<5 { #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", handle), ("code", wrong)]).object["code"] == .int(602)) }
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", handle), ("code", code)]).object["code"] == .int(602), "the code died after 5 wrong tries")
            // An expired signup code: 411.
            let late = Self.unique("late")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", late), ("password", SDK.md5("pw"))]).text == "true")
            let lateMail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: late).first)
            let lateCode = try #require(sixDigitCode(in: lateMail.text))
            try await sql("UPDATE signups SET expires_at = now() - interval '1 minute' WHERE lower(handle) = lower(\(late))")
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", late), ("code", lateCode)]).object["code"] == .int(411))
        }
    }

    @Test("failed logins lock the (handle, address) for a while, never for good, and the lock is shared by all nodes")
    func bruteForce() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "maxLoginAttempts": .int(3)])
            let handle = Self.unique("locked")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("right"))]).status == .ok)
            for _ in 0..<3 { #expect(try await sdk.login(handle, "wrong").object["code"] == .int(600)) }
            #expect(try await sdk.login(handle, "right").object["code"] == .int(600), "locked: even the right password is refused")
            let services = try await TestEnvironment.services()
            let rows = try await services.client.query(
                """
                SELECT extract(epoch FROM locked_until - now())::int, subject FROM login_throttle t JOIN apps a ON a.id = t.app_ref
                WHERE a.app_id = \(appId)
                """, logger: services.logger)
            var seconds: [Int] = []
            for try await (s, subject) in rows.decode((Int?, String).self) where subject.hasPrefix("login:") {
                seconds.append(s ?? -1)
            }
            #expect(seconds.count == 1 && (1...30).contains(seconds[0]), "first lock lasts 30 s: \(seconds)")
            // The lock expires (simulated): the right password works and the counter resets.
            let pair = "login:" + handle + "|%"
            try await sql("UPDATE login_throttle SET locked_until = now() - interval '1 second' WHERE subject LIKE \(pair)")
            #expect(try await sdk.login(handle, "right").status == .ok)
            #expect(try await sdk.login(handle, "wrong").object["code"] == .int(600))
            #expect(try await sdk.login(handle, "right").status == .ok, "one failure after a success does not lock")
            // Repeated failures double the lock, capped at 15 minutes.
            _ = try await sdk.login(handle, "wrong")
            try await sql("UPDATE login_throttle SET failures = 40 WHERE subject LIKE \(pair)")
            _ = try await sdk.login(handle, "wrong")
            let capped = try await services.client.query(
                "SELECT extract(epoch FROM locked_until - now())::int FROM login_throttle WHERE subject LIKE \(pair)", logger: services.logger)
            var cappedSeconds: [Int?] = []
            for try await s in capped.decode(Int?.self) { cappedSeconds.append(s) }
            #expect(cappedSeconds.count == 1 && (801...900).contains(cappedSeconds.first.flatMap { $0 } ?? 0), "\(cappedSeconds)")
        }
    }

    @Test("50 parallel signups of one handle give one user; parallel setUserName gives one winner")
    func concurrency() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "userNamesEnabled": .bool(true)])
            let handle = Self.unique("race")
            let codes = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        let reply = try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))])
                        return reply.status == .ok ? 200 : reply.object["code"]?.intValue ?? -1
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(codes.filter { $0 == 200 }.count == 1)
            #expect(codes.filter { $0 == 601 }.count == 49)
            let users = try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=\(handle)").object["users"]?.arrayValue ?? []
            #expect(users.count == 1)

            // Code flow: one pending signup, every e-mail carries the same code.
            try await patch(api, appId, ["signupFlow": .string("code")])
            let pendingHandle = Self.unique("pend")
            let results = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<50 {
                    group.addTask { try await sdk.post("/api/appuser/signup", [("handle", pendingHandle), ("password", SDK.md5("pw"))]).text }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(results.allSatisfy { $0 == "true" || $0.contains("601") })
            let signups = try await api.call(.get, "/admin/v1/apps/\(appId)/signups?limit=200").object["signups"]?.arrayValue ?? []
            #expect(signups.filter { $0["handle"]?.stringValue == pendingHandle }.count == 1)
            // Re-sends are capped at 5 e-mails per handle and hour.
            let mails = try await TestEnvironment.sendGrid.value.waitForMails(to: pendingHandle, count: 5)
            #expect(mails.count == 5)
            #expect(Set(mails.compactMap { sixDigitCode(in: $0.text) }).count == 1)

            try await patch(api, appId, ["signupFlow": .string("none")])
            var tokens: [String] = []
            for i in 0..<10 {
                tokens.append(try await sdk.post("/api/appuser/signup", [("handle", Self.unique("n\(i)")), ("password", SDK.md5("pw"))]).object.string("access-token"))
            }
            let name = "taken" + Secrets.hexIdentifier().prefix(6).filter(\.isLetter)
            let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                for token in tokens {
                    group.addTask { try await sdk.post("/api/appuser/setUserName", [("userName", name)], accessToken: token).text }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == "true" }.count == 1)
            #expect(outcomes.filter { $0 == #"{"code":605,"message":"user name already assigned"}"# }.count == 9)
        }
    }

    @Test("tokens of app A never reach app B")
    func tenantIsolation() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (a, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let (b, appB) = try await makeApp(api, ["signupFlow": .string("code")])
            let shared = Self.unique("both")
            let accessA = try await a.post("/api/appuser/signup", [("handle", shared), ("password", SDK.md5("in-a"))]).object.string("access-token")
            #expect(try await b.post("/api/appuser/signup", [("handle", shared), ("password", SDK.md5("in-b"))]).text == "true")
            #expect(try await b.login(shared, "in-a").object["code"] == .int(608), "B only has a pending signup")
            #expect(try await a.login(shared, "in-b").object["code"] == .int(600))
            #expect(try await a.post("/api/appuser/completeSignup", [("handle", shared), ("code", "123456")]).object["code"] == .int(601))
            let onlyB = Self.unique("onlyb")
            #expect(try await b.post("/api/appuser/signup", [("handle", onlyB), ("password", SDK.md5("pw"))]).text == "true")
            #expect(try await a.post("/api/appuser/forgotPassword", [("handle", onlyB)]).object["code"] == .int(603))
            #expect(try await a.get("/api/appuser/getUser", accessToken: accessA).object["appId"] != .string(appB))
            // Each credential only works in its own header.
            let mixed = SDK(api: api, appToken: accessA)
            #expect(try await mixed.login(shared, "in-a").object["code"] == .int(400))
            #expect(try await a.get("/api/appuser/getUser", accessToken: a.appToken).object["code"] == .int(405))
            // App B deleted: its app token is unknown (400), its users' access tokens name a missing app (401).
            let accessB = try await b.login(shared, "in-b")
            #expect(accessB.object["code"] == .int(608))
            let (c, appC) = try await makeApp(api, ["signupFlow": .string("none")])
            let accessC = try await c.post("/api/appuser/signup", [("handle", shared), ("password", SDK.md5("in-c"))]).object.string("access-token")
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appC)").status == .noContent)
            #expect(try await c.get("/api/appuser/getUser", accessToken: accessC).object["code"] == .int(401))
            #expect(try await c.login(shared, "in-c").object["code"] == .int(400))
            _ = appB
        }
    }

    @Test("login with a second factor answers only a login-token; phone mode queues the SMS")
    func secondFactor() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(
                api, ["signupFlow": .string("none"), "twoFactorVerification": .string("google")].merging(TwilioAccount.settings) { $1 })
            let handle = Self.unique("tfa")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))]).status == .ok)
            try await sql("UPDATE users SET two_factor_google = true WHERE lower(handle) = lower(\(handle))")
            let google = try await sdk.login(handle, "pw")
            #expect(Set(google.object.keys) == ["login-token"], "\(google.text)")
            try await patch(api, appId, ["twoFactorVerification": .string("phone")])
            try await sql("UPDATE users SET two_factor_google = false, two_factor_phone = true, phone = '+15555550100', phone_verified = true WHERE lower(handle) = lower(\(handle))")
            let phone = try await sdk.login(handle, "pw")
            #expect(Set(phone.object.keys) == ["login-token"])
            let sms = try await api.call(.get, "/admin/v1/apps/\(appId)/messages?to=%2B15555550100").object["messages"]?.arrayValue ?? []
            #expect(sms.count == 1 && sms.first?["channel"] == .string("sms"))
            // The code went out through (fake) Twilio; the outbox redacts it once delivered.
            let texts = try await TestEnvironment.twilio.value.waitForMessages(to: "+15555550100")
            #expect(texts.contains { sixDigitCode(in: $0.body) != nil })
            try await patch(api, appId, ["twoFactorVerification": .string("none")])
            #expect(Set(try await sdk.login(handle, "pw").object.keys) == ["jwt", "access-token"], "stale flags: phone needs the app mode")
            // Every action above is in the app's audit log.
            let logs = try await api.call(.get, "/admin/v1/apps/\(appId)/logs?limit=200").object["logs"]?.arrayValue ?? []
            let actions = Set(logs.compactMap { $0["action"]?.stringValue })
            #expect(actions.isSuperset(of: ["signup", "login"]))
        }
    }

    @Test("the lenient form parser (§1.3)")
    func formParser() {
        let fields = LegacyForm.parse(Array(#"handle=a%2Bb@x.com&phone=+19195551212&metaData={"a":"b c"}&senderUserId&x=é&bad=%zz%4&handle=second&&e=="#.utf8))
        #expect(fields["handle"] == "a+b@x.com")
        #expect(fields["phone"] == " 19195551212")
        #expect(fields["metaData"] == #"{"a":"b c"}"#)
        #expect(fields["senderUserId"] == "")
        #expect(fields["x"] == "é")
        #expect(fields["bad"] == "%zz%4")
        #expect(fields["e"] == "=")
        #expect(LegacyForm.parse(Array("a=%C3%A9%FF".utf8))["a"] == "é\u{FFFD}")
    }
}

