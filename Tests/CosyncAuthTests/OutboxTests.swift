import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// The outbox's delivery rules (hardening items 9, 10, 15, 17), against the real PostgreSQL, the
/// shared delivery worker of the test run and the fake SendGrid/Twilio.
@Suite("Outbox: suspended apps, sender addresses, per-message delivery, redaction")
struct OutboxTests {
    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }

    func count(_ query: PostgresQuery) async throws -> Int { try await TestEnvironment.value(query, as: Int.self) ?? -1 }

    func text(_ query: PostgresQuery) async throws -> String? { try await TestEnvironment.value(query, as: String?.self) ?? nil }

    /// Status of the outbox row(s) to `recipient` (one expected).
    func status(_ recipient: String) async throws -> String? {
        try await text("SELECT string_agg(status, ',') FROM messages WHERE recipient = \(recipient)")
    }

    /// Polls until the row to `recipient` has `status` (the mail reaches the fake before the row is marked).
    func waitForStatus(_ recipient: String, _ wanted: String, timeout: Duration = .seconds(10)) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await status(recipient) == wanted { return true }
            try await Task.sleep(for: .milliseconds(25))
        }
        return false
    }

    func invite(_ api: API, _ appId: String, _ handle: String, token: String? = TestEnvironment.operatorToken) async throws -> API.Reply {
        try await api.call(.post, "/admin/v1/apps/\(appId)/invites", token: token, json: .object(["handle": .string(handle)]))
    }

    // MARK: 9. suspended apps

    @Test("a suspended app's secret may read but not change anything (403 app_suspended); the operator still may")
    func suspendedSecretReadsOnly() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Suspended Secret")
            let appId = created.string("appId"), secret = created.string("appSecret")
            let suspend = try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["status": .string("suspended")]))
            try #require(suspend.status == .ok, "\(suspend.text)")

            let user = try await api.call(.post, "/admin/v1/apps/\(appId)/users", token: secret,
                                          json: .object(["handle": .string(Self.unique("u")), "password": .string("pw")]))
            #expect(user.status == .forbidden && user.errorCode == "app_suspended", "\(user.status) \(user.text)")
            let guest = Self.unique("guest")
            let invited = try await invite(api, appId, guest, token: secret)
            #expect(invited.status == .forbidden && invited.errorCode == "app_suspended", "\(invited.text)")
            let renamed = try await api.call(.patch, "/admin/v1/apps/\(appId)", token: secret, json: .object(["name": .string("Renamed")]))
            #expect(renamed.status == .forbidden && renamed.errorCode == "app_suspended")
            let template = try await api.call(.put, "/admin/v1/apps/\(appId)/email-templates/invite/EN", token: secret,
                                              json: .object(["subject": .string("s"), "html": .string("%CODE%")]))
            #expect(template.status == .forbidden && template.errorCode == "app_suspended")
            let rotated = try await api.call(.post, "/admin/v1/apps/\(appId)/app-secret/rotate", token: secret)
            #expect(rotated.status == .forbidden && rotated.errorCode == "app_suspended")
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)", token: secret).errorCode == "app_suspended")
            // Nothing was created or changed.
            #expect(try await count("SELECT count(*)::int FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appId)") == 0)
            #expect(try await count("SELECT count(*)::int FROM invites i JOIN apps a ON a.id = i.app_ref WHERE a.app_id = \(appId)") == 0)
            #expect(try await count("SELECT count(*)::int FROM messages m JOIN apps a ON a.id = m.app_ref WHERE a.app_id = \(appId)") == 0)
            #expect(try await text("SELECT name FROM apps WHERE app_id = \(appId)") == "Suspended Secret")
            // Reads still work.
            for path in ["", "/users", "/invites", "/messages", "/logs", "/email-templates/invite/EN"] {
                let read = try await api.call(.get, "/admin/v1/apps/\(appId)\(path)", token: secret)
                #expect(read.status == .ok, "GET \(path): \(read.status) \(read.text)")
            }
            // The operator may do everything, un-suspending included; then the secret may write again.
            let byOperator = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string(Self.unique("op")), "password": .string("pw")]))
            #expect(byOperator.status == .created, "\(byOperator.text)")
            #expect(try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["status": .string("active")])).status == .ok)
            let again = try await api.call(.post, "/admin/v1/apps/\(appId)/users", token: secret,
                                           json: .object(["handle": .string(Self.unique("u")), "password": .string("pw")]))
            #expect(again.status == .created, "\(again.text)")
        }
    }

    @Test("the worker holds a suspended app's queued mail and sends it once the app is active again")
    func suspendedAppMailIsHeld() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("Held Mail").string("appId")
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
            let sendGrid = try await TestEnvironment.sendGrid.value
            // A message queued while the app was active, due 1.5 s later (so the worker cannot take it
            // before the suspension, even on a loaded machine), then the suspension.
            let guest = Self.unique("held")
            try await TestEnvironment.sql("""
                INSERT INTO messages (app_ref, channel, recipient, template, subject, body, next_attempt)
                VALUES (\(ref), 'email', \(guest), 'signUpSuccess', 'Welcome', 'held', now() + interval '1500 milliseconds')
                """)
            #expect(try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["status": .string("suspended")])).status == .ok)
            // A message queued during the suspension (by the operator) is held too.
            let during = Self.unique("during")
            #expect(try await invite(api, appId, during).status == .created)

            try await Task.sleep(for: .milliseconds(2500))  // dozens of worker polls, past next_attempt
            #expect(await sendGrid.mails(to: guest).isEmpty)
            #expect(await sendGrid.mails(to: during).isEmpty)
            #expect(try await status(guest) == "queued")
            #expect(try await status(during) == "queued")
            #expect(try await count("SELECT max(attempts)::int FROM messages WHERE recipient IN (\(guest), \(during))") == 0)

            #expect(try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["status": .string("active")])).status == .ok)
            #expect(try await sendGrid.waitForMails(to: guest).count == 1)
            #expect(try await sendGrid.waitForMails(to: during).count == 1)
            #expect(try await waitForStatus(guest, "sent"))
            #expect(try await waitForStatus(during, "sent"))
        }
    }

    // MARK: 10. From and Reply-To

    @Test("From is the operator's address unless the app sends with its own key; tenant addresses become Reply-To")
    func senderAddresses() async throws {
        try await TestEnvironment.withAPI { api in
            let sendGrid = try await TestEnvironment.sendGrid.value
            // Tenant address, no key of its own: operator From, tenant address as Reply-To.
            let borrowed = try await api.createApp("Borrowed Key", settings: [
                "emailExtension": .bool(true), "emailExtensionSenderEmail": .string("team@tenant-a.test"),
            ]).string("appId")
            let a = Self.unique("a")
            #expect(try await invite(api, borrowed, a).status == .created)
            let mailA = try #require(try await sendGrid.waitForMails(to: a).first)
            #expect(mailA.from == "auth@cosync.test" && mailA.replyTo == "team@tenant-a.test", "from \(mailA.from) reply \(mailA.replyTo)")
            #expect(mailA.authorization == "Bearer \(TestEnvironment.sendGridKey)")

            // A template replyTo (no own key) is only Reply-To, never From.
            let templated = try await api.createApp("Template Reply").string("appId")
            let put = try await api.call(.put, "/admin/v1/apps/\(templated)/email-templates/invite/EN", json: .object([
                "subject": .string("Join %APP_NAME%"), "html": .string("<p>%CODE%</p>"), "replyTo": .string("help@tenant-t.test"),
            ]))
            try #require(put.status == .ok, "\(put.text)")
            let t = Self.unique("t")
            #expect(try await invite(api, templated, t).status == .created)
            let mailT = try #require(try await sendGrid.waitForMails(to: t).first)
            #expect(mailT.from == "auth@cosync.test" && mailT.replyTo == "help@tenant-t.test", "from \(mailT.from) reply \(mailT.replyTo)")

            // Its own SendGrid key: its own From, through its own key; the template's replyTo stays Reply-To.
            let ownKey = "SG.own-" + Secrets.hexIdentifier()
            let own = try await api.createApp("Own Key", settings: [
                "emailExtension": .bool(true), "emailExtensionSenderEmail": .string("team@tenant-b.test"),
                "emailExtensionAPIKey": .string(ownKey),
            ]).string("appId")
            let b = Self.unique("b")
            #expect(try await invite(api, own, b).status == .created)
            let mailB = try #require(try await sendGrid.waitForMails(to: b).first)
            #expect(mailB.from == "team@tenant-b.test" && mailB.replyTo == "", "from \(mailB.from) reply \(mailB.replyTo)")
            #expect(mailB.authorization == "Bearer \(ownKey)")
            _ = try await api.call(.put, "/admin/v1/apps/\(own)/email-templates/invite/EN", json: .object([
                "subject": .string("Join"), "html": .string("<p>%CODE%</p>"), "replyTo": .string("help@tenant-b.test"),
            ]))
            let b2 = Self.unique("b2")
            #expect(try await invite(api, own, b2).status == .created)
            let mailB2 = try #require(try await sendGrid.waitForMails(to: b2).first)
            #expect(mailB2.from == "team@tenant-b.test" && mailB2.replyTo == "help@tenant-b.test")
            // A key set but the extension off: the operator's key and From.
            let off = try await api.createApp("Key Off", settings: [
                "emailExtension": .bool(false), "emailExtensionSenderEmail": .string("team@tenant-c.test"),
                "emailExtensionAPIKey": .string(ownKey),
            ]).string("appId")
            let c = Self.unique("c")
            #expect(try await invite(api, off, c).status == .created)
            let mailC = try #require(try await sendGrid.waitForMails(to: c).first)
            #expect(mailC.from == "auth@cosync.test" && mailC.authorization == "Bearer \(TestEnvironment.sendGridKey)")
            // Every e-mail names its outbox row, so a resend can be traced.
            let rowId = try await TestEnvironment.value("SELECT id FROM messages WHERE recipient = \(c)", as: Int64.self)
            #expect(mailC.messageId == rowId.map { String($0) })
        }
    }

    // MARK: 15. one message at a time

    @Test("one failing and one slow message hold nothing else; the claim is a committed lease")
    func perMessageDelivery() async throws {
        try await TestEnvironment.withAPI { api in
            let sendGrid = try await TestEnvironment.sendGrid.value
            let appId = try await api.createApp("Per Message").string("appId")
            let slow = Self.unique("slow"), broken = Self.unique("broken")
            let others = (0..<3).map { Self.unique("other\($0)") }
            await sendGrid.setBehaviour(.delay(.seconds(4)), for: slow)
            await sendGrid.setBehaviour(.fail(status: 500), for: broken)
            defer {
                Task {
                    await sendGrid.setBehaviour(nil, for: slow)
                    await sendGrid.setBehaviour(nil, for: broken)
                }
            }
            let started = ContinuousClock.now
            for handle in [slow, broken] + others {
                #expect(try await invite(api, appId, handle).status == .created)
            }
            // The others arrive while the slow one is still being sent.
            for handle in others {
                #expect(try await sendGrid.waitForMails(to: handle, timeout: .seconds(3)).count == 1, "\(handle)")
            }
            #expect(ContinuousClock.now - started < .seconds(4))
            #expect(await sendGrid.mails(to: slow).isEmpty)
            // The slow one is leased in a committed claim: visible from another connection as 'sending',
            // its next_attempt (the lease) pushed well into the future.
            #expect(try await status(slow) == "sending")
            #expect(try await count("SELECT count(*)::int FROM messages WHERE recipient = \(slow) AND next_attempt > now() + interval '30 seconds'") == 1)
            // The refused one is back in the queue with its error and a backoff.
            #expect(try await waitForStatus(broken, "queued", timeout: .seconds(3)))
            #expect(try await text("SELECT last_error FROM messages WHERE recipient = \(broken)") == "SendGrid answered HTTP 500")
            #expect(try await count("SELECT attempts FROM messages WHERE recipient = \(broken)") == 1)
            #expect(await sendGrid.refused[broken] == 1)
            // The slow one completes once.
            #expect(try await sendGrid.waitForMails(to: slow).count == 1)
            #expect(try await waitForStatus(slow, "sent"))
            #expect(try await count("SELECT attempts FROM messages WHERE recipient = \(slow)") == 1)
        }
    }

    @Test("a message claimed by a crashed worker is sent exactly once after its lease runs out; sent ones never again")
    func crashedClaimIsResentOnce() async throws {
        try await TestEnvironment.withAPI { api in
            let sendGrid = try await TestEnvironment.sendGrid.value
            let appId = try await api.createApp("Crashed Worker").string("appId")
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
            let inFlight = Self.unique("inflight"), done = Self.unique("done")
            // What a worker leaves behind when it dies while sending: the row claimed ('sending', the
            // attempt counted, the lease 1.5 s out) and never marked. Next to it, a row already sent.
            try await TestEnvironment.sql("""
                INSERT INTO messages (app_ref, channel, recipient, template, subject, body, status, attempts, next_attempt)
                VALUES (\(ref), 'email', \(inFlight), 'signUpSuccess', 'Welcome', 'in flight', 'sending', 1, now() + interval '1500 milliseconds')
                """)
            try await TestEnvironment.sql("""
                INSERT INTO messages (app_ref, channel, recipient, template, subject, body, status, attempts, next_attempt, sent_at)
                VALUES (\(ref), 'email', \(done), 'signUpSuccess', 'Welcome', 'already sent', 'sent', 1, now() - interval '1 minute', now())
                """)
            try await Task.sleep(for: .milliseconds(700))
            #expect(await sendGrid.mails(to: inFlight).isEmpty, "the lease is still held")
            #expect(try await status(inFlight) == "sending")
            let resent = try await sendGrid.waitForMails(to: inFlight, timeout: .seconds(10))
            #expect(resent.count == 1 && resent.first?.text == "in flight")
            #expect(try await waitForStatus(inFlight, "sent"))
            try await Task.sleep(for: .milliseconds(800))  // more polls: nothing is sent again
            #expect(await sendGrid.mails(to: inFlight).count == 1)
            #expect(await sendGrid.mails(to: done).isEmpty)
            #expect(try await count("SELECT attempts FROM messages WHERE recipient = \(inFlight)") == 2)
            #expect(try await status(done) == "sent")
        }
    }

    // MARK: 17. codes at rest

    @Test("codes are redacted from the outbox once delivered; the envelope stays")
    func codesRedactedOnceDelivered() async throws {
        try await TestEnvironment.withLiveServer { api in
            let sendGrid = try await TestEnvironment.sendGrid.value
            let created = try await api.createApp("Redaction", settings: ["signupFlow": .string("code")])
            let appId = created.string("appId")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = Self.unique("redact")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).text == "true")
            let guest = Self.unique("guest")
            #expect(try await invite(api, appId, guest).status == .created)

            for recipient in [handle, guest] {
                let mail = try #require(try await sendGrid.waitForMails(to: recipient).first)
                let code = try #require(sixDigitCode(in: mail.text), "the provider received the code")
                #expect(mail.html.contains(code))
                #expect(try await waitForStatus(recipient, "sent"))
                let listed = try await api.call(.get, "/admin/v1/apps/\(appId)/messages?to=\(SDK.handle(recipient))").object["messages"]?.arrayValue ?? []
                #expect(listed.count == 1 && listed.first?["status"] == .string("sent"))
                #expect(listed.first?["to"] == .string(recipient) && !(listed.first?["subject"]?.stringValue ?? "").isEmpty)
                let listedText = String(decoding: try JSONCoding.encode(JSONValue.array(listed)), as: UTF8.self)
                #expect(!listedText.contains(code), "admin list: \(listedText)")
                #expect(try await count("""
                    SELECT count(*)::int FROM messages WHERE recipient = \(recipient) AND sent_at IS NOT NULL
                      AND position(\(code) in body) = 0 AND position(\(code) in html_body) = 0 AND template IN ('signUp', 'invite')
                    """) == 1)
            }
        }
    }

    @Test("an SMS code is redacted once Twilio took it")
    func smsRedacted() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("SMS Redaction", settings: [
                "signupFlow": .string("none"), "twoFactorVerification": .string("phone"),
                "TWILIOAccountSid": .string("AC" + String(repeating: "cd", count: 16)), "TWILIOToken": .string("tok-" + Secrets.hexIdentifier()),
                "TWILIOPhoneNumber": .string("+15005550006"),
            ])
            let appId = created.string("appId")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = Self.unique("sms")
            let phone = "+1555" + String(Int.random(in: 1_000_000...9_999_999))
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            try await TestEnvironment.sql("""
                UPDATE users SET two_factor_phone = true, phone = \(phone), phone_verified = true WHERE lower(handle) = lower(\(handle))
                """)
            #expect(Set(try await sdk.login(handle, "pw").object.keys) == ["login-token"])
            let sms = try #require(try await TestEnvironment.twilio.value.waitForMessages(to: phone).first)
            let code = try #require(sixDigitCode(in: sms.body))
            #expect(try await waitForStatus(phone, "sent"))
            #expect(try await count("SELECT count(*)::int FROM messages WHERE recipient = \(phone) AND position(\(code) in body) = 0") == 1)
            let listed = try await api.call(.get, "/admin/v1/apps/\(appId)/messages?to=\(SDK.handle(phone))")
            #expect(listed.status == .ok && !listed.text.contains(code) && listed.text.contains("\"sms\""))
        }
    }
}
