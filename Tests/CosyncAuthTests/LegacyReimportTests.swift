import CosyncAuth
import Foundation
import LegacyImport
import Logging
import PostgresNIO
import Testing

/// The legacy fixture under fresh appIds, so that each test imports apps of its own into the shared database.
enum RenamedFixture {
    static func make() throws -> (folder: URL, a: [String: JSONValue], b: [String: JSONValue]) {
        let (folder, original) = try LegacyFixture.make()
        let renames = (original["apps"]?.arrayValue ?? []).compactMap { $0["appId"]?.stringValue }.map { ($0, Secrets.hexIdentifier()) }
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasSuffix(".json") {
            try edit(folder.appendingPathComponent(name)) { text in
                for (old, new) in renames { text = text.replacingOccurrences(of: old, with: new) }
            }
        }
        let manifest = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: folder.appendingPathComponent("manifest.json")))
        let apps = manifest["apps"]?.arrayValue ?? []
        let a = try #require(apps.first { $0["ref"] == .string("A") }?.objectValue)
        let b = try #require(apps.first { $0["ref"] == .string("B") }?.objectValue)
        return (folder, a, b)
    }

    static func edit(_ url: URL, _ change: (inout String) -> Void) throws {
        var text = try String(contentsOf: url, encoding: .utf8)
        change(&text)
        try text.write(to: url, atomically: true, encoding: .utf8)
    }

    /// Edits the JSON line of `file` that contains `marker`.
    static func editLine(_ folder: URL, _ file: String, containing marker: String, _ change: (String) -> String) throws {
        try edit(folder.appendingPathComponent(file)) { text in
            text = text.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.contains(marker) ? change(String($0)) : String($0) }.joined(separator: "\n")
        }
    }

    /// A newer export: every app and user document gets another field, so every fingerprint changes.
    static func touchAll(_ folder: URL, _ generation: Int) throws {
        for file in ["apps.json", "users.json"] {
            try edit(folder.appendingPathComponent(file)) { text in
                text = text.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { $0.hasSuffix("}") ? $0.dropLast() + ",\"exportGeneration\":\(generation)}" : String($0) }.joined(separator: "\n")
            }
        }
    }
}

