import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// Signed webhooks end to end: flows write events in their transactions, the test run's webhook
/// worker delivers them to Tests/system/webhooks/receiver.py, which verifies every signature with the
/// `standardwebhooks` package. Real PostgreSQL, real HTTP on 127.0.0.1.
@Suite("Webhooks: events, signatures, retries, rotation, SSRF guard, dead letters, ordering")
struct WebhookTests {
    /// The test run's retry waits (TestEnvironment): 4 attempts in all, then the delivery is dead.
    static let retrySchedule = "0.2,0.2,0.2"
    static let attemptsBeforeDead = 4
    /// Failed attempts in a row that disable an endpoint in the test run.
    static let disableAfter = 6

    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }
    static func md5(_ password: String) -> String { PasswordHasher.md5Hex(password) }

    struct Setup {
        let appId: String
        let appToken: String
        let app: [String: JSONValue]
        let webhookId: String
        let secret: String
        let receiver: WebhookReceiver
    }

    /// An app with one endpoint subscribed to `types` (all by default), pointing at a new receiver
    /// that knows the endpoint's secret.
    func setup(
        _ api: API, settings: [String: JSONValue] = [:], types: [EventType] = EventType.allCases, fail: [String: Int] = [:]
    ) async throws -> Setup {
        let app = try await api.createApp("Webhooks", settings: settings)
        let appId = app.string("appId")
        let receiver = try await WebhookReceiver.start()
        let created: API.Reply
        let secret: String
        do {
            created = try await api.call(.post, "/admin/v1/apps/\(appId)/webhooks", json: .object([
                "url": .string(receiver.url), "eventTypes": .array(types.map { .string($0.rawValue) }), "description": .string("tests"),
            ]))
            try #require(created.status == .created, "\(created.status) \(created.text)")
            secret = created.object.string("secret")
            #expect(secret.hasPrefix("whsec_") && (WebhookSignature.keyBytes(secret)?.count ?? 0) >= 24)
            try receiver.configure(secrets: [secret], fail: fail)
        } catch {
            receiver.stop()
            throw error
        }
        return Setup(
            appId: appId, appToken: app.string("appToken"), app: app, webhookId: created.object.string("webhookId"), secret: secret,
            receiver: receiver)
    }

    func flows() async throws -> EndUserFlows { try await TestEnvironment.services().flows }

    func app(_ token: String) async throws -> App {
        try await TestEnvironment.services().resolver.app(token: token, whenMissing: .invalidAppToken)
    }

    func accessToken(_ outcome: LoginOutcome) throws -> String {
        guard case .tokens(let issued) = outcome else { throw WebhookReceiver.Failure(description: "expected tokens") }
        return issued.accessToken
    }

    /// The deliveries of an endpoint, for failure messages.
    func deliveries(_ webhookId: String) async throws -> String {
        try await TestEnvironment.value(
            """
            SELECT string_agg(format('%s %s attempts=%s round=%s due_in=%s err=%s', d.id, d.status, d.attempts, d.round_failures,
                                     d.next_attempt - now(), d.last_error), '; ' ORDER BY d.id)
            FROM webhook_deliveries d WHERE d.endpoint_id = \(UUID(uuidString: webhookId))
            """, as: String?.self).flatMap { $0 } ?? "-"
    }

    @Test("EventType declares every event type once; the README's list and the DocC table name exactly those")
    func eventTypes() throws {
        let declared = EventType.allCases.map(\.rawValue)
        #expect(declared.count == Set(declared).count && declared.count == 24)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        func codeSpans(_ text: Substring) -> [String] {
            text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        }
        // README: the **Events** paragraph, up to "The body is".
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "**Events**: "))
        let end = try #require(readme.range(of: "The body is", range: start.upperBound..<readme.endIndex))
        #expect(codeSpans(readme[start.upperBound..<end.lowerBound]) == declared)
        // DocC: the first cell of each row of the "Event types" table.
        let docc = try String(contentsOf: root.appendingPathComponent("Sources/CosyncAuth/CosyncAuth.docc/EventStream.md"), encoding: .utf8)
        let section = try #require(docc.range(of: "## Event types"))
        let rows = docc[section.upperBound...].split(separator: "\n").drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        let listed = rows.dropFirst(2).compactMap { row in codeSpans(row.split(separator: "|").first ?? "").first }
        #expect(listed == declared)
    }

    @Test("signup, login, wrong password, lockout, password change and delete each deliver their event, signed, without secrets")
    func lifecycle() async throws {
        try await TestEnvironment.withAPI { api in
            let s = try await setup(api, settings: ["signupFlow": .string("none"), "maxLoginAttempts": .int(3)])
            defer { s.receiver.stop() }
            let flows = try await flows()
            let handle = Self.unique("life"), password = "first-Pass1", newPassword = "second-Pass2"
            _ = try await flows.signup(app: try await app(s.appToken), fields: Fields(["handle": handle, "password": Self.md5(password)]), presentedAppToken: s.appToken)
            let token = try accessToken(try await flows.login(
                app: try await app(s.appToken), fields: Fields(["handle": handle, "password": Self.md5(password)]), clientAddress: "198.51.100.7"))
            await #expect(throws: EndUserError.invalidCredentials) {
                _ = try await flows.login(
                    app: try await app(s.appToken), fields: Fields(["handle": handle, "password": Self.md5("wrong")]), clientAddress: "198.51.100.7")
            }
            try await flows.changePassword(
                caller: try await TestEnvironment.services().resolver.caller(accessToken: token, whenMissing: .invalidData), fields: Fields(["password": Self.md5(password), "newPassword": Self.md5(newPassword)]),
                clientAddress: "198.51.100.7")
            let token2 = try accessToken(try await flows.login(
                app: try await app(s.appToken), fields: Fields(["handle": handle, "password": Self.md5(newPassword)]), clientAddress: "198.51.100.7"))
            try await flows.deleteAccount(
                caller: try await TestEnvironment.services().resolver.caller(accessToken: token2, whenMissing: .invalidData), fields: Fields(["handle": handle, "password": Self.md5(newPassword)]), clientAddress: "198.51.100.7")

            // A second account is locked by three wrong passwords (maxLoginAttempts 3).
            let locked = Self.unique("lock")
            _ = try await flows.signup(app: try await app(s.appToken), fields: Fields(["handle": locked, "password": Self.md5(password)]), presentedAppToken: s.appToken)
            for _ in 0..<3 {
                _ = try? await flows.login(
                    app: try await app(s.appToken), fields: Fields(["handle": locked, "password": Self.md5("bad")]), clientAddress: "198.51.100.8")
            }
            // Switching the app to code signups is an app.updated event; a signup then is signup.pending.
            let patched = try await api.call(.patch, "/admin/v1/apps/\(s.appId)", json: .object(["signupFlow": .string("code")]))
            #expect(patched.status == .ok)
            let pending = Self.unique("pending")
            _ = try await flows.signup(app: try await app(s.appToken), fields: Fields(["handle": pending, "password": Self.md5(password)]), presentedAppToken: s.appToken)

            let expected: [(String, String)] = [
                ("user.created", handle), ("user.login.succeeded", handle), ("user.login.failed", handle),
                ("session.revoked", handle), ("user.password.changed", handle), ("user.login.succeeded", handle), ("user.deleted", handle),
                ("user.created", locked), ("user.login.failed", locked), ("user.locked", locked), ("app.updated", ""),
                ("signup.pending", pending),
            ]
            let all = try await s.receiver.wait { received in
                expected.allSatisfy { type, who in
                    received.contains { $0.status == 200 && $0.type == type && ($0.data["handle"]?.stringValue ?? "") == who }
                }
            }
            let delivered = all.filter { $0.status == 200 }
            for (type, who) in expected {
                #expect(delivered.contains { $0.type == type && ($0.data["handle"]?.stringValue ?? "") == who }, "missing \(type) for \(who)")
            }
            #expect(delivered.filter { $0.type == "user.login.failed" && $0.data["handle"]?.stringValue == locked }.count == 3)
            // The events of one user arrive in the order they were committed.
            let mine = delivered.filter { $0.data["handle"]?.stringValue == handle }.map(\.type)
            // changePassword ended the signup's session (the caller's login session stays).
            #expect(mine == ["user.created", "user.login.succeeded", "user.login.failed", "session.revoked", "user.password.changed",
                             "user.login.succeeded", "user.deleted"], "\(mine)")
            let revoked = delivered.first { $0.type == "session.revoked" && $0.data["handle"]?.stringValue == handle }
            #expect(revoked?.data["reason"] == .string("password_changed") && revoked?.data["sessionIds"]?.arrayValue?.count == 1)
            for event in all {
                // standardwebhooks verified every request, and so does the Swift verifier.
                #expect(event.verified == [true], "\(event.type): \(event.verified)")
                #expect(WebhookSignature.verify(header: event.signature, secret: s.secret, id: event.id, timestamp: event.timestamp, body: event.body))
                #expect(event.id.hasPrefix("msg_"))
                #expect(event.data["appId"]?.stringValue == s.appId)
                // Never a password (plain or MD5), a token or a code.
                for secret in [password, newPassword, Self.md5(password), Self.md5(newPassword), token, token2, s.appToken, s.secret] {
                    #expect(!event.body.contains(secret), "\(event.type) carries a secret")
                }
                #expect(sixDigitCode(in: event.body) == nil, "\(event.type) carries a code: \(event.body)")
                let keys = Set(event.data.keys)
                #expect(keys.isSubset(of: ["appId", "userId", "handle", "reason", "fields", "actor", "senderHandle", "secondFactor", "factor", "sessionIds"]))
            }
        }
    }

    @Test("a receiver answering 500 three times gets the same webhook-id four times; the attempt log shows the four")
    func retriesKeepTheId() async throws {
        try await TestEnvironment.withAPI { api in
            let s = try await setup(api, types: [.userCreated], fail: ["user.created": 3])
            defer { s.receiver.stop() }
            let user = try await api.call(.post, "/admin/v1/apps/\(s.appId)/users",
                                          json: .object(["handle": .string(Self.unique("retry")), "password": .string("Pw-12345")]))
            try #require(user.status == .created)
            let all = try await s.receiver.wait { $0.contains { $0.status == 200 } }
            #expect(all.map(\.status) == [500, 500, 500, 200], "\(all.map(\.status))")
            #expect(Set(all.map(\.id)).count == 1 && all.map(\.attempt) == [1, 2, 3, 4])
            #expect(all.allSatisfy { $0.verified == [true] })
            let messageId = all.first?.id ?? ""
            // The mark follows the send: wait for the fourth attempt's row.
            var attempts: [JSONValue] = []
            for _ in 0..<100 {
                let log = try await api.call(.get, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/attempts")
                attempts = log.json["attempts"]?.arrayValue ?? []
                if attempts.count >= 4 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(attempts.count == 4)
            #expect(attempts.map { $0["httpStatus"]?.intValue ?? 0 } == [200, 500, 500, 500])
            #expect(attempts.map { $0["attempt"]?.intValue ?? 0 } == [4, 3, 2, 1])
            #expect(attempts.allSatisfy { $0["messageId"]?.stringValue == messageId && $0["eventType"]?.stringValue == "user.created" })
            let page = try await api.call(.get, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/attempts?limit=3")
            #expect(page.json["attempts"]?.arrayValue?.count == 3 && page.json["nextCursor"]?.stringValue != nil)
        }
    }

    @Test("after a rotation both secrets sign until the overlap ends; each signature verifies with its secret")
    func rotation() async throws {
        try await TestEnvironment.withAPI { api in
            let s = try await setup(api, types: [.userCreated])
            defer { s.receiver.stop() }
            let rotated = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/rotate-secret")
            try #require(rotated.status == .ok, "\(rotated.text)")
            let newSecret = rotated.object.string("secret")
            #expect(newSecret.hasPrefix("whsec_") && newSecret != s.secret)
            let expires = rotated.object.string("previousSecretExpiresAt")
            let parser = ISO8601DateFormatter()
            parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let overlap = parser.date(from: expires)?.timeIntervalSinceNow ?? 0
            #expect(overlap > 23 * 3600 && overlap <= 24 * 3600, "\(expires)")
            // The secret is shown only on creation and rotation.
            let shown = try await api.call(.get, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)")
            #expect(shown.object["secret"] == nil && !shown.text.contains(newSecret) && !shown.text.contains(s.secret))
            try s.receiver.configure(secrets: [s.secret, newSecret])
            _ = try await api.call(.post, "/admin/v1/apps/\(s.appId)/users",
                                   json: .object(["handle": .string(Self.unique("rot")), "password": .string("Pw-12345")]))
            let all = try await s.receiver.wait { !$0.isEmpty }
            let event = try #require(all.first)
            #expect(event.status == 200)
            #expect(event.verified == [true, true], "\(event.verified)")
            let parts = event.signature.split(separator: " ").map(String.init)
            #expect(parts.count == 2)
            // Each secret verifies exactly one of the two signatures.
            for secret in [s.secret, newSecret] {
                #expect(parts.filter { WebhookSignature.verify(header: $0, secret: secret, id: event.id, timestamp: event.timestamp, body: event.body) }.count == 1)
            }
            // Once the overlap is over only the new secret signs.
            try await TestEnvironment.sql("UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = \(UUID(uuidString: s.webhookId))")
            try s.receiver.configure(secrets: [s.secret, newSecret])
            _ = try await api.call(.post, "/admin/v1/apps/\(s.appId)/users",
                                   json: .object(["handle": .string(Self.unique("rot")), "password": .string("Pw-12345")]))
            let later = try await s.receiver.wait { $0.count >= 2 }
            #expect(later.count == 2 && later.last?.verified == [false, true] && later.last?.signature.split(separator: " ").count == 1)
        }
    }

    @Test("the SSRF guard refuses http without the flag, private, loopback and link-local addresses; bad input is a 422 and stores nothing")
    func ssrfGuardAndValidation() async throws {
        try await TestEnvironment.withAPI { api in
            let app = try await api.createApp("Webhook guard")
            let appId = app.string("appId")
            func create(_ url: String, types: [String] = ["user.created"], extra: [String: JSONValue] = [:]) async throws -> API.Reply {
                var body: [String: JSONValue] = ["url": .string(url), "eventTypes": .array(types.map { .string($0) })]
                body.merge(extra) { _, b in b }
                return try await api.call(.post, "/admin/v1/apps/\(appId)/webhooks", json: .object(body))
            }
            // The test run allows http and 127.0.0.0/8 only; everything else private stays refused.
            for url in ["https://10.0.0.1/hook", "http://169.254.169.254/latest/meta-data", "https://[::1]/hook", "https://[fe80::1]/x",
                        "https://192.168.1.10/", "https://172.16.0.1/", "https://100.64.0.1/", "https://0.0.0.0/", "https://[fd00::1]/",
                        "https://[::ffff:10.0.0.1]/"]
            {
                let reply = try await create(url)
                let refused = reply.status == .unprocessableContent && reply.errorField == "url"
                    && reply.errorCode == "forbidden_address"
                #expect(refused, "\(url): \(reply.status) \(reply.text)")
            }
            let bad: [(String, [String], [String: JSONValue], String)] = [
                ("http://127.0.0.1:9/" + String(repeating: "a", count: 2100), ["user.created"], [:], "url"),
                ("http://user:pw@127.0.0.1:9/", ["user.created"], [:], "url"),
                ("ftp://127.0.0.1/", ["user.created"], [:], "url"),
                ("http://127.0.0.1:9/", ["user.nope"], [:], "eventTypes"),
                ("http://127.0.0.1:9/", [], [:], "eventTypes"),
                ("http://127.0.0.1:9/", ["user.created", "user.created"], [:], "eventTypes"),
                ("http://127.0.0.1:9/", ["user.created"], ["description": .string(String(repeating: "d", count: 501))], "description"),
                ("http://127.0.0.1:9/", ["user.created"], ["secret": .string("whsec_x")], "secret"),
            ]
            for (url, types, extra, field) in bad {
                let reply = try await create(url, types: types, extra: extra)
                #expect(reply.status == .unprocessableContent && reply.errorField == field, "\(field): \(reply.status) \(reply.text)")
            }
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/webhooks", body: "[1]").status == .badRequest)
            let count = try await TestEnvironment.value(
                "SELECT count(*)::int FROM webhook_endpoints w JOIN apps a ON a.id = w.app_ref WHERE a.app_id = \(appId)", as: Int.self)
            #expect(count == 0)
            // Updates are checked too.
            let ok = try await create("http://127.0.0.1:9/hook")
            try #require(ok.status == .created, "\(ok.text)")
            let id = ok.object.string("webhookId")
            let moved = try await api.call(.patch, "/admin/v1/apps/\(appId)/webhooks/\(id)", json: .object(["url": .string("https://10.1.2.3/")]))
            #expect(moved.status == .unprocessableContent && moved.errorCode == "forbidden_address")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/webhooks/\(id)").object.string("url") == "http://127.0.0.1:9/hook")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/webhooks/not-a-uuid").status == .notFound)
        }

        // The operator's defaults: https only, and no private address (localhost resolves to loopback).
        let strict = WebhookURLGuard(allowHTTP: false, allowedNetworks: [])
        #expect(await strict.check("http://example.com/hook")?.code == "insecure_url")
        #expect(await strict.check("https://localhost/hook")?.code == "forbidden_address")
        #expect(await strict.check("https://127.0.0.1/hook")?.code == "forbidden_address")
        #expect(await strict.check("https://169.254.169.254/")?.code == "forbidden_address")
        #expect(await strict.check("https://[::1]/")?.code == "forbidden_address")
        #expect(await strict.check("https://10.0.0.1/")?.code == "forbidden_address")
        #expect(await strict.check("https://2130706433/")?.code == "forbidden_address")  // 127.0.0.1 written as a number
        let allowing = WebhookURLGuard(allowHTTP: true, allowedNetworks: [IPNetwork("127.0.0.0/8")].compactMap { $0 })
        #expect(await allowing.check("http://127.0.0.1:8080/hook") == nil)
        #expect(await allowing.check("http://10.0.0.1/hook")?.code == "forbidden_address")
        var settings = WebhookSettings()
        #expect(throws: ConfigurationError.self) { try settings.read(["COSYNC_WEBHOOK_ALLOW_CIDRS": "not-a-network"]) }
        #expect(throws: ConfigurationError.self) { try settings.read(["COSYNC_WEBHOOK_RETRY_SECONDS": "5,-1"]) }
        try settings.read(["COSYNC_WEBHOOK_RETRY_SECONDS": "1, 2.5", "COSYNC_WEBHOOK_ALLOW_HTTP": "1"])
        #expect(settings.retrySchedule == [1, 2.5] && settings.allowHTTP)
    }

    @Test("a delivery is dead after the schedule; repeated failures disable the endpoint (audited); replay sends again with the same id")
    func deadLetterDisableAndReplay() async throws {
        try await TestEnvironment.withAPI { api in
            let s = try await setup(api, types: [.userCreated])
            defer { s.receiver.stop() }
            try s.receiver.configure(secrets: [s.secret], failAll: true)
            func createUser() async throws {
                let reply = try await api.call(.post, "/admin/v1/apps/\(s.appId)/users",
                                               json: .object(["handle": .string(Self.unique("dead")), "password": .string("Pw-12345")]))
                try #require(reply.status == .created)
            }
            try await createUser()
            let first = try await s.receiver.wait { $0.count >= Self.attemptsBeforeDead }
            let firstId = first.first?.id ?? ""
            var status: String?
            for _ in 0..<100 {
                status = try await TestEnvironment.value(
                    "SELECT d.status FROM webhook_deliveries d WHERE d.endpoint_id = \(UUID(uuidString: s.webhookId))", as: String.self)
                if status == "dead" { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(status == "dead")
            try await Task.sleep(for: .milliseconds(500))
            #expect(s.receiver.received().count == Self.attemptsBeforeDead, "no attempt after the schedule")
            // Two more failures (6 in a row) disable the endpoint.
            try await createUser()
            var endpoint: [String: JSONValue] = [:]
            for _ in 0..<100 {
                endpoint = try await api.call(.get, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)").object
                if endpoint["enabled"] == .bool(false) { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let state = try await deliveries(s.webhookId)
            #expect(endpoint["enabled"] == .bool(false) && endpoint["disabledReason"]?.stringValue?.contains("6 failed") == true,
                    "\(endpoint) \(state) \(s.receiver.received().map { "\($0.id) \($0.status)" })")
            let logs = try await api.call(.get, "/admin/v1/apps/\(s.appId)/logs")
            #expect(logs.json["logs"]?.arrayValue?.contains { $0["action"]?.stringValue == "webhook.disable" } == true)
            let countWhenDisabled = s.receiver.received().count
            try await Task.sleep(for: .milliseconds(600))
            #expect(s.receiver.received().count == countWhenDisabled, "a disabled endpoint gets nothing")
            // Its pending deliveries are parked out of the due index's way, and no replay is taken meanwhile.
            #expect(try await TestEnvironment.value(
                """
                SELECT count(*)::int FROM webhook_deliveries
                WHERE endpoint_id = \(UUID(uuidString: s.webhookId)) AND status = 'pending' AND next_attempt < now() + interval '50 years'
                """, as: Int.self) == 0)
            let whileDisabled = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/messages/\(firstId)/replay")
            #expect(whileDisabled.status == .conflict && whileDisabled.errorCode == "webhook_disabled", "\(whileDisabled.text)")

            // Enable, heal the receiver and replay the dead message: it arrives with its webhook-id.
            try s.receiver.configure(secrets: [s.secret])
            let enabled = try await api.call(.patch, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)", json: .object(["enabled": .bool(true)]))
            #expect(enabled.status == .ok && enabled.object["consecutiveFailures"] == .int(0) && enabled.object["disabledReason"] == .null)
            let replay = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/messages/\(firstId)/replay")
            #expect(replay.status == .accepted, "\(replay.text)")
            let healed = try await s.receiver.wait { $0.contains { $0.id == firstId && $0.status == 200 } }
            #expect(healed.contains { $0.id == firstId && $0.status == 200 })
            // Replay everything since an hour ago: both messages again (each with its own id).
            let before = s.receiver.received().filter { $0.status == 200 }.count
            var since = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/replay",
                                           json: .object(["since": .string(ISO8601.milliseconds(Date().addingTimeInterval(-3600)))]))
            for _ in 0..<50 where since.status == .accepted && since.object["replayed"] == .int(1) {
                // The second message may still be in flight from the enable: wait until it is finished.
                try await Task.sleep(for: .milliseconds(100))
                since = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/replay",
                                           json: .object(["since": .string(ISO8601.milliseconds(Date().addingTimeInterval(-3600)))]))
            }
            #expect(since.status == .accepted && (since.object["replayed"]?.intValue ?? 0) >= 1, "\(since.text)")
            let after = try await s.receiver.wait { $0.filter { $0.status == 200 }.count >= before + 2 }
            #expect(Set(after.filter { $0.status == 200 }.map(\.id)).count == 2)
            let badSince = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/replay",
                                              json: .object(["since": .string("yesterday")]))
            #expect(badSince.status == .unprocessableContent && badSince.errorField == "since")
            let unknown = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/messages/msg_\(UUID().uuidString.lowercased())/replay")
            #expect(unknown.status == .notFound)
            // Disable and delete.
            let disabled = try await api.call(.post, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)/disable")
            #expect(disabled.status == .ok && disabled.object["enabled"] == .bool(false))
            #expect(try await api.call(.delete, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)").status == .noContent)
            #expect(try await api.call(.get, "/admin/v1/apps/\(s.appId)/webhooks/\(s.webhookId)").status == .notFound)
            #expect(try await api.call(.get, "/admin/v1/apps/\(s.appId)/webhooks").json["webhooks"]?.arrayValue?.isEmpty == true)
        }
    }

    @Test("per user, a later event waits while an earlier one is retried")
    func perUserOrder() async throws {
        try await TestEnvironment.withAPI { api in
            let s = try await setup(api, types: [.userCreated, .userUpdated], fail: ["user.created": 3])
            defer { s.receiver.stop() }
            let created = try await api.call(.post, "/admin/v1/apps/\(s.appId)/users",
                                             json: .object(["handle": .string(Self.unique("order")), "password": .string("Pw-12345")]))
            try #require(created.status == .created)
            let userId = created.object.string("userId")
            for locale in ["EN", "EN", "EN"] {
                let patched = try await api.call(.patch, "/admin/v1/apps/\(s.appId)/users/\(userId)", json: .object(["locale": .string(locale)]))
                #expect(patched.status == .ok)
            }
            let all = try await s.receiver.wait { $0.filter { $0.status == 200 }.count >= 4 }
            let mine = all.filter { $0.userId == userId }
            #expect(mine.map(\.type) == ["user.created", "user.created", "user.created", "user.created", "user.updated", "user.updated", "user.updated"],
                    "\(mine.map(\.type)) \(mine.map(\.status))")
            #expect(Set(mine.filter { $0.type == "user.updated" }.map(\.id)).count == 3)
        }
    }
}
