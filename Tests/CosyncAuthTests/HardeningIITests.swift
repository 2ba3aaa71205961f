import CosyncAuth
import Foundation
import HTTPTypes
import PostgresNIO
import Testing

/// Hardening II (issue 20): the ways in that a review found open, each shown closed.
@Suite("Hardening II: session binding, the linking rule, AppKey signup griefing, anonymous quotas", .serialized)
struct HardeningIITests {
    typealias K = AppKeyClient
    let social = SocialLoginTests()
    let hardening = HardeningTests()

    func authenticator(_ kind: SoftwareAuthenticator.KeyKind = .es256) -> SoftwareAuthenticator {
        SoftwareAuthenticator(kind: kind, rpId: K.rpId, origin: K.origin)
    }

    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    static let socialSettings: [String: JSONValue] = [
        "appleLoginEnabled": .bool(true), "appleBundleId": .string(SocialLoginTests.bundleId),
        "googleLoginEnabled": .bool(true), "googleClientId": .string(SocialLoginTests.googleClient),
    ]

    func revokedReasons(_ userId: UUID) async throws -> String {
        try await TestEnvironment.value(
            "SELECT coalesce(string_agg(body::jsonb -> 'data' ->> 'reason', ',' ORDER BY id), '') FROM events WHERE user_id = \(userId) AND type = 'session.revoked'",
            as: String.self) ?? ""
    }

    func revokedSessionIds(_ userId: UUID) async throws -> String {
        try await TestEnvironment.value(
            """
            SELECT coalesce(string_agg(s, ',' ORDER BY s), '') FROM events e, jsonb_array_elements_text(e.body::jsonb -> 'data' -> 'sessionIds') s
            WHERE e.user_id = \(userId) AND e.type = 'session.revoked'
            """, as: String.self) ?? ""
    }

