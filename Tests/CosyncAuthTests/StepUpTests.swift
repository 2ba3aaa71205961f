import CosyncAuth
import Foundation
import Testing

/// Step-up (issue 21, item 2): a session knows how and when it was last proven, and one rule
/// (`StepUp`) decides every sensitive change of both products.
@Suite("Step-up: one rule over how and when a caller proved itself")
struct StepUpTests {

    static func session(_ method: SessionMethod, minutesAgo: Double) -> AuthProof {
        AuthProof(method: .signIn(method), at: Date().addingTimeInterval(-minutesAgo * 60), source: .session)
    }

    @Test("the rule: which proof allows which change, and only while it is recent")
    func rule() throws {
                let typedPassword = AuthProof.presented(.password)
        let reset = AuthProof(method: .passkeyReset, at: Date(), source: .request)
        // changePassword: the current password typed with the request, not a session opened by one.
        #expect(StepUp.allows(.changePassword, proofs: [typedPassword], freshAuthMinutes: 5))
        #expect(!StepUp.allows(.changePassword, proofs: [Self.session(.password, minutesAgo: 0)], freshAuthMinutes: 5))
        #expect(!StepUp.allows(.changePassword, proofs: [Self.session(.signup, minutesAgo: 0)], freshAuthMinutes: 5))
        #expect(!StepUp.allows(.changePassword, proofs: [reset], freshAuthMinutes: 5))
        // Any recent sign-in allows deleting the account and managing passkeys; a stale one does not.
        for change in [SensitiveChange.deleteAccount, .detachIdentity, .addPasskey, .removePasskey] {
            #expect(StepUp.allows(change, proofs: [Self.session(.passkey, minutesAgo: 4)], freshAuthMinutes: 5), "\(change)")
            #expect(!StepUp.allows(change, proofs: [Self.session(.passkey, minutesAgo: 6)], freshAuthMinutes: 5), "\(change)")
            #expect(StepUp.allows(change, proofs: [Self.session(.passkey, minutesAgo: 6), Self.session(.google, minutesAgo: 1)], freshAuthMinutes: 5))
        }
        // A passkey-reset token adds a passkey, and allows nothing else.
        #expect(StepUp.allows(.addPasskey, proofs: [reset], freshAuthMinutes: 5))
        for change in SensitiveChange.allCases where change != .addPasskey {
            #expect(!StepUp.allows(change, proofs: [reset], freshAuthMinutes: 5), "\(change)")
        }
        // A provider token is judged by its issue time, against the app's window.
        #expect(StepUp.allows(.deleteAccount, proofs: [.presented(.apple, at: Date().addingTimeInterval(-60))], freshAuthMinutes: 5))
        #expect(!StepUp.allows(.deleteAccount, proofs: [.presented(.apple, at: .distantPast)], freshAuthMinutes: 5))
        #expect(StepUp.allows(.deleteAccount, proofs: [Self.session(.password, minutesAgo: 30)], freshAuthMinutes: 60))
        #expect(!StepUp.allows(.deleteAccount, proofs: [], freshAuthMinutes: 5))
    }

    /// A user of a new app, signed up with password "one" and logged in once: the login's session.
    struct SignedIn {
        let api: API
        let sdk: SDK
        let appId: String
        let handle: String
        let token: String
        let sid: UUID

        /// The admin API's row of this session.
        func adminRow() async throws -> JSONValue {
            let userId = try #require(try await TestEnvironment.value("SELECT user_id::text FROM sessions WHERE id = \(sid)", as: String.self))
            let listed = try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(userId)/sessions").json["sessions"]?.arrayValue ?? []
            return try #require(listed.first { $0["sessionId"] == .string(sid.uuidString.lowercased()) })
        }
    }

