import CosyncAuth
import CosyncAuthHTTP
import Foundation
import HTTPTypes
import PostgresNIO
import Testing

/// The hardening rules of issue 9 that live in the end-user flows and the admin core: codes that
/// cannot be taken over or re-guessed, limits reserved in PostgreSQL before the check, lockouts an
/// attacker cannot hold, crafted cursors, token rotation, the operator token and the client address.
@Suite("Hardening: takeover, guessing and limits")
struct HardeningTests {
    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }

    func makeApp(_ api: API, _ settings: [String: JSONValue]) async throws -> (SDK, String) {
        let created = try await api.createApp("Hardening", settings: settings)
        return (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
    }

    func count(_ query: PostgresQuery) async throws -> Int { try await TestEnvironment.value(query, as: Int.self) ?? 0 }

    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    /// The SDK's request from a client at `address` (through the trusted proxy on 127.0.0.1).
    func post(_ sdk: SDK, _ path: String, _ pairs: [(String, String?)], from address: String, accessToken: String? = nil) async throws -> API.Reply {
        var headers: HTTPFields = [HTTPField.Name("x-forwarded-for")!: address]
        if let accessToken { headers[HTTPField.Name("access-token")!] = accessToken } else { headers[HTTPField.Name("app-token")!] = sdk.appToken }
        return try await sdk.api.call(.post, path, token: nil, body: SDK.body(pairs), headers: headers, contentType: nil)
    }

    func login(_ sdk: SDK, _ handle: String, _ password: String, from address: String) async throws -> API.Reply {
        try await post(sdk, "/api/appuser/login", [("handle", handle), ("password", SDK.md5(password))], from: address)
    }

    func codes(to handle: String, count: Int) async throws -> [String] {
        try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: count).compactMap { sixDigitCode(in: $0.text) }
    }

    func auditCount(_ appId: String, action: String, reason: String) async throws -> Int {
        try await count(
            """
            SELECT count(*)::int FROM audit_log l JOIN apps a ON a.id = l.app_ref
            WHERE a.app_id = \(appId) AND l.action = \(action) AND l.detail->>'reason' = \(reason)
            """)
    }

    // MARK: 1. re-sending a signup or an invite

    @Test("a re-signup never changes the pending values, re-sends the same code, and never gives fresh guesses")
    func resignup() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("code")])
            // The owner signs up; someone else signs the same handle up with another password.
            let owner = Self.unique("own")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", owner), ("password", SDK.md5("owner-pw"))]).text == "true")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", owner), ("password", SDK.md5("other-pw"))]).text == "true")
            let sent = try await codes(to: owner, count: 2)
            #expect(sent.count == 2 && Set(sent).count == 1, "the same code re-sent: \(sent)")
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", owner), ("code", sent[0])]).status == .ok)
            #expect(try await sdk.login(owner, "owner-pw").status == .ok, "the code completes into the first signup's password")
            #expect(code(try await sdk.login(owner, "other-pw")) == 600)

            // Wrong guesses add up across re-sends: 2, a re-send, 3 more, and the right code is dead.
            let victim = Self.unique("vic")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", victim), ("password", SDK.md5("pw1"))]).text == "true")
            let first = try #require(try await codes(to: victim, count: 1).first)
            let wrong = first == "111111" ? "222222" : "111111"
            for _ in 0..<2 { #expect(code(try await sdk.post("/api/appuser/completeSignup", [("handle", victim), ("code", wrong)])) == 602) }
            #expect(try await sdk.post("/api/appuser/signup", [("handle", victim), ("password", SDK.md5("pw1"))]).text == "true")
            for _ in 0..<3 { #expect(code(try await sdk.post("/api/appuser/completeSignup", [("handle", victim), ("code", wrong)])) == 602) }
            #expect(code(try await sdk.post("/api/appuser/completeSignup", [("handle", victim), ("code", first)])) == 602, "dead after 5 wrong guesses")
            // Only a new signup after that starts a new code with the new values.
            #expect(try await sdk.post("/api/appuser/signup", [("handle", victim), ("password", SDK.md5("pw2"))]).text == "true")
            let all = try await codes(to: victim, count: 3)
            let fresh = try #require(all.last)
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", victim), ("code", fresh)]).status == .ok)
            #expect(try await sdk.login(victim, "pw2").status == .ok)
            #expect(try await count("SELECT count(*)::int FROM signups s JOIN apps a ON a.id = s.app_ref WHERE a.app_id = \(appId) AND lower(s.handle) = \(victim) AND s.status = 'expired'") == 1)

            // Re-sends are capped per handle and hour (5 e-mails); the answer stays `true`.
            let spammed = Self.unique("spam")
            for _ in 0..<8 { #expect(try await sdk.post("/api/appuser/signup", [("handle", spammed), ("password", SDK.md5("pw"))]).text == "true") }
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await codes(to: spammed, count: 8).count == 5)
        }
    }

    @Test("a re-invite never resets attempts; another user's invite never takes over a pending one")
    func reinvite() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "invitationEnabled": .bool(true)])
            let first = Self.unique("inv1"), second = Self.unique("inv2")
            let a1 = try await sdk.post("/api/appuser/signup", [("handle", first), ("password", SDK.md5("pw"))]).object.string("access-token")
            let a2 = try await sdk.post("/api/appuser/signup", [("handle", second), ("password", SDK.md5("pw"))]).object.string("access-token")
            let guest = Self.unique("guest")
            #expect(try await sdk.post("/api/appuser/invite", [("handle", guest), ("senderUserId", "sender-one")], accessToken: a1).text == "true")
            let code1 = try #require(try await codes(to: guest, count: 1).first)
            let wrong = code1 == "111111" ? "222222" : "111111"
            func register(_ code: String) async throws -> API.Reply {
                try await sdk.post("/api/appuser/register", [("handle", guest), ("password", SDK.md5("g")), ("code", code)])
            }
            for _ in 0..<2 { #expect(code(try await register(wrong)) == 602) }
            // Another user invites the same handle: its own invite and code; the first one is untouched.
            #expect(try await sdk.post("/api/appuser/invite", [("handle", guest), ("senderUserId", "sender-two")], accessToken: a2).text == "true")
            let code2 = try #require(try await codes(to: guest, count: 2).last)
            func pendingCount(_ condition: String) async throws -> Int {
                try await count(PostgresQuery(unsafeSQL: """
                    SELECT count(*)::int FROM invites i JOIN apps a ON a.id = i.app_ref
                    WHERE a.app_id = '\(appId)' AND lower(i.handle) = '\(guest)' AND i.status = 'pending' AND \(condition)
                    """))
            }
            #expect(try await pendingCount("i.sender_handle = '\(first)' AND i.sender_user_id = 'sender-one' AND i.code_attempts = 2") == 1)
            // The first sender invites again: the same code, attempts not reset.
            #expect(try await sdk.post("/api/appuser/invite", [("handle", guest), ("senderUserId", "changed")], accessToken: a1).text == "true")
            #expect(try await codes(to: guest, count: 3).last == code1, "the same code is re-sent")
            #expect(try await pendingCount("i.sender_handle = '\(first)' AND i.sender_user_id = 'sender-one' AND i.code_attempts = 2") == 1)
            for _ in 0..<3 { #expect(code(try await register(wrong)) == 602) }
            #expect(code(try await register(code1)) == 602, "the first invite is dead after 5 wrong guesses")
            // Wrong guesses count against every pending invite of the handle: the second one saw the
            // last 3 wrong codes and the dead first code, 4 in all.
            #expect(try await pendingCount("i.sender_handle = '\(second)' AND i.code_attempts = 4") == 1)
            let registered = try await register(code2)
            #expect(registered.status == .ok, "\(registered.text)")
            let signed = SDKJWTCheck.payload(registered.object.string("signed-user-token"))
            #expect(signed["senderHandle"] == .string(second) && signed["senderUserId"] == .string("sender-two"))
            #expect(try await pendingCount("true") == 0)
        }
    }

    // MARK: 2. reset codes

    @Test("wrong reset guesses count per user across codes; forgotPassword is rate-limited")
    func resetCodes() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let handle = Self.unique("rst")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("old"))]).status == .ok)
            #expect(try await sdk.post("/api/appuser/forgotPassword", [("handle", handle)]).text == "true")
            let firstCode = try #require(try await codes(to: handle, count: 2).last)
            let wrong = firstCode == "111111" ? "222222" : "111111"
            for _ in 0..<5 {
                #expect(code(try await sdk.post("/api/appuser/resetPassword", [("handle", handle), ("password", SDK.md5("new")), ("code", wrong)])) == 602)
            }
            #expect(try await sdk.post("/api/appuser/forgotPassword", [("handle", handle)]).text == "true")
            let secondCode = try #require(try await codes(to: handle, count: 3).last)
            #expect(code(try await sdk.post("/api/appuser/resetPassword", [("handle", handle), ("password", SDK.md5("new")), ("code", secondCode)])) == 602,
                    "a new code does not buy fresh guesses")
            #expect(try await sdk.login(handle, "old").status == .ok)
            // 5 requests per account and hour: 2 made, 3 more pass, the 6th is refused and sends nothing.
            for _ in 0..<3 { #expect(try await sdk.post("/api/appuser/forgotPassword", [("handle", handle)]).text == "true") }
            let refused = try await sdk.post("/api/appuser/forgotPassword", [("handle", handle)])
            #expect(refused.object["code"] == .int(500) && refused.object.string("message").contains("too many requests"), "\(refused.text)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: 7).count == 6, "signup welcome + 5 reset mails")
            // Only the newest code is live, and the owner at another address is not locked out by
            // the guesses made from this one.
            let newest = try #require(try await codes(to: handle, count: 5).last)
            #expect(try await post(sdk, "/api/appuser/resetPassword", [("handle", handle), ("password", SDK.md5("new")), ("code", newest)], from: "198.51.100.9").text == "true")
            #expect(try await sdk.login(handle, "new").status == .ok)

            // 30 requests per client address and hour, whatever the account.
            var accounts: [String] = []
            for i in 0..<7 {
                let h = Self.unique("addr\(i)")
                #expect(try await sdk.post("/api/appuser/signup", [("handle", h), ("password", SDK.md5("pw"))]).status == .ok)
                accounts.append(h)
            }
            var answers: [Int] = []
            for h in accounts { for _ in 0..<5 { answers.append(code(try await post(sdk, "/api/appuser/forgotPassword", [("handle", h)], from: "203.0.113.77")) ?? 200) } }
            #expect(answers.filter { $0 == 200 }.count == 30 && answers.filter { $0 == 500 }.count == 5, "\(answers)")
        }
    }

    // MARK: 3–5. lockouts

    /// The legacy code of a flow's outcome: 200, or the EndUserError's code.
    static func outcome(_ body: @Sendable () async throws -> Void) async -> Int {
        do {
            try await body()
            return 200
        } catch let error as EndUserError {
            return error == .invalidCredentials ? 600 : error == .invalidData ? 602 : -1
        } catch {
            return -2
        }
    }

    @Test("40 concurrent wrong passwords (straight into the flow, truly parallel): at most maxLoginAttempts are checked")
    func concurrentLockout() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "maxLoginAttempts": .int(10)])
            let handle = Self.unique("conc")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("right"))]).status == .ok)
            let fields = Fields(["handle": handle, "password": SDK.md5("wrong")])
            let answers = await withTaskGroup(of: Int.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        await Self.outcome { _ = try await services.flows.login(app: try await services.resolver.app(token: sdk.appToken, whenMissing: .invalidAppToken), fields: fields, clientAddress: "192.0.2.40") }
                    }
                }
                return await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0 == 600 }, "\(answers)")
            #expect(try await auditCount(appId, action: "login", reason: "wrong password") == 10, "exactly maxLoginAttempts bcrypt checks")
            #expect(try await auditCount(appId, action: "login", reason: "locked") == 30)
        }
    }

    @Test("a password check cancelled while queued for bcrypt (a request abandoned at its bound) gives its attempt back")
    func cancelledCheckGivesBack() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none"), "maxLoginAttempts": .int(10)])
            let slow = Self.unique("slow"), victim = Self.unique("victim")
            for handle in [slow, victim] {
                #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("right"))]).status == .ok)
            }
            // Logins of `slow` verify a cost-13 hash: four of them hold every hashing thread for a while.
            let heavy = try await PasswordHasher(cost: 13).hash(md5Hex: SDK.md5("right"))
            try await TestEnvironment.sql("UPDATE users SET password_hash = \(heavy) WHERE handle = \(slow)")
            let slowFields = Fields(["handle": slow, "password": SDK.md5("right")])
            let blockers = (0..<4).map { index in
                Task { try await services.flows.login(app: try await services.resolver.app(token: sdk.appToken, whenMissing: .invalidAppToken), fields: slowFields, clientAddress: "192.0.2.\(110 + index)") }
            }
            try await Task.sleep(for: .milliseconds(300))
            let queued = Task {
                try await services.flows.login(
                    app: try await services.resolver.app(token: sdk.appToken, whenMissing: .invalidAppToken), fields: Fields(["handle": victim, "password": SDK.md5("right")]), clientAddress: "192.0.2.99")
            }
            try await Task.sleep(for: .milliseconds(600))
            queued.cancel()
            let outcome = await queued.result
            for blocker in blockers { _ = try await blocker.value }
            guard case .failure(let error) = outcome else {
                Issue.record("the victim's check was not cancelled while queued (the blockers did not hold the pool)")
                return
            }
            #expect(error is CancellationError, "\(error)")
            let counted = try await TestEnvironment.value(
                """
                SELECT COALESCE(sum(failures), 0)::int FROM login_throttle
                WHERE subject IN (\("login:\(victim)|192.0.2.99"), \("handle:\(victim)"), 'ip:192.0.2.99')
                """, as: Int.self)
            #expect(counted == 0, "a check that never ran counts no failure")
            let relogin = try await services.flows.login(
                app: try await services.resolver.app(token: sdk.appToken, whenMissing: .invalidAppToken), fields: Fields(["handle": victim, "password": SDK.md5("right")]), clientAddress: "192.0.2.99")
            if case .tokens = relogin {} else { Issue.record("the right password logs in: \(relogin)") }
        }
    }

    @Test("after the longest lock the count goes on (the doubling holds); IPv6 clients count per /64")
    func lockWindow() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "maxLoginAttempts": .int(3)])
            let handle = Self.unique("win")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("right"))]).status == .ok)
            for _ in 0..<3 { #expect(code(try await login(sdk, handle, "wrong", from: "192.0.2.77")) == 600) }
            // The longest lock (15 min, as long as the window) has just ended.
            let pair = "login:\(handle)|192.0.2.77"
            try await TestEnvironment.sql("""
                UPDATE login_throttle SET failures = 20, locked_until = now() - interval '1 second', updated_at = now() - interval '901 seconds'
                WHERE subject = \(pair)
                """)
            #expect(code(try await login(sdk, handle, "wrong", from: "192.0.2.77")) == 600)
            #expect(try await count("SELECT failures FROM login_throttle t JOIN apps a ON a.id = t.app_ref WHERE a.app_id = \(appId) AND t.subject = \(pair)") == 21,
                    "counted on, not started again")
            #expect(code(try await login(sdk, handle, "right", from: "192.0.2.77")) == 600, "locked again at once")
            // Every address of one IPv6 /64 is one client.
            for host in 1...3 { #expect(code(try await login(sdk, handle, "wrong", from: "2001:db8:1:2::\(host)")) == 600) }
            #expect(code(try await login(sdk, handle, "right", from: "2001:db8:1:2::99")) == 600, "the /64 is locked")
            #expect(try await login(sdk, handle, "right", from: "2001:db8:1:3::1").status == .ok)
        }
    }

    @Test("an address that keeps failing locks only itself; the handle locks only from many addresses")
    func addressLock() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none"), "maxLoginAttempts": .int(10)])
            let handle = Self.unique("addr")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("right"))]).status == .ok)
            for _ in 0..<15 { #expect(code(try await login(sdk, handle, "wrong", from: "198.51.100.1")) == 600) }
            #expect(code(try await login(sdk, handle, "right", from: "198.51.100.1")) == 600, "A is locked for this handle")
            #expect(try await login(sdk, handle, "right", from: "198.51.100.2").status == .ok, "the owner at B logs in")
            // Failures spread over several addresses reach the handle-wide lock (3 × 10).
            for address in ["198.51.100.3", "198.51.100.4", "198.51.100.5"] {
                for _ in 0..<10 { #expect(code(try await login(sdk, handle, "wrong", from: address)) == 600) }
            }
            #expect(code(try await login(sdk, handle, "right", from: "198.51.100.6")) == 600, "handle-wide lock")
        }
    }

    @Test("changePassword and deleteAccount count with the login failures of the user")
    func otherPasswordChecks() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none"), "maxLoginAttempts": .int(5)])
            let handle = Self.unique("chg")
            let access = try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("right"))]).object.string("access-token")
            for _ in 0..<5 {
                #expect(code(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("guess")), ("newPassword", SDK.md5("n"))], accessToken: access)) == 602)
            }
            #expect(code(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("right")), ("newPassword", SDK.md5("n"))], accessToken: access)) == 602,
                    "locked: even the right password is not checked")
            #expect(code(try await sdk.login(handle, "right")) == 600, "the same count as login")

            let other = Self.unique("del")
            let access2 = try await sdk.post("/api/appuser/signup", [("handle", other), ("password", SDK.md5("right"))]).object.string("access-token")
            for _ in 0..<5 {
                #expect(code(try await sdk.post("/api/appuser/deleteAccount", [("handle", other), ("password", SDK.md5("guess"))], accessToken: access2)) == 600)
            }
            #expect(code(try await sdk.post("/api/appuser/deleteAccount", [("handle", other), ("password", SDK.md5("right"))], accessToken: access2)) == 600)
            #expect(code(try await sdk.login(other, "right")) == 600)
        }
    }

    @Test("concurrent wrong second-factor codes on several login-tokens: at most 2 × maxCodeAttempts are checked")
    func concurrentSecondFactor() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("google")])
            let handle = Self.unique("tfa")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))]).status == .ok)
            try await TestEnvironment.sql("UPDATE users SET two_factor_google = true WHERE lower(handle) = lower(\(handle))")
            var tokens: [String] = []
            for _ in 0..<4 { tokens.append(try await sdk.login(handle, "pw").object.string("login-token")) }
            let answers = await withTaskGroup(of: Int.self) { group in
                for token in tokens {
                    for _ in 0..<5 {
                        group.addTask {
                            await Self.outcome {
                                _ = try await services.flows.loginComplete(app: try await services.resolver.app(token: sdk.appToken, whenMissing: .invalidAppToken), fields: Fields(["loginToken": token, "code": "000000"]))
                            }
                        }
                    }
                }
                return await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0 == 600 }, "\(answers)")
            #expect(try await auditCount(appId, action: "loginComplete", reason: "wrong code") == 10)
        }
    }

    @Test("idle limit counters are purged; live ones stay")
    func housekeeping() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let (_, appId) = try await makeApp(api, [:])
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
            try await TestEnvironment.sql("""
                INSERT INTO login_throttle (app_ref, subject, failures, locked_until, updated_at) VALUES
                    (\(ref), 'login:old|1', 3, NULL, now() - interval '9 days'),
                    (\(ref), 'login:locked|1', 3, now() + interval '1 minute', now() - interval '9 days'),
                    (\(ref), 'login:new|1', 3, NULL, now())
                """)
            try await TestEnvironment.sql("""
                INSERT INTO rate_limits (app_ref, subject, window_start, count) VALUES
                    (\(ref), 'forgot:old', now() - interval '9 days', 5), (\(ref), 'forgot:new', now(), 5)
                """)
            // Events: an old one goes; an old one with a pending delivery and a fresh one stay.
            try await TestEnvironment.sql("""
                INSERT INTO webhook_endpoints (app_ref, url, event_types, secret_sealed)
                VALUES (\(ref), 'https://example.com/hook', ARRAY['user.created'], '\\x00'::bytea)
                """)
            try await TestEnvironment.sql("""
                INSERT INTO events (app_ref, type, body, created_at) VALUES
                    (\(ref), 'old.done', '{}', now() - interval '31 days'), (\(ref), 'old.pending', '{}', now() - interval '31 days'),
                    (\(ref), 'fresh', '{}', now())
                """)
            try await TestEnvironment.sql("""
                INSERT INTO webhook_deliveries (endpoint_id, event_ref)
                SELECT w.id, e.id FROM webhook_endpoints w, events e WHERE w.app_ref = \(ref) AND e.app_ref = \(ref) AND e.type = 'old.pending'
                """)
            let removed = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            #expect(removed >= 3)
            #expect(try await TestEnvironment.value(
                "SELECT string_agg(type, ',' ORDER BY id) FROM events WHERE app_ref = \(ref)", as: String?.self) == "old.pending,fresh")
            #expect(try await count("SELECT count(*)::int FROM login_throttle WHERE app_ref = \(ref)") == 2, "the idle one went; the locked and the fresh stay")
            #expect(try await count("SELECT count(*)::int FROM rate_limits WHERE app_ref = \(ref)") == 1)
        }
    }

    // MARK: 8. crafted cursors

    @Test("a crafted cursor is a position or a 400, never a crash")
    func craftedCursor() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (_, appId) = try await makeApp(api, [:])
            // Any time of the documented form is a position: one PostgreSQL cannot store is clamped.
            for micros in ["999999999999999999", "-999999999999999999", "253402300800000001"] {
                let cursor = "\(micros)_\(UUID().uuidString)"
                for kind in ["signups", "invites"] {
                    let reply = try await api.call(.get, "/admin/v1/apps/\(appId)/\(kind)?cursor=\(cursor)")
                    #expect(reply.status == .ok, "\(kind) \(micros): \(reply.status) \(reply.text)")
                }
            }
            // Another form is a 400 (a 19-digit time could overflow: the form has at most 18 digits).
            for (path, cursor) in [("signups", "9223372036854775807_\(UUID().uuidString)"), ("invites", "1%7C\(UUID().uuidString)"),
                                   ("logs", "czo1"), ("messages", "1234567890123456789"), ("users", "a%2Bb")] {
                let reply = try await api.call(.get, "/admin/v1/apps/\(appId)/\(path)?cursor=\(cursor)")
                #expect(reply.status == .badRequest && reply.errorCode == "invalid_cursor", "\(path) \(cursor): \(reply.status) \(reply.text)")
            }
            // A text cursor that decodes to a NUL (base64url of "s:\0") never reaches PostgreSQL with it.
            let nul = try await api.call(.get, "/admin/v1/apps/\(appId)/users?cursor=czoA")
            #expect(nul.status == .ok, "\(nul.status) \(nul.text)")
            #expect(try await api.call(.get, "/healthz", token: nil).status == .ok)
        }
    }

    // MARK: 11. token rotation

    @Test("a second rotation cuts every older token still in its grace period")
    func secondRotation() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Rotation")
            let appId = created.string("appId"), first = created.string("appToken")
            func works(_ token: String) async throws -> Bool {
                try await SDK(api: api, appToken: token).get("/api/appuser/getApplication").status == .ok
            }
            let r1 = try await api.call(.post, "/admin/v1/apps/\(appId)/app-token/rotate", json: .object(["gracePeriodSeconds": .int(2_592_000)]))
            let second = r1.object.string("appToken")
            let firstInGrace = try await works(first), secondNow = try await works(second)
            #expect(firstInGrace && secondNow)
            let r2 = try await api.call(.post, "/admin/v1/apps/\(appId)/app-token/rotate", json: .object(["gracePeriodSeconds": .int(60)]))
            let third = r2.object.string("appToken")
            #expect(try await count(
                """
                SELECT count(*)::int FROM app_tokens t JOIN apps a ON a.id = t.app_ref
                WHERE a.app_id = \(appId) AND t.expires_at IS NOT NULL AND t.expires_at <= now() + interval '61 seconds'
                """) == 2, "both older tokens now end within the new 60 s grace")
            let r3 = try await api.call(.post, "/admin/v1/apps/\(appId)/app-token/rotate", json: .object(["gracePeriodSeconds": .int(0)]))
            #expect(r3.status == .ok)
            let firstWorks = try await works(first), secondWorks = try await works(second), thirdWorks = try await works(third)
            #expect(!firstWorks && !secondWorks && !thirdWorks)
            #expect(try await works(r3.object.string("appToken")))
        }
    }

    // MARK: 12. operator token reset

    @Test("an operator token reset reaches a running node within seconds")
    func operatorTokenReset() async throws {
        let services = try await TestEnvironment.services()
        let old = try await OperatorToken.reset(client: services.client, logger: services.logger)
        let (running, generated) = try await OperatorToken.resolve(configured: nil, client: services.client, logger: services.logger)
        #expect(generated == nil)
        #expect(await running.matches(old))
        let new = try await OperatorToken.reset(client: services.client, logger: services.logger)
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(5), await !running.matches(new) { try await Task.sleep(for: .milliseconds(100)) }
        #expect(ContinuousClock.now - start < .seconds(4))
        #expect(await running.matches(new))
        #expect(await !running.matches(old))
    }

    // MARK: 14. client address

    @Test("the client address is the right-most entry that is not a trusted proxy, over every header line")
    func clientAddress() throws {
        let lines = ["192.0.2.1, 198.51.100.9", "203.0.113.5"]
        #expect(TrustedProxies.none.clientAddress(peer: "10.0.0.2", headerLines: lines) == "10.0.0.2")
        #expect(TrustedProxies.count(1).clientAddress(peer: "10.0.0.2", headerLines: lines) == "203.0.113.5")
        #expect(TrustedProxies.count(2).clientAddress(peer: "10.0.0.2", headerLines: lines) == "198.51.100.9")
        #expect(TrustedProxies.count(9).clientAddress(peer: "10.0.0.2", headerLines: lines) == "192.0.2.1")
        let cidr = try TrustedProxies.parse("10.0.0.0/8, 203.0.113.0/24, ::1")
        #expect(cidr.clientAddress(peer: "10.0.0.2", headerLines: lines) == "198.51.100.9")
        #expect(cidr.clientAddress(peer: "10.0.0.2", headerLines: []) == "10.0.0.2")
        #expect(cidr.clientAddress(peer: "192.0.2.50", headerLines: lines) == "192.0.2.50", "an untrusted peer is the client")
        #expect(cidr.clientAddress(peer: "::1", headerLines: ["2001:db8::7"]) == "2001:db8::7")
        #expect(try TrustedProxies.parse("2") == .count(2))
        #expect(throws: ConfigurationError.self) { try TrustedProxies.parse("10.0.0.0/33") }
        #expect(throws: ConfigurationError.self) { try TrustedProxies.parse("proxy.example.com") }
        // A dual-stack listener reports an IPv4 peer as ::ffff:a.b.c.d: it is that IPv4 address.
        #expect(cidr.clientAddress(peer: "::ffff:10.0.0.2", headerLines: lines) == "198.51.100.9")
        #expect(IPNetwork.Address.limitKey("::ffff:192.0.2.1") == "192.0.2.1")
        #expect(IPNetwork.Address.limitKey("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(IPNetwork.Address.limitKey("192.0.2.1") == "192.0.2.1")
        // A forged entry becomes a counter key of at most 64 UTF-8 bytes, however many combining
        // marks ride on one character (a character cut let a key outgrow its index: a 500).
        let forged = "x" + String(repeating: "\u{301}", count: 5000)
        let key = try #require(TrustedProxies.count(1).clientAddress(peer: "10.0.0.2", headerLines: [forged]))
        #expect(key.utf8.count <= 64 && key.unicodeScalars.first == "x")
    }
}