@Suite("Legacy import hardening: bcrypt variants and costs, reset codes, re-import", .serialized)
struct LegacyReimportTests {
    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    func report(_ folder: URL) throws -> [JSONValue] {
        try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: folder.appendingPathComponent("report.json"))).arrayValue ?? []
    }

    @Test("$2y$ hashes verify as $2b$; a stored hash with a cost outside 4-16 never verifies and is not imported as a password")
    func bcryptVariantsAndCosts() async throws {
        // The hasher alone.
        let hasher = PasswordHasher(cost: 4)
        let md5 = PasswordHasher.md5Hex("Tr0ub4dor&3")
        let b = try await hasher.hash(md5Hex: md5)
        #expect(b.hasPrefix("$2b$04$"))
        #expect(try await hasher.verify(md5Hex: md5, hash: "$2y$" + b.dropFirst(4)))
        #expect(try await !hasher.verify(md5Hex: PasswordHasher.md5Hex("wrong"), hash: "$2y$" + b.dropFirst(4)))
        let started = Date()
        #expect(try await !hasher.verify(md5Hex: md5, hash: "$2b$31$" + b.dropFirst(7)), "cost 31 is refused, not computed")
        #expect(try await !hasher.verify(md5Hex: md5, hash: "$2b$03$" + b.dropFirst(7)))
        #expect(try await !hasher.verify(md5Hex: md5, hash: String(b.dropLast())))
        #expect(Date().timeIntervalSince(started) < 1)

        // Through the import: Ivy's hash as $2y$ (PHP's prefix), Eve's with a crafted cost of 31.
        let services = try await TestEnvironment.services()
        let (folder, appA, appB) = try RenamedFixture.make()
        try RenamedFixture.editLine(folder, "users.json", containing: "ivy test@example.com") { $0.replacingOccurrences(of: #""password":"$2b$"#, with: #""password":"$2y$"#) }
        try RenamedFixture.editLine(folder, "users.json", containing: "Eve@Example.com") { $0.replacingOccurrences(of: #""password":"$2a$10$"#, with: #""password":"$2a$31$"#) }
        let summary = try await LegacyFixture.importInto(services, folder)
        #expect(summary.counts("users")?.read == 10)
        let ivyHash = try await TestEnvironment.value(
            "SELECT u.password_hash FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appA.string("appId")) AND u.handle = 'ivy+test@example.com'",
            as: String.self)
        #expect(ivyHash?.hasPrefix("$2y$10$") == true, "imported verbatim")
        let eveHash = try await TestEnvironment.value(
            "SELECT coalesce(u.password_hash, '') FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appB.string("appId")) AND u.handle = 'eve@example.com'",
            as: String.self)
        #expect(eveHash == "", "imported without a usable password")
        #expect(try report(folder).contains { ($0["reason"]?.stringValue ?? "").contains("bcrypt cost 31 is outside 4–16") && $0["handle"] == .string("eve@example.com") })

        try await TestEnvironment.withLiveServer { api in
            let a = SDK(api: api, appToken: appA.string("appToken"))
            let b = SDK(api: api, appToken: appB.string("appToken"))
            let ivy = try await a.login("ivy+test@example.com", "Ivy+Pass1")
            #expect(ivy.object["jwt"] != nil, "\(ivy.text)")
            #expect(code(try await a.login("ivy+test@example.com", "Wrong+Pass1")) == 600)
            #expect(try await b.login("eve@example.com", "Admin#Made9").object["jwt"] == nil)
        }
    }

    @Test("pending legacy reset codes are carried, valid for the reset lifetime from the import, by handle or user name; a used one never comes back")
    func resetCodesCarried() async throws {
        let services = try await TestEnvironment.services()
        let (folder, appA, appB) = try RenamedFixture.make()
        let before = Date()
        let summary = try await LegacyFixture.importInto(services, folder) { $0.resetCodeLifetime = 600 }
        #expect(summary.counts("resetpasswords")?.imported == 2)
        let expiry = try #require(try await TestEnvironment.value(
            "SELECT max(r.expires_at) FROM reset_codes r JOIN apps a ON a.id = r.app_ref WHERE a.app_id = \(appA.string("appId"))", as: Date.self))
        #expect(expiry > before.addingTimeInterval(590) && expiry < Date().addingTimeInterval(610), "import time + the lifetime: \(expiry)")

        try await TestEnvironment.withLiveServer { api in
            let a = SDK(api: api, appToken: appA.string("appToken"))
            let b = SDK(api: api, appToken: appB.string("appToken"))
            // The e-mailed legacy code works once; alice then logs in with the new password (TOTP next).
            let wrong = try await a.post("/api/appuser/resetPassword", [("handle", "alice@example.com"), ("password", SDK.md5("Fresh#Pass1")), ("code", "555124")])
            #expect(wrong.text != "true")
            let reset = try await a.post("/api/appuser/resetPassword", [("handle", "alice@example.com"), ("password", SDK.md5("Fresh#Pass1")), ("code", "555123")])
            #expect(reset.text == "true", "\(reset.text)")
            #expect(try await a.login("alice@example.com", "Fresh#Pass1").object["jwt"] != nil, "a reset turns the second factor off")
            let again = try await a.post("/api/appuser/resetPassword", [("handle", "alice@example.com"), ("password", SDK.md5("Other#Pass1")), ("code", "555123")])
            #expect(again.text != "true")
            // Carol's code was asked for with her user name.
            let carol = try await b.post("/api/appuser/resetPassword", [("handle", "carol"), ("password", SDK.md5("Carol#New1")), ("code", "601932")])
            #expect(carol.text == "true", "\(carol.text)")
        }

        // A newer export still holds the used codes: they are not carried again.
        try RenamedFixture.touchAll(folder, 1)
        let rerun = try await LegacyFixture.importInto(services, folder)
        #expect(rerun.counts("resetpasswords")?.imported == 0)
        let live = try await TestEnvironment.value(
            "SELECT count(*)::int FROM reset_codes r JOIN apps a ON a.id = r.app_ref WHERE a.app_id IN (\(appA.string("appId")), \(appB.string("appId")))",
            as: Int.self)
        #expect(live == 0)
        #expect(try report(folder).filter { $0["action"] == .string("kept") && $0["collection"] == .string("resetpasswords") }.count == 2)
    }

    @Test("a re-import keeps what happened here (suspensions, password set, token rotation, deletion) and reports it; --overwrite-local-changes overwrites")
    func reimportKeepsLocalChanges() async throws {
        let services = try await TestEnvironment.services()
        let (folder, appA, appB) = try RenamedFixture.make()
        let idA = appA.string("appId"), idB = appB.string("appId")
        _ = try await LegacyFixture.importInto(services, folder)
        func userId(_ appId: String, _ handle: String) async throws -> UUID? {
            try await TestEnvironment.value(
                "SELECT u.id FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appId) AND u.handle = \(handle)", as: UUID.self)
        }
        func status(_ appId: String, _ handle: String) async throws -> String? {
            try await TestEnvironment.value(
                "SELECT u.status FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appId) AND u.handle = \(handle)", as: String.self)
        }
        func appStatus(_ appId: String) async throws -> String? {
            try await TestEnvironment.value("SELECT status FROM apps WHERE app_id = \(appId)", as: String.self)
        }
        func hash(_ appId: String, _ handle: String) async throws -> String? {
            try await TestEnvironment.value(
                "SELECT u.password_hash FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appId) AND u.handle = \(handle)", as: String.self)
        }
        let legacyHenry = try #require(try await hash(idA, "henry@example.com"))
        let ivy = try #require(try await userId(idA, "ivy+test@example.com"))
        let henry = try #require(try await userId(idA, "henry@example.com"))
        let grace = try #require(try await userId(idB, "grace@example.com"))
        let rotatedToken = try await TestEnvironment.withLiveServerValue { api -> String in
            // On this server: Ivy suspended, app A suspended, Grace deleted, Eve's password changed, app B's token rotated.
            #expect(try await api.call(.patch, "/admin/v1/apps/\(idA)/users/\(ivy.uuidString.lowercased())", json: .object(["status": .string("suspended")])).status == .ok)
            #expect(try await api.call(.delete, "/admin/v1/apps/\(idB)/users/\(grace.uuidString.lowercased())").status == .noContent)
            #expect(try await api.call(.post, "/admin/v1/apps/\(idA)/users/\(henry.uuidString.lowercased())/password",
                                       json: .object(["password": .string("Henry#Local3")])).status == .noContent)
            #expect(try await api.call(.patch, "/admin/v1/apps/\(idA)", json: .object(["status": .string("suspended")])).status == .ok)
            // App A's legacy signing key revoked here (a compromised key), and app B's imported invite deleted.
            #expect(try await api.call(.post, "/admin/v1/apps/\(idA)/keys/rotate", json: .object(["retireAfterHours": .int(0)])).status == .ok)
            let invites = try await api.call(.get, "/admin/v1/apps/\(idB)/invites").object["invites"]?.arrayValue ?? []
            for invite in invites where invite["status"] == .string("pending") {
                #expect(try await api.call(.delete, "/admin/v1/apps/\(idB)/invites/\(invite["id"]?.stringValue ?? "")").status == .noContent)
            }
            let rotation = try await api.call(.post, "/admin/v1/apps/\(idB)/app-token/rotate")
            #expect(rotation.status == .ok, "\(rotation.text)")
            return rotation.object.string("appToken")
        }
        #expect(!rotatedToken.isEmpty)
        func activeKid(_ appId: String) async throws -> String? {
            try await TestEnvironment.value(
                "SELECT k.kid FROM app_keys k JOIN apps a ON a.id = k.app_ref WHERE a.app_id = \(appId) AND k.active", as: String.self)
        }
        func keyCount(_ appId: String) async throws -> Int? {
            try await TestEnvironment.value("SELECT count(*)::int FROM app_keys k JOIN apps a ON a.id = k.app_ref WHERE a.app_id = \(appId)", as: Int.self)
        }
        func pendingInvites(_ appId: String) async throws -> Int? {
            try await TestEnvironment.value(
                "SELECT count(*)::int FROM invites i JOIN apps a ON a.id = i.app_ref WHERE a.app_id = \(appId) AND i.status = 'pending'", as: Int.self)
        }
        let keyMadeHere = try #require(try await activeKid(idA))
        #expect(try await keyCount(idA) == 1, "the revoked legacy key is gone")
        #expect(try await pendingInvites(idB) == 0)

        // A newer export: every app and user document changed.
        try RenamedFixture.touchAll(folder, 1)
        _ = try await LegacyFixture.importInto(services, folder)
        #expect(try await status(idA, "ivy+test@example.com") == "suspended")
        #expect(try await appStatus(idA) == "suspended")
        #expect(try await userId(idB, "grace@example.com") == nil, "a user deleted here stays deleted")
        #expect(try await activeKid(idA) == keyMadeHere, "a key revoked here is never revived")
        #expect(try await keyCount(idA) == 1)
        #expect(try await pendingInvites(idB) == 0, "an invite deleted here stays deleted")
        let kept = try report(folder).filter { $0["action"] == .string("kept") }
        let keptIds = Set(kept.compactMap { $0["handle"]?.stringValue ?? $0["appId"]?.stringValue })
        #expect(keptIds.isSuperset(of: ["ivy+test@example.com", "grace@example.com", "henry@example.com"]), "\(kept)")
        let localHenry = try await hash(idA, "henry@example.com")
        #expect(localHenry != legacyHenry && localHenry?.hasPrefix("$2b$10$") == true, "the password set here is kept")
        #expect(kept.contains { $0["collection"] == .string("apps") && $0["appId"] == .string(idA) })
        #expect(kept.contains { $0["collection"] == .string("apps") && $0["appId"] == .string(idB) && ($0["reason"]?.stringValue ?? "").contains("token rotated") })
        try await TestEnvironment.withLiveServer { api in
            let b = SDK(api: api, appToken: rotatedToken)
            let carol = try await b.login("carol", "Password1!")
            #expect(carol.object["login-token"] != nil, "the token rotated here still works: \(carol.text)")
        }

        // Forced: the export wins again, and the deleted user comes back.
        try RenamedFixture.touchAll(folder, 2)
        _ = try await LegacyFixture.importInto(services, folder) { $0.overwriteLocalChanges = true }
        #expect(try await status(idA, "ivy+test@example.com") == "active")
        #expect(try await appStatus(idA) == "active")
        #expect(try await userId(idB, "grace@example.com") != nil)
        #expect(try await hash(idA, "henry@example.com") == legacyHenry)
        #expect(try await activeKid(idA) == keyMadeHere, "not even when forced")
        #expect(try report(folder).contains { $0["action"] == .string("overwritten") && $0["handle"] == .string("grace@example.com") })
    }
}

extension TestEnvironment {
    /// `withLiveServer` returning a value.
    static func withLiveServerValue<T: Sendable>(_ body: @escaping @Sendable (API) async throws -> T) async throws -> T {
        let box = ValueBox<T>()
        try await withLiveServer { api in box.set(try await body(api)) }
        guard let value = box.get() else { throw LegacyFixture.Failure(description: "no value") }
        return value
    }
}

final class ValueBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T?
    func set(_ v: T) { lock.withLock { value = v } }
    func get() -> T? { lock.withLock { value } }
}