    static func signIn(_ api: API, _ name: String) async throws -> SignedIn {
        let created = try await api.createApp(name, settings: ["signupFlow": .string("none")])
        let sdk = SDK(api: api, appToken: created.string("appToken"))
        let handle = "step\(Secrets.hexIdentifier().prefix(8))@example.com"
        #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("one"))]).status == .ok)
        let token = try await sdk.login(handle, "one").object.string("access-token")
        let sidText = try #require(Base64URL.jwtPart(token, 1)?["sid"]?.stringValue)
        return SignedIn(api: api, sdk: sdk, appId: created.string("appId"), handle: handle, token: token, sid: try #require(UUID(uuidString: sidText)))
    }

    @Test("a session records its sign-in as its proof; changePassword re-proves the caller's session")
    func sessionProof() async throws {
        try await TestEnvironment.withLiveServer { api in
            let user = try await Self.signIn(api, "StepUp")
            // The admin API shows how and when each session was last proven.
            let mine = try await user.adminRow()
            #expect(mine["provenBy"] == .string("password") && mine["provenAt"] == mine["createdAt"], "\(mine)")

            // An old sign-in; changePassword with the current password proves the session again, now.
            try await TestEnvironment.sql("UPDATE sessions SET proven_at = now() - interval '1 hour' WHERE id = \(user.sid)")
            let changed = try await user.sdk.post(
                "/api/appuser/changePassword", [("password", SDK.md5("one")), ("newPassword", SDK.md5("two"))], accessToken: user.token)
            #expect(changed.text == "true")
            let age = try await TestEnvironment.value(
                "SELECT extract(epoch FROM now() - proven_at)::float8 FROM sessions WHERE id = \(user.sid)", as: Double.self)
            #expect((age ?? .infinity) < 60, "proven \(String(describing: age)) s ago")
            // A session opened by a password is not the current password: it is still required.
            let missing = try await user.sdk.post("/api/appuser/changePassword", [("newPassword", SDK.md5("three"))], accessToken: user.token)
            #expect(missing.status == .badRequest && missing.object["code"] == .int(602), "\(missing.text)")
        }
    }

    @Test("a recent passkey assertion satisfies changePassword without the current password; a stale one does not")
    func passkeyStandsInForPassword() async throws {
        #expect(StepUp.allows(.changePassword, proofs: [Self.session(.passkey, minutesAgo: 1)], freshAuthMinutes: 5))
        // However long the app's window, a session's proof stands in for the password for 5 minutes at most.
        #expect(!StepUp.allows(.changePassword, proofs: [Self.session(.passkey, minutesAgo: 6)], freshAuthMinutes: 1440))
        #expect(StepUp.allows(.deleteAccount, proofs: [Self.session(.passkey, minutesAgo: 6)], freshAuthMinutes: 1440))
        try await TestEnvironment.withLiveServer { api in
            let user = try await Self.signIn(api, "StepUpPasskey")
            // The session proven by a passkey assertion (as the OAuth login page and the Portal will do
            // with a step-up on an open session), long ago: the current password is still required.
            try await TestEnvironment.sql("UPDATE sessions SET proven_by = 'passkey', proven_at = now() - interval '1 hour' WHERE id = \(user.sid)")
            let stale = try await user.sdk.post("/api/appuser/changePassword", [("newPassword", SDK.md5("two"))], accessToken: user.token)
            #expect(stale.status == .badRequest && stale.object["code"] == .int(602), "\(stale.text)")
            // A minute ago: the assertion stands in for it.
            try await TestEnvironment.sql("UPDATE sessions SET proven_at = now() - interval '1 minute' WHERE id = \(user.sid)")
            #expect(try await user.sdk.post("/api/appuser/changePassword", [("newPassword", SDK.md5("two"))], accessToken: user.token).text == "true")
            #expect(try await user.sdk.login(user.handle, "two").status == .ok)
            // The session keeps its passkey proof: no password was typed.
            #expect(try await TestEnvironment.value("SELECT proven_by FROM sessions WHERE id = \(user.sid)", as: String.self) == "passkey")
        }
    }

    @Test("migration 0014 only expands: a session inserted as the previous release does still works, proven by its sign-in")
    func previousReleaseInsert() async throws {
        try await TestEnvironment.withLiveServer { api in
            let user = try await Self.signIn(api, "StepUpOld")
            // As a node of the previous release leaves it: no proof columns.
            try await TestEnvironment.sql(
                "UPDATE sessions SET proven_by = NULL, proven_at = NULL, created_at = now() - interval '1 hour' WHERE id = \(user.sid)")
            #expect(try await user.sdk.get("/api/appuser/getUser", accessToken: user.token).status == .ok)
            let mine = try await user.adminRow()
            #expect(mine["provenBy"] == .string("password") && mine["provenAt"] == mine["createdAt"], "\(mine)")
        }
    }
}
