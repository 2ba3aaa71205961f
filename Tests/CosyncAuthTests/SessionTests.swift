import CosyncAuth
import Foundation
import HTTPTypes
import JWTKit
import PostgresNIO
import Testing

/// Sessions (issue 11 §1): every login-type answer opens one, the access token names it, and the
/// token lives exactly as long as its session.
@Suite("Sessions: one per login, named by the access token")
struct SessionTests {
    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }
    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    func makeApp(_ api: API, _ settings: [String: JSONValue] = ["signupFlow": .string("none")]) async throws -> (SDK, String) {
        let created = try await api.createApp("Sessions", settings: settings)
        return (SDK(api: api, appToken: created.string("appToken")), created.string("appId"))
    }

    func login(_ sdk: SDK, _ handle: String, _ password: String, userAgent: String) async throws -> String {
        let reply = try await sdk.api.call(
            .post, "/api/appuser/login", token: nil, body: SDK.body([("handle", SDK.handle(handle)), ("password", SDK.md5(password))]),
            headers: [.init("app-token")!: sdk.appToken, .userAgent: userAgent], contentType: nil)
        try #require(reply.status == .ok, "login: \(reply.text)")
        return reply.object.string("access-token")
    }

    func userId(_ sdk: SDK, _ appId: String, _ handle: String) async throws -> String {
        let list = try await sdk.api.call(.get, "/admin/v1/apps/\(appId)/users?query=\(handle.prefix(8))")
        return try #require(list.json["users"]?.arrayValue?.first?["userId"]?.stringValue)
    }

    @Test("a login whose session insert meets an uncommitted revocation opens no session that outlives it")
    func loginRacingRevocation() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api)
            let handle = Self.unique("race")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let userId = try #require(UUID(uuidString: try await userId(sdk, appId, handle)))
            // A revocation as every revoker does it (token version first, then the sessions), held open
            // while a login of the same user reaches its session insert.
            let revocation = try await TestEnvironment.holding(
                "UPDATE users SET token_version = token_version + 1 WHERE id = \(userId)", for: .milliseconds(1500),
                then: ["DELETE FROM sessions WHERE user_id = \(userId)"])
            let reply = try await sdk.login(handle, "pw")
            try await revocation.value
            let live = try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE user_id = \(userId)", as: Int.self)
            #expect(live == 0, "a session survived the revocation (login answered \(reply.status))")
            #expect(reply.status != .ok, "the login that raced the revocation must fail: \(reply.text)")
        }
    }

    @Test("changePassword keeps the caller's session and ends the others; the admin API lists and ends sessions")
    func lifecycle() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api)
            let handle = Self.unique("sess")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("one"))]).status == .ok)
            let phone = try await login(sdk, handle, "one", userAgent: "CosyncApp/1.0 (iPhone)")
            let tablet = try await login(sdk, handle, "one", userAgent: "CosyncApp/1.0 (iPad)")
            let laptop = try await login(sdk, handle, "one", userAgent: "CosyncApp/1.0 (Mac)")
            let user = try await userId(sdk, appId, handle)

            // The signup answer and three logins: four sessions, newest first, with how and from where.
            let listed = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)/sessions")
            #expect(listed.status == .ok, "\(listed.text)")
            let sessions = listed.json["sessions"]?.arrayValue ?? []
            #expect(sessions.count == 4)
            #expect(sessions.compactMap { $0["method"]?.stringValue }.sorted() == ["password", "password", "password", "signup"])
            #expect(sessions.first?["userAgent"] == .string("CosyncApp/1.0 (Mac)"))
            #expect(sessions.allSatisfy { $0["clientAddress"]?.stringValue == "127.0.0.1" })
            // The access token names its session.
            let sid = try #require(Base64URL.jwtPart(laptop, 1)?["sid"]?.stringValue)
            #expect(sessions.first?["sessionId"] == .string(sid))

            // changePassword from the phone: the phone goes on, the other devices are signed out.
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("one")), ("newPassword", SDK.md5("two"))], accessToken: phone).text == "true")
            let after = try await sdk.get("/api/appuser/getUser", accessToken: phone)
            #expect(after.status == .ok && after.object["handle"] == .string(handle), "\(after.text)")
            #expect(try await sdk.post("/api/appuser/setUserMetadata", [("metaData", "{}")], accessToken: phone).status != .internalServerError)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: tablet)) == 405)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: laptop)) == 405)
            #expect((try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)/sessions")).json["sessions"]?.arrayValue?.count == 1)

            // The admin ends one session: only that token dies.
            let second = try await login(sdk, handle, "two", userAgent: "Second")
            let secondSid = try #require(Base64URL.jwtPart(second, 1)?["sid"]?.stringValue)
            #expect((try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/sessions/\(secondSid)")).status == .noContent)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: second)) == 405)
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: phone).status == .ok)
            #expect((try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/sessions/\(secondSid)")).status == .notFound)
            #expect((try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(user)/sessions/not-a-uuid")).status == .notFound)

            // Sign out everywhere.
            let third = try await login(sdk, handle, "two", userAgent: "Third")
            let everywhere = try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/revoke-sessions")
            #expect(everywhere.status == .ok && everywhere.object["revokedSessions"] == .int(2), "\(everywhere.text)")
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: phone)) == 405)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: third)) == 405)
            #expect(try await sdk.login(handle, "two").status == .ok)

            // Another app's secret cannot see or end this user's sessions.
            let other = try await api.createApp("Other")
            let foreign = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(user)/sessions", token: other.string("appSecret"))
            #expect(foreign.status == .forbidden || foreign.status == .unauthorized || foreign.status == .notFound, "\(foreign.status)")
        }
    }

    @Test("a reset, a suspension, an admin password and a deletion end every session; a deleted user's token answers 405")
    func revocations() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api)
            let handle = Self.unique("rev")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("one"))]).status == .ok)
            let user = try await userId(sdk, appId, handle)

            // Suspension (and reactivation does not revive the old sessions).
            let a = try await login(sdk, handle, "one", userAgent: "a")
            #expect((try await api.call(.patch, "/admin/v1/apps/\(appId)/users/\(user)", json: .object(["status": .string("suspended")]))).status == .ok)
            #expect((try await api.call(.patch, "/admin/v1/apps/\(appId)/users/\(user)", json: .object(["status": .string("active")]))).status == .ok)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: a)) == 405)

            // An admin password set.
            let b = try await login(sdk, handle, "one", userAgent: "b")
            #expect((try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/password", json: .object(["password": .string("three")]))).status == .noContent)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: b)) == 405)

            // An expired session.
            let c = try await login(sdk, handle, "three", userAgent: "c")
            let cSid = try #require(UUID(uuidString: Base64URL.jwtPart(c, 1)?["sid"]?.stringValue ?? ""))
            try await TestEnvironment.sql("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = \(cSid)")
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: c)) == 405)

            // Deleting the account: its token answers 405, like any revoked token (it used to be 602).
            let d = try await login(sdk, handle, "three", userAgent: "d")
            #expect(try await sdk.post("/api/appuser/deleteAccount", [("handle", SDK.handle(handle)), ("password", SDK.md5("three"))], accessToken: d).text == "true")
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: d)) == 405)
            #expect(code(try await sdk.post("/api/appuser/setLocale", [("locale", "EN")], accessToken: d)) == 405)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM sessions WHERE user_id = \(UUID(uuidString: user)!)", as: Int.self) == 0)
        }
    }

    @Test("a token from before sessions (no sid) is judged by the token version; changePassword keeps the caller's")
    func sessionlessTokens() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let (sdk, appId) = try await makeApp(api)
            let handle = Self.unique("old")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("one"))]).status == .ok)
            let user = try await userId(sdk, appId, handle)
            func oldToken(iat: Int) async throws -> String {
                try await services.serverKeys.sign(AccessTokenClaims(
                    handle: handle, appId: appId, scope: "user", iat: iat, exp: iat + 3600, uid: user, ver: 0, sid: nil))
            }
            let now = Int(Date().timeIntervalSince1970)
            let mine = try await oldToken(iat: now), theirs = try await oldToken(iat: now - 5)
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: theirs).status == .ok)
            #expect(try await sdk.post("/api/appuser/changePassword", [("password", SDK.md5("one")), ("newPassword", SDK.md5("two"))], accessToken: mine).text == "true")
            #expect(try await sdk.get("/api/appuser/getUser", accessToken: mine).status == .ok, "the caller's token is kept")
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: theirs)) == 405)
            // A session id that is not the user's own session, signed by the server key: refused.
            let stranger = try await login(sdk, handle, "two", userAgent: "x")
            let sid = try #require(Base64URL.jwtPart(stranger, 1)?["sid"]?.stringValue)
            let otherUser = UUID().uuidString.lowercased()
            let forged = try await services.serverKeys.sign(AccessTokenClaims(
                handle: handle, appId: appId, scope: "user", iat: now, exp: now + 3600, uid: otherUser, ver: 0, sid: sid))
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: forged)) == 405)
            let badSid = try await services.serverKeys.sign(AccessTokenClaims(
                handle: handle, appId: appId, scope: "user", iat: now, exp: now + 3600, uid: user, ver: 0, sid: "not-a-uuid"))
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: badSid)) == 405)
            // Sign out everywhere ends the kept session-less token too.
            #expect((try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(user)/revoke-sessions")).status == .ok)
            #expect(code(try await sdk.get("/api/appuser/getUser", accessToken: mine)) == 405)
        }
    }
}
