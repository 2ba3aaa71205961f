import CosyncAuth
import Foundation
import HummingbirdBcrypt
import Testing

@Suite("Admin API: users")
struct AdminUserTests {
    func storedHash(_ userId: String) async throws -> String? {
        let services = try await TestEnvironment.services()
        let id = try #require(UUID(uuidString: userId))
        let rows = try await services.client.query("SELECT password_hash FROM users WHERE id = \(id)", logger: services.logger)
        for try await hash in rows.decode(String?.self) { return hash }
        return nil
    }

    @Test("create hashes md5(password) with bcrypt cost 10, exactly like the end-user path")
    func createHashesLikeEndUser() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("Users").string("appId")
            let reply = try await api.call(
                .post, "/admin/v1/apps/\(appId)/users",
                json: .object(["handle": .string("  Alice@Example.COM "), "password": .string("Secret123!"),
                               "metaData": .object(["user": .object(["firstName": .string("Alice")])]), "userName": .string("Alice7")]))
            #expect(reply.status == .created, "\(reply.text)")
            #expect(reply.object.string("handle") == "alice@example.com")
            #expect(reply.object.string("userName") == "alice7")
            #expect(reply.object["hasPassword"] == .bool(true))
            #expect(!reply.text.contains("$2b$"))
            let hash = try #require(try await storedHash(reply.object.string("userId")))
            #expect(hash.hasPrefix("$2b$10$"))
            #expect(Bcrypt.verify(PasswordHasher.md5Hex("Secret123!"), hash: hash))
            #expect(!Bcrypt.verify(PasswordHasher.md5Hex("secret123!"), hash: hash))
        }
    }

    @Test("handles and user names are unique per app, case-insensitively; other apps are separate")
    func uniqueness() async throws {
        try await TestEnvironment.withAPI { api in
            let a = try await api.createApp("Unique A").string("appId")
            let b = try await api.createApp("Unique B").string("appId")
            let first = try await api.call(.post, "/admin/v1/apps/\(a)/users", json: .object(["handle": .string("bob@x.io"), "password": .string("pw"), "userName": .string("bob")]))
            #expect(first.status == .created)
            let dupHandle = try await api.call(.post, "/admin/v1/apps/\(a)/users", json: .object(["handle": .string("BOB@x.io"), "password": .string("pw")]))
            #expect(dupHandle.status == .conflict && dupHandle.errorCode == "handle_taken")
            let dupName = try await api.call(.post, "/admin/v1/apps/\(a)/users", json: .object(["handle": .string("bob2@x.io"), "password": .string("pw"), "userName": .string("BOB")]))
            #expect(dupName.status == .conflict && dupName.errorCode == "user_name_taken")
            let otherApp = try await api.call(.post, "/admin/v1/apps/\(b)/users", json: .object(["handle": .string("bob@x.io"), "password": .string("pw"), "userName": .string("bob")]))
            #expect(otherApp.status == .created)
            // A user of app A is not reachable through app B.
            #expect(try await api.call(.get, "/admin/v1/apps/\(b)/users/\(first.object.string("userId"))").status == .notFound)
            #expect(try await api.call(.delete, "/admin/v1/apps/\(b)/users/\(first.object.string("userId"))").status == .notFound)
        }
    }

    @Test("parallel creates of one handle give exactly one user")
    func concurrentCreate() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("Race").string("appId")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("race@x.io"), "password": .string("pw")])).status.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 19)
            let list = try await api.call(.get, "/admin/v1/apps/\(appId)/users")
            #expect(list.object["users"]?.arrayValue?.count == 1)
        }
    }

    @Test("search, pagination, PATCH, password reset and delete")
    func lifecycle() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("Lifecycle", settings: ["locales": .array([.string("EN"), .string("DE")])]).string("appId")
            for name in ["carol", "carl", "dave", "carmen"] {
                let r = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("\(name)@x.io"), "password": .string("pw")]))
                #expect(r.status == .created)
            }
            var handles: [String] = []
            var cursor: String? = nil
            repeat {
                let page = try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=car&limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""))
                handles += (page.object["users"]?.arrayValue ?? []).compactMap { $0["handle"]?.stringValue }
                cursor = page.object["nextCursor"]?.stringValue
            } while cursor != nil
            #expect(handles == ["carl@x.io", "carmen@x.io", "carol@x.io"])

            let users = try await api.call(.get, "/admin/v1/apps/\(appId)/users?query=dave").object["users"]?.arrayValue ?? []
            let daveId = try #require(users.first?["userId"]?.stringValue)
            let patched = try await api.call(.patch, "/admin/v1/apps/\(appId)/users/\(daveId)",
                                             json: .object(["status": .string("suspended"), "locale": .string("de"), "metaData": .object(["a": .int(1)])]))
            #expect(patched.status == .ok, "\(patched.text)")
            #expect(patched.object.string("status") == "suspended" && patched.object.string("locale") == "DE")
            #expect(patched.object["metaData"] == .object(["a": .int(1)]))
            for bad in [#"{"status":"gone"}"#, #"{"locale":"FR"}"#, #"{"password":"x"}"#, #"{"metaData":[1]}"#, #"{"userName":"1abc"}"#] {
                let r = try await api.call(.patch, "/admin/v1/apps/\(appId)/users/\(daveId)", body: bad)
                // A locale the app does not list conflicts with its stored settings (409); the others are malformed.
                #expect(r.status.code == (bad.contains("FR") ? 409 : 422), "\(bad): \(r.text)")
            }
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(daveId)").object.string("status") == "suspended")

            let before = try await storedHash(daveId)
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(daveId)/password", json: .object(["password": .string("N3w-pass")])).status == .noContent)
            let after = try #require(try await storedHash(daveId))
            #expect(after != before)
            #expect(Bcrypt.verify(PasswordHasher.md5Hex("N3w-pass"), hash: after))
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(daveId)/password", json: .object(["pw": .string("x")])).status.code == 422)

            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)/users/\(daveId)").status == .noContent)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/\(daveId)").status == .notFound)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/users/not-a-uuid").status == .notFound)

            // Every action above is in the audit log.
            let logs = try await api.call(.get, "/admin/v1/apps/\(appId)/logs?limit=200").object["logs"]?.arrayValue ?? []
            let actions = Set(logs.compactMap { $0["action"]?.stringValue })
            #expect(actions.isSuperset(of: ["app.create", "user.create", "user.update", "user.password.set", "user.delete"]))
        }
    }

    @Test("the app's password policy applies to admin-set passwords")
    func passwordPolicy() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("Policy", settings: ["passwordFilter": .bool(true), "passwordMinLength": .int(8),
                                                                     "passwordMinDigit": .int(1), "passwordMinSpecial": .int(1)]).string("appId")
            let weak = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("p@x.io"), "password": .string("short")]))
            // The policy is the app's stored setting: a well-formed password it refuses conflicts with it.
            #expect(weak.status.code == 409 && weak.errorField == "password" && weak.errorCode == "password_policy")
            let strong = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("p@x.io"), "password": .string("longer1!x")]))
            #expect(strong.status == .created)
        }
    }

    @Test("signups, invites, templates, messages and logs")
    func records() async throws {
        try await TestEnvironment.withAPI { api in
            let appId = try await api.createApp("Records", settings: ["locales": .array([.string("EN"), .string("FR")])]).string("appId")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/signups").object["signups"] == .array([]))
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/invites").object["invites"] == .array([]))
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/messages").object["messages"] == .array([]))
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)/signups/\(UUID())").status == .notFound)

            let builtIn = try await api.call(.get, "/admin/v1/apps/\(appId)/email-templates/signUp/FR")
            #expect(builtIn.status == .ok && builtIn.object["isDefault"] == .bool(true))
            #expect(builtIn.object.string("html").contains("%CODE%"))
            let put = try await api.call(.put, "/admin/v1/apps/\(appId)/email-templates/signUp/fr",
                                         json: .object(["subject": .string("Code pour %APP_NAME%"), "html": .string("<p>%CODE%</p>")]))
            #expect(put.status == .ok, "\(put.text)")
            let read = try await api.call(.get, "/admin/v1/apps/\(appId)/email-templates/signUp/FR")
            #expect(read.object["isDefault"] == .bool(false) && read.object.string("subject") == "Code pour %APP_NAME%")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/email-templates/nope/EN").status == .notFound)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/email-templates/signUp/DE").status == .notFound)
            #expect(try await api.call(.put, "/admin/v1/apps/\(appId)/email-templates/signUp/EN", json: .object(["subject": .string("s")])).status.code == 422)
            // A reset answers the built-in template, which the path then reads; a second reset changes nothing.
            for _ in 0..<2 {
                let reset = try await api.call(.post, "/admin/v1/apps/\(appId)/email-templates/signUp/FR/reset")
                #expect(reset.status == .ok && reset.object["isDefault"] == .bool(true) && reset.object.string("html") == builtIn.object.string("html"),
                        "\(reset.text)")
            }
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)/email-templates/signUp/FR").object["isDefault"] == .bool(true))
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/email-templates/signUp/DE/reset").status == .notFound)
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)/email-templates/signUp/FR").status == .methodNotAllowed)
            let resets = try await api.call(.get, "/admin/v1/apps/\(appId)/logs").object["logs"]?.arrayValue?
                .filter { $0.objectValue?["action"] == .string("template.reset") }
            #expect(resets?.count == 1)
        }
    }
}
