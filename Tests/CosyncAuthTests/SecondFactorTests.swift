import CosyncAuth
import Crypto
import Foundation
import PostgresNIO
import Testing

/// Per-app Twilio credentials for the fake receiver (shapes the admin API accepts).
enum TwilioAccount {
    static let sid = "AC" + String(repeating: "ab", count: 16)
    static let token = "twilio-token-" + String(repeating: "7", count: 20)
    static let number = "+15005550006"
    static let settings: [String: JSONValue] = [
        "TWILIOAccountSid": .string(sid), "TWILIOToken": .string(token), "TWILIOPhoneNumber": .string(number),
    ]
}

/// An RFC 6238 TOTP written independently of the server's (base32 decoding and truncation by hand).
enum ReferenceTOTP {
    static func base32Decode(_ text: String) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bits = 0, value = 0
        var out: [UInt8] = []
        for c in text.uppercased() where c != " " && c != "=" {
            guard let index = alphabet.firstIndex(of: c) else { return nil }
            value = (value << 5) | index
            bits += 5
            if bits >= 8 {
                out.append(UInt8((value >> (bits - 8)) & 0xff))
                bits -= 8
            }
        }
        return out
    }

    static func code(key: String, at date: Date = Date(), offsetSteps: Int64 = 0) -> String {
        let secret = base32Decode(key) ?? []
        let step = UInt64(Int64(date.timeIntervalSince1970) / 30 + offsetSteps)
        let message = (0..<8).map { UInt8((step >> (8 * (7 - UInt64($0)))) & 0xff) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: SymmetricKey(data: secret)))
        let offset = Int(mac[19] & 0x0f)
        let number = (Int(mac[offset] & 0x7f) << 24 | Int(mac[offset + 1]) << 16 | Int(mac[offset + 2]) << 8 | Int(mac[offset + 3])) % 1_000_000
        return String(format: "%06d", number)
    }
}

