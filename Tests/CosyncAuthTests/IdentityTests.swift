import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// Identities (issue 11 §2): the ways a user signs in, in their own table.
@Suite("Identities: link, detach, upgrade, migration")
struct IdentityTests {
    let social = SocialLoginTests()
    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }
    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    func userId(_ api: API, _ appId: String, _ handle: String) async throws -> String {
        let list = try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=\(handle.prefix(10))")
        return try #require(list.json["users"]?.arrayValue?.first { $0["handle"]?.stringValue == handle }?["userId"]?.stringValue)
    }

    func kinds(_ api: API, _ appId: String, _ user: String) async throws -> [String] {
        let reply = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)/identities")
        return (reply.json["identities"]?.arrayValue ?? []).compactMap { $0["kind"]?.stringValue }.sorted()
    }

    @Test("identities.kind is typed end to end: the column's CHECK admits exactly the IdentityKind cases")
    func kindColumnMatchesEnum() async throws {
        let definition = try #require(try await TestEnvironment.value(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'identities'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%kind%'",
            as: String.self))
        let admitted = Set(definition.split(separator: "'").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            .filter { !$0.contains("::") && !$0.contains(" ") })
        #expect(admitted == Set(IdentityKind.allCases.map(\.rawValue)), "\(definition)")
    }

    @Test("a password user links Google by its verified e-mail; socialLogin then finds the same user; detach and the last identity")
    func linkAndDetach() async throws {
        try await TestEnvironment.withLiveServer { api in
            // A handle proven by the e-mailed signup code.
            let (sdk, app) = try await social.makeApp(api, ["signupFlow": .string("code")])
            let appId = app.string("appId")
            let handle = Self.unique("link")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let mail = try #require(try await TestEnvironment.sendGrid.value.waitForMails(to: handle).first)
            let signupCode = try #require(sixDigitCode(in: mail.text))
            #expect(try await sdk.post("/api/appuser/completeSignup", [("handle", SDK.handle(handle)), ("code", signupCode)]).status == .ok)
            let user = try await userId(api, appId, handle)
            #expect(try await kinds(api, appId, user) == ["password"])
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            // Not linked: no account (603; the linking rule), and no second account.
            #expect(code(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))])) == 603)

            // The provider's verified e-mail must be the handle.
            let other = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                           json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: Self.unique("x"), sub: sub))]))
            #expect(other.status == .forbidden && other.errorCode == "email_mismatch", "\(other.text)")
            let unverified = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                                json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: handle, sub: sub, emailVerified: false))]))
            #expect(unverified.status == .forbidden, "\(unverified.text)")
            let bad = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                         json: .object(["provider": .string("google"), "idToken": .string("not.a.token")]))
            #expect(bad.status == .forbidden && bad.errorCode == "invalid_token")
            let linked = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                            json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: handle, sub: sub))]))
            #expect(linked.status == .created && linked.object["kind"] == .string("google") && linked.object["subject"] == .string(sub), "\(linked.text)")
            #expect(try await kinds(api, appId, user) == ["google", "password"])

            // The legacy socialLogin now finds the same user.
            let login = try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))])
            #expect(login.status == .ok, "\(login.text)")
            let me = try await sdk.get("/api/appuser/getUser", accessToken: login.object.string("access-token"))
            #expect(me.object["handle"] == .string(handle) && me.object["loginProvider"] == .string(""), "getUser answers as before: \(me.text)")
            #expect((try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=\(handle.prefix(10))")).json["users"]?.arrayValue?.count == 1)

            // The same Google account cannot be an identity of a second user.
            let second = Self.unique("second")
            let secondUser = try #require((try await api.call(.post, "/admin/v1/apps/\(appId)/users",
                                                               json: .object(["handle": .string(second), "password": .string("pw")]))).object["userId"]?.stringValue)
            let taken = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(secondUser)/identities",
                                           json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: second, sub: sub))]))
            #expect(taken.status == .conflict && taken.errorCode == "identity_taken", "\(taken.text)")

            // Detach Google: its session ends, the password session stays, socialLogin no longer finds the user.
            let passwordSession = try await sdk.login(handle, "pw").object.string("access-token")
            let ids = (try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)/identities")).json["identities"]?.arrayValue ?? []
            let googleId = try #require(ids.first { $0["kind"] == .string("google") }?["identityId"]?.stringValue)
            let passwordId = try #require(ids.first { $0["kind"] == .string("password") }?["identityId"]?.stringValue)
            #expect((try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/identities/\(googleId)")).status == .noContent)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: login.object.string("access-token"))) == 405)
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: passwordSession).status == .ok)
            #expect(code(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))])) == 603)

            // The last identity: refused unless the account goes with it.
            let last = try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/identities/\(passwordId)")
            #expect(last.status == .conflict && last.errorCode == "last_identity", "\(last.text)")
            #expect(try await sdk.login(handle, "pw").status == .ok, "nothing changed")
            #expect((try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/identities/\(passwordId)?deleteAccount=maybe")).status == .badRequest)
            #expect((try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/identities/\(passwordId)?deleteAccount=true")).status == .noContent)
            #expect((try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)")).status == .notFound)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: passwordSession)) == 405)
            // The event stream recorded each step, in order.
            let events = try await TestEnvironment.value(
                "SELECT string_agg(type, ',' ORDER BY id) FROM events WHERE user_id = \(try #require(UUID(uuidString: user))) AND type LIKE 'identity.%'",
                as: String?.self) ?? nil
            #expect(events == "identity.linked,identity.detached,identity.detached", "\(events ?? "-")")
        }
    }

    @Test("linking to a handle nobody proved removes the password and ends every session (no pre-registered takeover)")
    func linkUnprovenHandle() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await social.makeApp(api, ["signupFlow": .string("none")])
            let appId = app.string("appId")
            let handle = Self.unique("squat")
            // Someone registers the address without proving it, and keeps a session.
            let squatter = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("attacker"))])
            #expect(squatter.status == .ok)
            let user = try await userId(api, appId, handle)
            let sub = "g-\(Secrets.hexIdentifier().prefix(12))"
            let linked = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/identities",
                                            json: .object(["provider": .string("google"), "idToken": .string(try await social.idToken(.google, email: handle, sub: sub))]))
            #expect(linked.status == .created, "\(linked.text)")
            #expect(try await kinds(api, appId, user) == ["google"])
            #expect(code(try await sdk.login(handle, "attacker")) == 600)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: squatter.object.string("access-token"))) == 405)
            #expect(try await sdk.post("/api/appuser/googleLogin", [("token", try await social.idToken(.google, email: handle, sub: sub))]).status == .ok)
        }
    }

    @Test("an anonymous account becomes permanent with the same user id; a taken handle changes nothing")
    func upgrade() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await social.makeApp(api, ["signupFlow": .string("none"), "anonymousLoginEnabled": .bool(true)])
            let appId = app.string("appId")
            let anon = "ANON_\(Secrets.hexIdentifier().prefix(12))"
            let first = try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon)])
            #expect(first.status == .ok, "\(first.text)")
            let access = first.object.string("access-token")
            let user = try await userId(api, appId, anon)
            #expect(try await kinds(api, appId, user) == ["anonymous"])

            // A handle another user holds: 409, and nothing changed.
            let owner = Self.unique("owner")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(owner)), ("password", SDK.md5("pw"))]).status == .ok)
            let clash = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/upgrade",
                                           json: .object(["handle": .string(owner.uppercased()), "password": .string("Secret-1")]))
            #expect(clash.status == .conflict && clash.errorCode == "handle_taken", "\(clash.text)")
            #expect(try await kinds(api, appId, user) == ["anonymous"])
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon)]).status == .ok)
            #expect((try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/upgrade", json: .object(["handle": .string("no-at-sign"), "password": .string("x")]))).status == .unprocessableContent)

            // The upgrade: same user id, the app's own session goes on, the new handle and password sign in.
            let handle = Self.unique("upgraded")
            let done = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/upgrade",
                                          json: .object(["handle": .string(handle), "password": .string("Secret-1")]))
            #expect(done.status == .ok && done.object["userId"] == .string(user) && done.object["handle"] == .string(handle), "\(done.text)")
            #expect(try await kinds(api, appId, user) == ["password"])
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: access).object["handle"] == .string(handle))
            #expect(try await sdk.login(handle, "Secret-1").status == .ok)
            // Only anonymous accounts are upgraded.
            let again = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/upgrade",
                                           json: .object(["handle": .string(Self.unique("again")), "password": .string("Secret-1")]))
            #expect(again.status == .conflict && again.errorCode == "not_anonymous")

            // With a provider: the verified e-mail becomes the handle, loginProvider says so.
            let anon2 = "ANON_\(Secrets.hexIdentifier().prefix(12))"
            #expect(try await sdk.post("/api/appuser/loginAnonymous", [("handle", anon2)]).status == .ok)
            let user2 = try await userId(api, appId, anon2)
            let email = Self.unique("apple")
            let sub = "a-\(Secrets.hexIdentifier().prefix(12))"
            let viaApple = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user2)/upgrade",
                                              json: .object(["provider": .string("apple"), "idToken": .string(try await social.idToken(.apple, email: email, sub: sub))]))
            #expect(viaApple.status == .ok && viaApple.object["userId"] == .string(user2) && viaApple.object["loginProvider"] == .string("apple"), "\(viaApple.text)")
            let appleLogin = try await sdk.post("/api/appuser/appleLogin", [("token", try await social.idToken(.apple, email: email, sub: sub))])
            #expect(appleLogin.status == .ok, "\(appleLogin.text)")
        }
    }

    @Test("a database from before identities migrates: password, social and anonymous accounts get their identities")
    func migration() async throws {
        let services = try await TestEnvironment.services()
        let (_, client, runner) = try await LegacyImportTests.scratchDatabase(services, "identities_migration")
        defer { runner.cancel() }
        let all = try TestEnvironment.migrator()
        let before = Migrator(migrations: all.migrations.filter { $0.version <= 7 })
        _ = try await before.migrate(client, logger: services.logger)
        let appId = Secrets.hexIdentifier()
        try await client.withConnection { db in
            try await db.query(
                "INSERT INTO apps (app_id, name, settings, app_secret_hash) VALUES (\(appId), 'Old', '{}'::jsonb, '\\x00'::bytea)",
                logger: services.logger)
            try await db.query(
                """
                INSERT INTO users (app_ref, handle, password_hash, login_provider, social_user_id)
                SELECT id, h, p, lp, s FROM apps, (VALUES
                    ('pw@example.com', '$2b$10$abcdefghijklmnopqrstuv', '', NULL),
                    ('apple@example.com', NULL, 'apple', 'apple-sub-1'),
                    ('google@example.com', NULL, 'google', 'google-sub-1'),
                    ('ANON_abc123', NULL, '', NULL)) AS v(h, p, lp, s)
                WHERE app_id = \(appId)
                """, logger: services.logger)
        }
        _ = try await all.migrate(client, logger: services.logger)
        let rows = try await client.withConnection { db in
            try await db.query(
                "SELECT u.handle, i.kind, i.subject FROM identities i JOIN users u ON u.id = i.user_id ORDER BY u.handle", logger: services.logger)
        }
        var found: [String] = []
        for try await (handle, kind, subject) in rows.decode((String, String, String).self) { found.append("\(handle) \(kind) \(subject)") }
        #expect(found == [
            "ANON_abc123 anonymous ANON_abc123", "apple@example.com apple apple-sub-1", "google@example.com google google-sub-1",
            "pw@example.com password pw@example.com",
        ])
    }
}