    /// A user created by Google socialSignup (`sub`) who then set a password through the reset flow:
    /// two identities, google and password (the reset ends the signup's session).
    func googleUserWithPassword(_ sdk: SDK, handle: String, sub: String, password: String) async throws {
        let signup = try await sdk.post("/api/appuser/socialSignup", [("token", try await social.idToken(.google, email: handle, sub: sub)), ("provider", "google"), ("handle", handle)])
        try #require(signup.status == .ok, "\(signup.text)")
        try #require(try await sdk.post("/api/appuser/forgotPassword", [("handle", SDK.handle(handle))]).text == "true")
        // The first mail is the signup's welcome, the second the reset code.
        let resetCode = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: 2).compactMap { sixDigitCode(in: $0.text) }.last)
        try #require(try await sdk.post("/api/appuser/resetPassword", [("handle", SDK.handle(handle)), ("password", SDK.md5(password)), ("code", resetCode)]).text == "true")
    }

    /// The admin detaches the user's Google identity (204).
    func detachGoogle(_ api: API, appId: String, user: String) async throws {
        let ids = (try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)/identities")).json["identities"]?.arrayValue ?? []
        let googleId = try #require(ids.first { $0["kind"] == .string("google") }?["identityId"]?.stringValue)
        #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/identities/\(googleId)").status == .noContent)
    }

    /// The `sid` an access token names.
    func sessionId(_ accessToken: String) -> String { SDKJWTCheck.payload(accessToken)["sid"]?.stringValue ?? "" }

    // MARK: 1. sessions bound to the credential that opened them

    @Test("removing a passkey (end user or admin) ends exactly the sessions it opened, with session.revoked")
    func passkeySessions() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (client, app) = try await K.makeApp(api)
            let appId = app.string("appId")
            let handle = K.uniqueEmail("bound")
            var first = authenticator()
            let signedUp = try await client.signUp(handle, first)
            let signupToken = signedUp.string("access-token")
            let userId = try #require(AppKeyIds.uuid(signedUp.string("appUserId")))
            // Two more passkeys, each then used to sign in.
            var second = authenticator(.ed25519), third = authenticator(.rs256)
            for device in [second, third] {
                let options = try await client.post("addPasskey", .json, [], .access(signupToken))
                try #require(options.status == .ok, "\(options.text)")
                let added = try await client.post("addPasskeyComplete", .json, K.registration(handle: nil, device.register(challenge: try K.challenge(options)), .json), .access(signupToken))
                try #require(added.status == .ok, "\(added.text)")
            }
            let bySecond = try await client.logIn(handle, &second).object.string("access-token")
            let byThird = try await client.logIn(handle, &third).object.string("access-token")
            let byFirst = try await client.logIn(handle, &first).object.string("access-token")
            for token in [bySecond, byThird, byFirst] { #expect(try await client.get("user", .access(token)).status == .ok) }

            // The end user removes the second passkey (from a fresh session of the first).
            let removed = try await client.post("removePasskey", .json, [("keyId", .string(WebAuthn.encodeBase64URL(second.credentialId)))], .access(byFirst))
            #expect(removed.status == .ok, "\(removed.text)")
            #expect(K.code(try await client.get("user", .access(bySecond))) == 405, "the removed passkey's session ended")
            for token in [byThird, byFirst, signupToken] { #expect(try await client.get("user", .access(token)).status == .ok) }
            #expect(try await revokedReasons(userId) == "passkey_removed")
            #expect(try await revokedSessionIds(userId) == sessionId(bySecond))

            // The admin removes the third.
            let passkeys = (try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId.uuidString.lowercased())/passkeys")).object["passkeys"]?.arrayValue ?? []
            let thirdId = try #require(passkeys.first { $0["credentialId"] == .string(WebAuthn.encodeBase64URL(third.credentialId)) }?["passkeyId"]?.stringValue)
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(userId.uuidString.lowercased())/passkeys/\(thirdId)").status == .noContent)
            #expect(K.code(try await client.get("user", .access(byThird))) == 405)
            for token in [byFirst, signupToken] { #expect(try await client.get("user", .access(token)).status == .ok) }
            #expect(try await revokedReasons(userId) == "passkey_removed,passkey_removed")
            #expect(try await revokedSessionIds(userId) == [sessionId(bySecond), sessionId(byThird)].sorted().joined(separator: ","))
            // Every session records the identity that opened it.
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE user_id = \(userId) AND identity_id IS NULL", as: Int.self) == 0)
        }
    }

    @Test("detaching an identity ends the sessions it opened and no other; an upgraded anonymous account keeps its session")
    func identitySessions() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Bound", settings: Self.socialSettings.merging(["signupFlow": .string("none"), "anonymousLoginEnabled": .bool(true)]) { $1 })
            let (sdk, appId) = (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
            let handle = IdentityTests.unique("detach")
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            // Google and a password, and a session of each.
            try await googleUserWithPassword(sdk, handle: handle, sub: sub, password: "Pw-1")
            let byPassword = try await sdk.login(handle, "Pw-1").object.string("access-token")
            let byGoogle = try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))]).object.string("access-token")
            let user = try await IdentityTests().userId(api, appId, handle)
            try await detachGoogle(api, appId: appId, user: user)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: byGoogle)) == 405)
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: byPassword).status == .ok)
            let uid = try #require(UUID(uuidString: user))
            let detachEnded = try await TestEnvironment.value(
                """
                SELECT string_agg(s, ',' ORDER BY s) FROM events e, jsonb_array_elements_text(e.body::jsonb -> 'data' -> 'sessionIds') s
                WHERE e.user_id = \(uid) AND e.type = 'session.revoked' AND e.body::jsonb -> 'data' ->> 'reason' = 'identity_detached'
                """, as: String.self)
            #expect(detachEnded == sessionId(byGoogle), "only the Google session (the reset had ended the signup's)")

            // An anonymous account upgraded in place keeps its session (bound to the new identity now).
            let anon = "ANON_\(Secrets.hexIdentifier().prefix(12))"
            let anonAccess = try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon)]).object.string("access-token")
            let anonUser = try await IdentityTests().userId(api, appId, anon)
            let upgraded = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(anonUser)/upgrade",
                                              json: .object(["handle": .string(IdentityTests.unique("up")), "password": .string("Secret-1")]))
            #expect(upgraded.status == .ok, "\(upgraded.text)")
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: anonAccess).status == .ok)
            let bound = try await TestEnvironment.value(
                "SELECT i.kind FROM sessions s JOIN identities i ON i.id = s.identity_id WHERE s.user_id = \(try #require(UUID(uuidString: anonUser)))", as: String.self)
            #expect(bound == "password")
        }
    }

    // MARK: 2. detach means detached

    @Test("a provider account links only by an explicit step: after a detach neither it nor another account of that e-mail signs in")
    func detachMeansDetached() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Linking", settings: Self.socialSettings.merging(["signupFlow": .string("none")]) { $1 })
            let (sdk, appId) = (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
            let handle = IdentityTests.unique("gg")
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            try await googleUserWithPassword(sdk, handle: handle, sub: sub, password: "Pw-1")
            let user = try await IdentityTests().userId(api, appId, handle)
            // Another Google account with the same verified e-mail is no way in.
            #expect(code(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: "other-\(sub)"))])) == 603)
            let kinds = { try await IdentityTests().kinds(api, appId, user) }
            #expect(try await kinds() == ["google", "password"])
            try await detachGoogle(api, appId: appId, user: user)
            // Detached: the same Google account, and another of the same e-mail, get "no account".
            for subject in [sub, "other-\(sub)"] {
                #expect(code(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: subject))])) == 603)
            }
            #expect(try await kinds() == ["password"], "nothing re-linked")
            // The admin link operation is the explicit step that attaches it again.
            let relinked = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                              json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: handle, sub: sub))]))
            #expect(relinked.status == .created, "\(relinked.text)")
            #expect(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))]).status == .ok)
        }
    }

    @Test("the imported-account exception: the first verified e-mail links once; a detach is remembered")
    func importedEmailLinkOnce() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Imported", settings: Self.socialSettings.merging(["signupFlow": .string("none")]) { $1 })
            let (sdk, appId) = (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
            let handle = IdentityTests.unique("legacy")
            let made = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string(handle), "password": .string("Pw-legacy-1")]))
            let user = try #require(made.object["userId"]?.stringValue)
            let uid = try #require(UUID(uuidString: user))
            // What the importer stores for a CosyncJWT Google account exported without its subject.
            try await TestEnvironment.sql("UPDATE users SET login_provider = 'google', legacy_id = \("legacy-\(user)") WHERE id = \(uid)")
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            let first = try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))])
            #expect(first.status == .ok, "the first verified e-mail links the imported account: \(first.text)")
            #expect(try await IdentityTests().kinds(api, appId, user) == ["google", "password"])
            // Once: another Google account of the same e-mail is no way in.
            #expect(code(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: "second-\(sub)"))])) == 603)
            #expect(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))]).status == .ok)
            // A detach is remembered: the login does not link it again.
            try await detachGoogle(api, appId: appId, user: user)
            #expect(code(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))])) == 603)
            #expect(try await IdentityTests().kinds(api, appId, user) == ["password"])
        }
    }

    @Test("AppKey socialLogin and verifySocialAccount follow the linking rule: a detached provider account gets no session")
    func appKeyDetach() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (client, app) = try await K.makeApp(api, Self.socialSettings)
            let appId = app.string("appId")
            let email = SocialLoginTests.unique("aks")
            let sub = "sub-\(Secrets.hexIdentifier().prefix(10))"
            let token = try await social.idToken(.google, email: email, sub: sub)
            let signup = try await client.post("socialSignup", .json, [("token", .string(token)), ("provider", .string("google")), ("handle", .string(email))])
            #expect(signup.status == .ok, "\(signup.text)")
            let access = signup.object.string("access-token")
            // A passkey as a second way in (the fresh social session may add one).
            let device = authenticator()
            let options = try await client.post("addPasskey", .json, [], .access(access))
            #expect(try await client.post("addPasskeyComplete", .json, K.registration(handle: nil, device.register(challenge: try K.challenge(options)), .json), .access(access)).status == .ok)
            let user = try #require(AppKeyIds.uuid(signup.object.string("appUserId"))).uuidString.lowercased()
            let other = try await social.idToken(.google, email: email, sub: "other-\(sub)")
            #expect(K.code(try await client.post("socialLogin", .json, [("token", .string(other)), ("provider", .string("google"))])) == 603)
            #expect(K.code(try await client.post("verifySocialAccount", .json, [("token", .string(other)), ("provider", .string("google"))])) == 603)
            try await detachGoogle(api, appId: appId, user: user)
            #expect(K.code(try await client.get("user", .access(access))) == 405, "the Google session ended with its identity")
            let again = try await social.idToken(.google, email: email, sub: sub)
            #expect(K.code(try await client.post("socialLogin", .json, [("token", .string(again)), ("provider", .string("google"))])) == 603)
            #expect(K.code(try await client.post("verifySocialAccount", .json, [("token", .string(again)), ("provider", .string("google"))])) == 603)
            #expect(try await IdentityTests().kinds(api, appId, user) == ["passkey"])
        }
    }

    // MARK: 4. AppKey signup griefing

    @Test("a stranger's signupConfirm for the same handle neither cancels a pending signup nor uses up its owner's code quota")
    func signupGriefing() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (client, _) = try await K.makeApp(api)
            let handle = K.uniqueEmail("victim")
            let owner = "198.51.100.30"
            func confirm(_ device: SoftwareAuthenticator, from address: String) async throws -> API.Reply {
                let options = try await client.post("signup", .json, [("handle", .string(handle)), ("displayName", .string("V"))], from: address)
                try #require(options.status == .ok, "\(options.text)")
                return try await client.post("signupConfirm", .json, K.registration(handle: handle, device.register(challenge: try K.challenge(options)), .json), from: address)
            }
            let mine = try await confirm(authenticator(), from: owner)
            #expect(mine.status == .ok, "\(mine.text)")
            let myCode = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: 1).first.flatMap { sixDigitCode(in: $0.text) })
            // Strangers from five addresses spend every code the handle's ceiling allows: each address
            // until its own quota refuses it.
            let perAddress = AppKeyFlowSettings().codesPerHandlePerHour
            for attacker in (1...5).map({ "203.0.113.\(60 + $0)" }) {
                for n in 0..<perAddress {
                    let theirs = try await confirm(authenticator(.ed25519), from: attacker)
                    #expect(theirs.status == .ok, "\(attacker) confirm \(n + 1): \(theirs.text)")
                }
                #expect(K.code(try await confirm(authenticator(.ed25519), from: attacker)) == 500, "\(attacker) is out of codes")
            }
            // The handle's ceiling is spent now, yet the owner from a new address still gets a code, and
            // the first pending signup still completes.
            #expect(try await confirm(authenticator(), from: "198.51.100.31").status == .ok)
            let done = try await client.post("signupComplete", .json, [("code", .string(myCode))], .signup(mine.object.string("signup-token")), from: owner)
            #expect(done.status == .ok && done.object["handle"] == .string(handle), "\(done.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM appkey_signups WHERE lower(handle) = \(handle)", as: Int.self) == 0,
                    "the account exists: the handle's other pending signups are gone")
        }
    }

    // MARK: 6. anonymous accounts are rate-limited

    @Test("new anonymous accounts: at most anonymousAccountsPerAddressPerHour per address and anonymousAccountsPerAppPerHour per app")
    func anonymousQuota() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Anon", settings: ["anonymousLoginEnabled": .bool(true)])
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let appRef = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(created.string("appId"))", as: Int64.self))
            let limit = FlowSettings().anonymousAccountsPerAddressPerHour
            let flooder = "203.0.113.90"
            var handles: [String] = []
            for n in 0..<limit {
                let handle = "ANON_\(UUID().uuidString)"
                let reply = try await hardening.post(sdk, "/api/appuser/loginAnonymous", [("handle", handle)], from: flooder)
                try #require(reply.status == .ok, "account \(n + 1) of \(limit): \(reply.text)")
                handles.append(handle)
            }
            let refused = try await hardening.post(sdk, "/api/appuser/loginAnonymous", [("handle", "ANON_\(UUID().uuidString)")], from: flooder)
            #expect(code(refused) == 500 && refused.text.contains("too many"), "\(refused.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM users WHERE app_ref = \(appRef)", as: Int.self) == limit)
            // An existing account still signs in from there; another address still creates.
            #expect(try await hardening.post(sdk, "/api/appuser/loginAnonymous", [("handle", handles[0])], from: flooder).status == .ok)
            #expect(try await hardening.post(sdk, "/api/appuser/loginAnonymous", [("handle", "ANON_\(UUID().uuidString)")], from: "198.51.100.91").status == .ok)
            // The app-wide ceiling (its counter filled to the limit): every address is refused.
            try await TestEnvironment.sql(
                "UPDATE rate_limits SET count = \(FlowSettings().anonymousAccountsPerAppPerHour) WHERE app_ref = \(appRef) AND subject = 'anonymous-account'")
            #expect(code(try await hardening.post(sdk, "/api/appuser/loginAnonymous", [("handle", "ANON_\(UUID().uuidString)")], from: "198.51.100.92")) == 500)

            // AppKey's anonymous accounts count the same way.
            let (client, keyApp) = try await K.makeApp(api)
            let keyRef = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(keyApp.string("appId"))", as: Int64.self))
            try await TestEnvironment.sql(
                """
                INSERT INTO rate_limits (app_ref, subject, window_start, count)
                VALUES (\(keyRef), 'anonymous-account', now(), \(FlowSettings().anonymousAccountsPerAppPerHour))
                """)
            let handle = "ANON_" + UUID().uuidString
            let options = try await client.post("loginAnonymous", .json, [("handle", .string(handle))])
            let done = try await client.post("loginAnonymousComplete", .json, K.registration(handle: handle, authenticator().register(challenge: try K.challenge(options)), .json))
            #expect(K.code(done) == 500, "\(done.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM users WHERE app_ref = \(keyRef)", as: Int.self) == 0)
        }
    }

    // MARK: 8. suspended apps

    @Test("a suspended app's end user cannot delete the account (402); nothing is deleted")
    func suspendedDeleteAccount() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Frozen", settings: ["signupFlow": .string("none")])
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = IdentityTests.unique("frozen")
            let access = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).object.string("access-token")
            #expect(try await api.call(.patch, "/admin/v1/apps/\(created.string("appId"))", json: .object(["status": .string("suspended")])).status == .ok)
            let reply = try await sdk.post("/api/appuser/deleteAccount", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))], accessToken: access)
            #expect(code(reply) == 402, "\(reply.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM users WHERE handle = \(handle)", as: Int.self) == 1)
        }
    }

    // MARK: 10. smaller rules

    @Test("a provider token without email_verified names no account; an anonymous handle never reaches events or the audit log")
    func smallerRules() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Small", settings: Self.socialSettings.merging(["anonymousLoginEnabled": .bool(true)]) { $1 })
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let email = IdentityTests.unique("noclaim")
            let bare = try await social.idToken(.google, email: email, sub: "nc-\(Secrets.hexIdentifier().prefix(8))", emailVerified: nil)
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", bare), ("provider", "google"), ("handle", email)])) == 613)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM users WHERE handle = \(email)", as: Int.self) == 0)

            let anon = "ANON_\(UUID().uuidString)"
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon)]).status == .ok)
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon)]).status == .ok)
            let appRef = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(created.string("appId"))", as: Int64.self))
            let pattern = "%\(anon)%"
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM events WHERE app_ref = \(appRef)", as: Int.self) ?? 0 > 0)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM events WHERE app_ref = \(appRef) AND body LIKE \(pattern)", as: Int.self) == 0)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM audit_log WHERE app_ref = \(appRef)", as: Int.self) ?? 0 > 0)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM audit_log WHERE app_ref = \(appRef) AND detail::text LIKE \(pattern)", as: Int.self) == 0)
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE app_ref = \(appRef) AND detail ->> 'handle' = \(Identifiers.redacted(anon))", as: Int.self) ?? 0 >= 2)
        }
    }

    @Test("an @ that an emoji modifier or a combining mark follows is still an @; an admin handle's length counts as sent (admin fuzz)")
    func atSignIsACodePoint() async throws {
        #expect(Identifiers.hasAt("a@\u{1F3FB}b.example") && Identifiers.hasAt("a@\u{301}b.example") && !Identifiers.hasAt("ab.example"))
        #expect(Identifiers.localPart("ab\u{301}@\u{1F3FB}x") == "ab\u{301}")
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("At", settings: ["signupFlow": .string("none"), "anonymousLoginEnabled": .bool(true)])
            let appId = created.string("appId")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            // An e-mail handle whose @ carries a modifier: an e-mail handle, not a user name (606 before).
            let login = try await sdk.post("/api/appuser/login", [("handle", "nobody@\u{1F3FB}x.example"), ("password", SDK.md5("pw"))])
            #expect(code(login) == 600, "\(login.text)")
            // The admin upgrade takes it as an e-mail address (422 before).
            let anon = "ANON_\(Secrets.hexIdentifier().prefix(12))"
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon)]).status == .ok)
            let user = try #require(try await TestEnvironment.value("SELECT id FROM users WHERE handle = \(anon)", as: UUID.self))
            let upgraded = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user.uuidString.lowercased())/upgrade",
                                              json: .object(["handle": .string("u\(Secrets.hexIdentifier().prefix(6))@\u{1F3FB}x.example"), "password": .string("Secret-1")]))
            #expect(upgraded.status == .ok, "\(upgraded.text)")
            // 254 code points once trimmed but 264 as sent: refused with 422 (was created), nothing stored.
            let padded = String(repeating: " ", count: 10) + String(repeating: "p", count: 240) + "@x.example"
            for (path, body) in [("users", ["handle": JSONValue.string(padded), "password": .string("Secret-1")]), ("invites", ["handle": .string(padded)])] {
                let reply = try await api.call(.post, "/admin/v1/apps/\(appId)/\(path)", json: .object(body))
                #expect(reply.status == .unprocessableContent && reply.errorField == "handle", "\(path): \(reply.text)")
            }
            let trimmed = padded.trimmingCharacters(in: .whitespaces)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM users WHERE handle = \(trimmed)", as: Int.self) == 0)
        }
    }

    // MARK: contract detail found by AppKeySwift

    @Test("loginComplete with a credential registered only in another app (same RP ID) is 614 passkeyNotExist")
    func foreignCredential() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (other, _) = try await K.makeApp(api)
            var foreign = authenticator()
            let foreignUser = try await other.signUp(K.uniqueEmail("elsewhere"), foreign)
            let (client, _) = try await K.makeApp(api)
            let handle = K.uniqueEmail("here")
            _ = try await client.signUp(handle, authenticator())
            let options = try await client.post("login", .json, [("handle", .string(handle))])
            // The foreign authenticator answers with its own user handle, as a real one would.
            let assertion = foreign.assert(challenge: try K.challenge(options), userHandle: foreignUser.string("appUserId"))
            let reply = try await client.post("loginComplete", .json, K.assertion(handle: handle, assertion, .json))
            #expect(K.code(reply) == 614, "\(reply.text)")
        }
    }

    // MARK: found by the attacker review

    /// Admin link to an unproven handle: the squatter's session must be reported in session.revoked.
    @Test("an admin link to an unproven handle reports the squatter's ended session in session.revoked (attacker review)")
    func unprovenLinkReportsSessions() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await social.makeApp(api, ["signupFlow": .string("none")])
            let appId = app.string("appId")
            let handle = IdentityTests.unique("squat")
            let squatter = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("attacker"))])
            #expect(squatter.status == .ok)
            let sid = SDKJWTCheck.payload(squatter.object.string("access-token"))["sid"]?.stringValue ?? "?"
            let user = try await IdentityTests().userId(api, appId, handle)
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            let linked = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                            json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: handle, sub: sub))]))
            #expect(linked.status == .created, "\(linked.text)")
            let reported = try await TestEnvironment.value(
                """
                SELECT coalesce(string_agg(s, ','), '') FROM events e, jsonb_array_elements_text(e.body::jsonb -> 'data' -> 'sessionIds') s
                WHERE e.user_id = \(try #require(UUID(uuidString: user))) AND e.type = 'session.revoked'
                """, as: String.self) ?? ""
            #expect(reported.contains(sid), "session.revoked lists '\(reported)', not the squatter's session \(sid)")
        }
    }

    /// A Google login that found its identity before a detach and opens its session after it.
    @Test("a Google sign-in racing the detach of its identity opens no session (attacker review)")
    func googleLoginRacingDetach() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await social.makeApp(api, ["signupFlow": .string("none")])
            let appId = app.string("appId")
            let handle = IdentityTests.unique("race")
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            let signup = try await sdk.post("/api/appuser/socialSignup", [("token", try await social.idToken(.google, email: handle, sub: sub)), ("provider", "google"), ("handle", handle)])
            try #require(signup.status == .ok, "\(signup.text)")
            let uid = try #require(UUID(uuidString: try await IdentityTests().userId(api, appId, handle)))
            // What IdentityRemoval runs for the Google identity, after the detach locked the user row.
            let detach = try await TestEnvironment.holding(
                "SELECT 1 FROM users WHERE id = \(uid) FOR UPDATE", for: .milliseconds(1500),
                then: [
                    "DELETE FROM sessions WHERE user_id = \(uid) AND (identity_id IN (SELECT id FROM identities WHERE user_id = \(uid) AND kind = 'google') OR (identity_id IS NULL AND method = 'google'))",
                    "DELETE FROM identities WHERE user_id = \(uid) AND kind = 'google'",
                ])
            let login = try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))])
            try await detach.value
            let left = try await TestEnvironment.value(
                "SELECT count(*)::int FROM sessions WHERE user_id = \(uid) AND method = 'google'", as: Int.self) ?? -1
            #expect(login.status != .ok || left == 0,
                    "login \(login.status): \(left) Google session(s) survive the Google identity's removal (identity_id NULL)")
            if login.status == .ok {
                #expect(try await sdk.get("/api/appuser/getUser", accessToken: login.object.string("access-token")).status != .ok,
                        "the access token of the removed identity still works")
            }
        }
    }

    /// Two pending signups of one handle completed at the same moment.
    @Test("two signupCompletes of one handle at once: one account, never a deadlock or a 500 (attacker review)")
    func concurrentSignupCompletes() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (client, app) = try await K.makeApp(api)
            let handle = K.uniqueEmail("twice")
            var tokens: [String] = []
            for n in 1...2 {
                let device = authenticator()
                let options = try await client.post("signup", .json, [("handle", .string(handle)), ("displayName", .string("T"))])
                try #require(options.status == .ok, "\(options.text)")
                let confirm = try await client.post("signupConfirm", .json, K.registration(handle: handle, device.register(challenge: try K.challenge(options)), .json))
                try #require(confirm.status == .ok, "\(confirm.text)")
                tokens.append(confirm.object.string("signup-token"))
                _ = try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: n)
            }
            let mails = try await TestEnvironment.sendGrid.value.waitForMails(to: handle, count: 2)
            let codes = mails.compactMap { sixDigitCode(in: $0.text) }
            try #require(codes.count == 2)
            // Both completions at once (each takes every pending signup of the handle first).
            async let first = client.post("signupComplete", .json, [("code", .string(codes[0]))], .signup(tokens[0]))
            async let second = client.post("signupComplete", .json, [("code", .string(codes[1]))], .signup(tokens[1]))
            let replies = try await [first, second]
            #expect(replies.filter { $0.status == .ok }.count == 1, "\(replies.map { "\($0.status) \($0.text.prefix(120))" })")
            for reply in replies where reply.status != .ok {
                #expect([601, 613].contains(K.code(reply) ?? 0), "the loser: \(reply.text)")
            }
            _ = app
        }
    }

    /// A new app (signup flow `none`) with one webhook endpoint (never reached) subscribed to `type`.
    func appWithEndpoint(_ api: API, _ name: String, subscribedTo type: EventType) async throws -> (appId: String, endpointId: UUID) {
        let appId = try await api.createApp(name, settings: ["signupFlow": .string("none")]).string("appId")
        let endpoint = try await api.call(.post, "/admin/v1/apps/\(appId)/webhooks", json: .object([
            "url": .string("http://127.0.0.1:9/hook"), "eventTypes": .array([.string(type.rawValue)]),
        ]))
        return (appId, try #require(UUID(uuidString: endpoint.object["webhookId"]?.stringValue ?? ""), "\(endpoint.text)"))
    }

    /// Deleting an app while a webhook worker marks one of its deliveries (endpoint row first, then the
    /// delivery: `WebhookWorker.markDelivered`'s order, held open here).
    @Test("deleting an app while a webhook delivery of it is being marked: no deadlock, no 500 (found by the admin fuzz)")
    func deleteAppRacingWebhookMark() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (appId, endpointId) = try await appWithEndpoint(api, "Racing", subscribedTo: .userCreated)
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string(IdentityTests.unique("w")), "password": .string("Pw-1")])).status == .created)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM webhook_deliveries WHERE endpoint_id = \(endpointId)", as: Int.self) == 1)
            let mark = try await TestEnvironment.holding(
                "SELECT 1 FROM webhook_endpoints WHERE id = \(endpointId) FOR KEY SHARE", for: .milliseconds(1500),
                then: ["UPDATE webhook_deliveries SET last_error = 'racing' WHERE endpoint_id = \(endpointId)"])
            let deleted = try await api.call(.delete, "/admin/v1/apps/\(appId)")
            let marked = await mark.result
            #expect(deleted.status == .noContent, "\(deleted.status) \(deleted.text)")
            if case .failure(let error) = marked { Issue.record("the worker's mark failed: \(String(reflecting: error))") }
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM apps WHERE app_id = \(appId)", as: Int.self) == 0)
        }
    }

    @Test("an app deletion that PostgreSQL picks as a deadlock victim runs again and succeeds (attacker review)")
    func deleteAppDeadlockVictimRetries() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (appId, endpointId) = try await appWithEndpoint(api, "Victim", subscribedTo: .userCreated)
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
            // A user write as PostgreSQL runs it: the app row (its foreign key), then the endpoint (its
            // event's delivery). A second one keeps the app row a while longer, so that the deletion
            // waits first and finds the deadlock itself (it is the victim).
            let writer = try await TestEnvironment.holding("SELECT 1 FROM apps WHERE id = \(ref) FOR KEY SHARE", for: .milliseconds(1000),
                                                           then: ["SELECT 1 FROM webhook_endpoints WHERE id = \(endpointId) FOR KEY SHARE"])
            let other = try await TestEnvironment.holding("SELECT 1 FROM apps WHERE id = \(ref) FOR KEY SHARE", for: .milliseconds(3000))
            let services = try await TestEnvironment.services()
            let deleted = await Task { try await services.apps.delete(appId: appId, actor: "test") }.result
            if case .failure(let error) = deleted { Issue.record("the deletion failed: \(String(reflecting: error))") }
            if case .failure(let error) = await writer.result { Issue.record("the writer failed: \(String(reflecting: error))") }
            _ = await other.result
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM apps WHERE app_id = \(appId)", as: Int.self) == 0)
        }
    }

    @Test("deleting an app while a PATCH of it waits for its webhook endpoints: no deadlock, no 500 (found by the admin fuzz)")
    func deleteAppRacingPatch() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (appId, endpointId) = try await appWithEndpoint(api, "Patched", subscribedTo: .appUpdated)
            // The endpoint row is held; the deletion queues for it first, then the PATCH (whose
            // app.updated delivery needs it). Before: the PATCH held the app row, the deletion took the
            // endpoint and then waited for the app row: 40P01, answered 500.
            let holder = try await TestEnvironment.holding("SELECT 1 FROM webhook_endpoints WHERE id = \(endpointId) FOR UPDATE", for: .milliseconds(1500))
            // The deletion through the core (the test client has one connection, so two HTTP calls
            // would run one after the other), the PATCH through the API.
            let services = try await TestEnvironment.services()
            let deletion = Task { try await services.apps.delete(appId: appId, actor: "test") }
            try await Task.sleep(for: .milliseconds(300))
            let patched = try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["name": .string("Renamed")]))
            let deleted = await deletion.result
            _ = await holder.result
            if case .failure(let error) = deleted { Issue.record("the deletion failed: \(String(reflecting: error))") }
            #expect(patched.status == .ok || patched.status == .notFound, "\(patched.status) \(patched.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM apps WHERE app_id = \(appId)", as: Int.self) == 0)
        }
    }
}