@Suite("End-user API: second factor and phone")
struct SecondFactorTests {
    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }
    static func phone() -> String { "+1555" + String(Int.random(in: 1_000_000...9_999_999)) }

    func makeApp(_ api: API, _ settings: [String: JSONValue]) async throws -> (SDK, String) {
        let created = try await api.createApp("TFA \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))", settings: settings)
        return (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
    }

    /// Signs up (flow none) and returns the access token.
    func member(_ sdk: SDK, _ handle: String, _ password: String = "pw") async throws -> String {
        let reply = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5(password))])
        try #require(reply.status == .ok, "\(reply.text)")
        return reply.object.string("access-token")
    }

    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    func sql(_ query: PostgresQuery) async throws { try await TestEnvironment.sql(query) }

    func count(_ query: PostgresQuery) async throws -> Int { try await TestEnvironment.value(query, as: Int.self) ?? 0 }

    @Test("phone: setPhone → SMS via Twilio → verifyPhone → 2FA on → login → SMS code → loginComplete; every error")
    func phoneSecondFactor() async throws {
        let twilio = try await TestEnvironment.twilio.value
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("phone")].merging(TwilioAccount.settings) { $1 })
            let handle = Self.unique("ph")
            let access = try await member(sdk, handle)
            let number = Self.phone()

            // 410 before a verified phone; 602/403 on setPhone input.
            #expect(code(try await sdk.post("/api/appuser/setTwoFactorPhoneVerification", [("twoFactor", "true")], accessToken: access)) == 410)
            #expect(code(try await sdk.post("/api/appuser/setPhone", [], accessToken: access)) == 403)
            #expect(code(try await sdk.post("/api/appuser/setPhone", [("phone", "12")], accessToken: access)) == 602)
            #expect(code(try await sdk.post("/api/appuser/setPhone", [("phone", number)], accessToken: nil, withAppToken: false)) == 602)

            // The SDK sends the number raw: its `+` arrives as a space and is put back (§1.3).
            let set = try await sdk.post("/api/appuser/setPhone", [("phone", number)], accessToken: access)
            #expect(set.status == .ok && set.text == "true", "\(set.text)")
            let texts = try await twilio.waitForMessages(to: number)
            try #require(texts.count == 1)
            #expect(texts[0].from == TwilioAccount.number && texts[0].account == TwilioAccount.sid)
            #expect(texts[0].authorization == "Basic " + Data("\(TwilioAccount.sid):\(TwilioAccount.token)".utf8).base64EncodedString())
            let phoneCode = try #require(sixDigitCode(in: texts[0].body))
            let wrong = phoneCode == "123456" ? "654321" : "123456"
            #expect(code(try await sdk.post("/api/appuser/verifyPhone", [("code", wrong)], accessToken: access)) == 602)
            #expect(code(try await sdk.post("/api/appuser/verifyPhone", [("code", "abc")], accessToken: access)) == 602)
            #expect(code(try await sdk.post("/api/appuser/verifyPhone", [], accessToken: access)) == 403)
            #expect(try await sdk.post("/api/appuser/verifyPhone", [("code", phoneCode)], accessToken: access).text == "true")
            var user = try await sdk.get("/api/appuser/getUser", accessToken: access).object
            #expect(user["phone"] == .string(number) && user["phoneVerified"] == .bool(true))

            // Another user of the app cannot take the verified number (412).
            let other = try await member(sdk, Self.unique("ph2"))
            #expect(code(try await sdk.post("/api/appuser/setPhone", [("phone", number)], accessToken: other)) == 412)

            #expect(try await sdk.post("//api/appuser/setTwoFactorPhoneVerification", [("twoFactor", "true")], accessToken: access).text == "true")
            user = try await sdk.get("/api/appuser/getUser", accessToken: access).object
            #expect(user["twoFactorPhoneVerification"] == .bool(true))

            // login → login-token; the code comes by SMS.
            let first = try await sdk.login(handle, "pw")
            let loginToken = try #require(first.object["login-token"]?.stringValue, "\(first.text)")
            #expect(first.object["jwt"] == nil)
            let loginTexts = try await twilio.waitForMessages(to: number, count: 2)
            let loginCode = try #require(sixDigitCode(in: loginTexts.last?.body ?? ""))
            let badCode = loginCode == "111111" ? "222222" : "111111"
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken)])) == 403)
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", "12ab")])) == 602)
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", badCode)])) == 600)
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", access), ("code", loginCode)])) == 600,
                    "an access token is not a login-token")
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", "not.a.jwt"), ("code", loginCode)])) == 600)
            let done = try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", loginCode)])
            #expect(Set(done.object.keys) == ["jwt", "access-token"], "\(done.text)")
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: done.object.string("access-token")).status == .ok)
            // Single use.
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", loginCode)])) == 600)

            // At most 5 wrong codes per login-token, then even the right one is refused.
            let second = try await sdk.login(handle, "pw").object.string("login-token")
            let secondCode = try #require(sixDigitCode(in: try await twilio.waitForMessages(to: number, count: 3).last?.body ?? ""))
            let miss = secondCode == "111111" ? "222222" : "111111"
            for _ in 0..<5 {
                #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", second), ("code", miss)])) == 600)
            }
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", second), ("code", secondCode)])) == 600)

            // An expired challenge is refused (the token's 10 minutes, moved into the past).
            let third = try await sdk.login(handle, "pw").object.string("login-token")
            let thirdCode = try #require(sixDigitCode(in: try await twilio.waitForMessages(to: number, count: 4).last?.body ?? ""))
            let claims = SDKJWTCheck.payload(third)
            #expect(claims["scope"] == .string("login") && (claims["exp"]?.intValue ?? 0) - (claims["iat"]?.intValue ?? 0) == 600)
            let challenge = try #require(UUID(uuidString: claims["jti"]?.stringValue ?? ""))
            try await sql("UPDATE login_challenges SET expires_at = now() - interval '1 second' WHERE id = \(challenge)")
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", third), ("code", thirdCode)])) == 600)

            // A login-token of another app is refused even with the right code.
            let (otherApp, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let fourth = try await sdk.login(handle, "pw").object.string("login-token")
            let fourthCode = try #require(sixDigitCode(in: try await twilio.waitForMessages(to: number, count: 5).last?.body ?? ""))
            #expect(code(try await otherApp.post("/api/appuser/loginComplete", [("loginToken", fourth), ("code", fourthCode)])) == 600)

            // A 409 outside phone mode; turning phone 2FA off gives tokens directly.
            #expect(try await sdk.post("//api/appuser/setTwoFactorPhoneVerification", [("twoFactor", "false")], accessToken: access).text == "true")
            #expect(Set(try await sdk.login(handle, "pw").object.keys) == ["jwt", "access-token"])
            let (googleApp, _) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("google")])
            let googleAccess = try await member(googleApp, Self.unique("g"))
            #expect(code(try await googleApp.post("/api/appuser/setPhone", [("phone", Self.phone())], accessToken: googleAccess)) == 409)
            #expect(code(try await googleApp.post("/api/appuser/setTwoFactorPhoneVerification", [("twoFactor", "true")], accessToken: googleAccess)) == 409)

            // Every action is in the audit log.
            let logs = try await api.call(.get, "/admin/v1/apps/\(appId)/logs?limit=200").object["logs"]?.arrayValue ?? []
            let actions = Set(logs.compactMap { $0["action"]?.stringValue })
            #expect(actions.isSuperset(of: ["setPhone", "verifyPhone", "setTwoFactorPhoneVerification", "loginComplete", "login"]))
        }
    }

    @Test("the daily SMS cap refuses beyond the limit, changes nothing and sends nothing; no Twilio credentials is a clear 500")
    func smsCap() async throws {
        let twilio = try await TestEnvironment.twilio.value
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(
                api, ["signupFlow": .string("none"), "twoFactorVerification": .string("phone"), "smsDailyLimit": .int(2)].merging(TwilioAccount.settings) { $1 })
            let access = try await member(sdk, Self.unique("cap"))
            let numbers = [Self.phone(), Self.phone(), Self.phone()]
            #expect(try await sdk.post("/api/appuser/setPhone", [("phone", numbers[0])], accessToken: access).text == "true")
            #expect(try await sdk.post("/api/appuser/setPhone", [("phone", numbers[1])], accessToken: access).text == "true")
            let over = try await sdk.post("/api/appuser/setPhone", [("phone", numbers[2])], accessToken: access)
            #expect(code(over) == 500 && (over.object["message"]?.stringValue ?? "").contains("SMS limit"), "\(over.text)")
            let user = try await sdk.get("/api/appuser/getUser", accessToken: access).object
            #expect(user["phone"] == .string(numbers[1]), "the refused request changed nothing")
            _ = try await twilio.waitForMessages(to: numbers[1])
            try await Task.sleep(for: .milliseconds(300))
            #expect(await twilio.messages(to: numbers[2]).isEmpty)
            #expect(try await count("SELECT count(*)::int FROM messages m JOIN apps a ON a.id = m.app_ref WHERE a.app_id = \(appId) AND m.channel = 'sms'") == 2)

            // One number gets at most 5 SMS an hour, whatever the app's daily limit.
            let (roomy, _) = try await makeApp(
                api, ["signupFlow": .string("none"), "twoFactorVerification": .string("phone")].merging(TwilioAccount.settings) { $1 })
            let roomyAccess = try await member(roomy, Self.unique("rate"))
            let target = Self.phone()
            for _ in 0..<5 { #expect(try await roomy.post("/api/appuser/setPhone", [("phone", target)], accessToken: roomyAccess).text == "true") }
            #expect(code(try await roomy.post("/api/appuser/setPhone", [("phone", target)], accessToken: roomyAccess)) == 500)

            // Without Twilio credentials nothing is stored and nothing queued.
            let (bare, bareId) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("phone")])
            let bareAccess = try await member(bare, Self.unique("bare"))
            #expect(code(try await bare.post("/api/appuser/setPhone", [("phone", Self.phone())], accessToken: bareAccess)) == 500)
            #expect(try await bare.get("/api/appuser/getUser", accessToken: bareAccess).object["phone"] == nil)
            #expect(try await count("SELECT count(*)::int FROM messages m JOIN apps a ON a.id = m.app_ref WHERE a.app_id = \(bareId) AND m.channel = 'sms'") == 0)
        }
    }

    @Test("google: setTwoFactorGoogleVerification → secret + QR (decodes to the otpauth URI) → login → TOTP → loginComplete; reuse refused")
    func googleSecondFactor() async throws {
        let sendGrid = try await TestEnvironment.sendGrid.value
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(
                api, ["signupFlow": .string("none"), "twoFactorVerification": .string("google"), "googleAppName": .string("Acme & Co")])
            let handle = Self.unique("totp")
            let access = try await member(sdk, handle)

            let setup = try await sdk.post("//api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: access)
            let key = try #require(setup.object["googleSecretKey"]?.stringValue, "\(setup.text)")
            let image = try #require(setup.object["QRDataImage"]?.stringValue)
            #expect(try Regex("^[a-z2-7]{4}( [a-z2-7]{4}){7}$").wholeMatch(in: key) != nil, "Google-Authenticator display form: \(key)")
            #expect(ReferenceTOTP.base32Decode(key)?.count == 20)
            #expect(image.hasPrefix("data:image/png;base64,"))
            let png = try #require(Data(base64Encoded: String(image.dropFirst("data:image/png;base64,".count))))
            let secret = key.replacingOccurrences(of: " ", with: "").uppercased()
            let expectedURI = "otpauth://totp/Acme%20%26%20Co:\(handle.replacingOccurrences(of: "@", with: "%40"))?secret=\(secret)&issuer=Acme%20%26%20Co&algorithm=SHA1&digits=6&period=30"
            #expect(try QRDecoder.decode(png: png) == expectedURI)

            // The same secret and QR code are e-mailed (template qrCode, PNG attached).
            let mails = try await sendGrid.waitForMails(to: handle)
            let mail = try #require(mails.last)
            #expect(mail.text.contains(key) || mail.html.contains(key))
            #expect(mail.attachments.count == 1 && mail.attachments.first?.name == "QRCode.png" && mail.attachments.first?.type == "image/png")
            #expect(Data(base64Encoded: mail.attachments.first?.content ?? "") == png)

            // Once sent, the outbox keeps only the envelope of that e-mail.
            var redacted = false
            for _ in 0..<100 where !redacted {
                redacted = try await count("SELECT count(*)::int FROM messages WHERE template = 'qrCode' AND recipient = \(handle) AND attachment_data IS NULL AND position(\(secret) in body) = 0") == 1
                if !redacted { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(redacted)

            // The secret is sealed at rest.
            #expect(try await count("SELECT count(*)::int FROM users WHERE lower(handle) = \(handle) AND position(\(Data(secret.utf8)) in totp_secret_sealed) > 0") == 0)

            let loginToken = try #require(try await sdk.login(handle, "pw").object["login-token"]?.stringValue)
            let totp = ReferenceTOTP.code(key: key)
            let wrong = ReferenceTOTP.code(key: key, offsetSteps: 5)
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", wrong)])) == 600)
            let done = try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", " \(totp.prefix(3)) \(totp.suffix(3))")])
            #expect(Set(done.object.keys) == ["jwt", "access-token"], "spaces in the code are ignored: \(done.text)")

            // The same TOTP step cannot log in twice, even with a fresh login-token.
            let again = try #require(try await sdk.login(handle, "pw").object["login-token"]?.stringValue)
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", again), ("code", totp)])) == 600)

            // Enabling again rotates the secret; disabling answers true and login gives tokens directly.
            let rotated = try await sdk.post("//api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: access)
            #expect(rotated.object["googleSecretKey"]?.stringValue != key)
            #expect(try await sdk.post("//api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "false")], accessToken: access).text == "true")
            #expect(Set(try await sdk.login(handle, "pw").object.keys) == ["jwt", "access-token"])

            // 408 outside google mode.
            let (phoneApp, _) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("phone")])
            let phoneAccess = try await member(phoneApp, Self.unique("p"))
            #expect(code(try await phoneApp.post("//api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: phoneAccess)) == 408)

            let logs = try await api.call(.get, "/admin/v1/apps/\(appId)/logs?limit=200").object["logs"]?.arrayValue ?? []
            let logged = Set(logs.compactMap { $0["action"]?.stringValue })
            #expect(logged.isSuperset(of: ["setTwoFactorGoogleVerification", "loginComplete"]))
        }
    }

    @Test("a login, loginComplete or forgotPassword meeting an account deletion in flight answers its error code: no 500, no deadlock")
    func racingDeletion() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("google")])
            for (step, expected) in [("login", 600), ("loginComplete", 600), ("forgotPassword", 603)] {
                let handle = Self.unique("race")
                let access = try await member(sdk, handle)
                let setup = try await sdk.post("/api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: access)
                let key = try #require(setup.object["googleSecretKey"]?.stringValue, "\(setup.text)")
                let userId = try #require(try await TestEnvironment.value("SELECT id FROM users WHERE handle = \(handle)", as: UUID.self))
                let request: @Sendable () async throws -> API.Reply
                switch step {
                case "login":
                    request = { try await sdk.login(handle, "pw") }
                case "loginComplete":
                    let loginToken = try #require(try await sdk.login(handle, "pw").object["login-token"]?.stringValue)
                    request = { try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", ReferenceTOTP.code(key: key))]) }
                default:
                    request = { try await sdk.post("/api/appuser/forgotPassword", [("handle", SDK.handle(handle))]) }
                }
                // An account deletion as PostgreSQL runs it: the user row first, the cascade (login
                // challenges, reset codes, sessions) after; held open between the two. Before, the
                // login's challenge and the reset code failed their foreign key (500), and loginComplete,
                // which locked its challenge before the user, deadlocked with the cascade (40P01).
                let deletion = try await TestEnvironment.deletingUser(userId, holding: .milliseconds(1500))
                let reply = try await request()
                try await deletion.value
                #expect(code(reply) == expected, "\(step): \(reply.status) \(reply.text)")
            }
        }
    }

    @Test("wrong second-factor codes count per user across login-tokens and lock loginComplete")
    func secondFactorLock() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none"), "twoFactorVerification": .string("google")])
            let handle = Self.unique("lock")
            let access = try await member(sdk, handle)
            let key = try await sdk.post("//api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: access).object.string("googleSecretKey")
            let wrong = ReferenceTOTP.code(key: key, offsetSteps: 7)
            for _ in 0..<2 {
                let token = try await sdk.login(handle, "pw").object.string("login-token")
                for _ in 0..<5 {
                    #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", token), ("code", wrong)])) == 600)
                }
            }
            // Ten wrong codes over two tokens: a fresh token with the right code is refused for now.
            let fresh = try await sdk.login(handle, "pw").object.string("login-token")
            #expect(code(try await sdk.post("/api/appuser/loginComplete", [("loginToken", fresh), ("code", ReferenceTOTP.code(key: key))])) == 600)
            // The lock is temporary: once it has passed, the right code works.
            try await sql("UPDATE login_throttle SET locked_until = now() - interval '1 second' WHERE subject LIKE '2fa:%'")
            let later = try await sdk.login(handle, "pw").object.string("login-token")
            #expect(Set(try await sdk.post("/api/appuser/loginComplete", [("loginToken", later), ("code", ReferenceTOTP.code(key: key))]).object.keys) == ["jwt", "access-token"])
        }
    }

    @Test("TOTP matches the RFC 6238 SHA-1 test vectors")
    func totpVectors() {
        // RFC 6238 appendix B, secret "12345678901234567890", 8 digits there; the last 6 here.
        let secret = Array("12345678901234567890".utf8)
        for (time, expected) in [(59, "287082"), (1_111_111_109, "081804"), (1_234_567_890, "005924"), (2_000_000_000, "279037")] {
            #expect(TOTP.code(secret: secret, step: Int64(time) / 30) == expected)
        }
        #expect(TOTP.secret(fromKey: TOTP.displayKey(secret)) == secret)
    }
}

/// Decodes a QR PNG with the decoder the test command installs (zxing-cpp from PyPI, through
/// Tests/system/qr-decode.py; COSYNC_TEST_PYTHON names the Python that has it).
enum QRDecoder {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static func decode(png: Data) throws -> String {
        guard let python = ProcessInfo.processInfo.environment["COSYNC_TEST_PYTHON"], !python.isEmpty else {
            throw Failure(description: "COSYNC_TEST_PYTHON is not set: run the tests with Tests/test.sh")
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("qr-\(UUID().uuidString).png")
        try png.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root.appendingPathComponent("Tests/system/qr-decode.py").path, file.path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "qr-decode.py exited \(process.terminationStatus)") }
        var text = String(decoding: data, as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
