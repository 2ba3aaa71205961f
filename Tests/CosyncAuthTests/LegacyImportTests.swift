import CosyncAuth
import Crypto
import Foundation
import JWTKit
import LegacyImport
import Logging
import PostgresNIO
import Testing
import _CryptoExtras

/// The legacy fixture generator (Tests/system/legacy/make_fixture.py) and the import, end to end.
enum LegacyFixture {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func python() throws -> String {
        guard let python = ProcessInfo.processInfo.environment["COSYNC_TEST_PYTHON"], !python.isEmpty else {
            throw Failure(description: "COSYNC_TEST_PYTHON is not set: run the tests with Tests/test.sh")
        }
        return python
    }

    /// Runs the generator into a new temporary folder and returns it with its manifest.
    static func make(_ extra: [String] = []) throws -> (URL, [String: JSONValue]) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("legacy-\(UUID().uuidString)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try python())
        let now = Date.ISO8601FormatStyle().format(Date())
        process.arguments = [root.appendingPathComponent("Tests/system/legacy/make_fixture.py").path, folder.path, "--encrypt-key", "jojo123", "--seed", "7", "--now", now] + extra
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "make_fixture.py exited \(process.terminationStatus)") }
        let manifest = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: folder.appendingPathComponent("manifest.json")))
        return (folder, manifest.objectValue ?? [:])
    }

    static func importInto(
        _ services: CosyncServices, _ folder: URL, encryptKey: String? = "jojo123", configure: (inout ImportOptions) -> Void = { _ in }
    ) async throws -> ImportSummary {
        var options = ImportOptions(directory: folder, encryptKey: encryptKey)
        options.reportURL = folder.appendingPathComponent("report.json")
        options.batchSize = 4
        configure(&options)
        let importer = LegacyImporter(
            options: options, client: services.client, box: services.configuration.secretBox, logger: services.logger,
            progress: ImportProgress(interactive: false, quiet: true), cache: services.apps.cache)
        return try await importer.run()
    }

    /// A canonical text of every imported row of these apps (sealed columns too, unless
    /// `comparableAcrossDatabases`: sealing uses random nonces, and internal refs differ).
    static func snapshot(_ client: PostgresClient, appIds: [String], comparableAcrossDatabases: Bool = false, logger: Logger) async throws -> String {
        let drop = comparableAcrossDatabases
            ? "- 'totp_secret_sealed' - 'code_sealed' - 'token_sealed' - 'private_key_sealed' - 'credentials_sealed' - 'app_secret_hash' - 'legacy_state'" : ""
        let query = PostgresQuery(unsafeSQL: """
            SELECT coalesce(string_agg(t, E'\\n' ORDER BY t), '') FROM (
              SELECT 'app ' || (to_jsonb(a) - 'id' \(drop))::text AS t FROM apps a WHERE a.app_id = ANY($1)
              UNION ALL SELECT 'token ' || a.app_id || (to_jsonb(x) - 'app_ref' - 'created_at' - 'expires_at' \(drop))::text FROM app_tokens x JOIN apps a ON a.id = x.app_ref WHERE a.app_id = ANY($1)
              UNION ALL SELECT 'key ' || a.app_id || (to_jsonb(x) - 'app_ref' - 'created_at' - 'retires_at' \(drop))::text FROM app_keys x JOIN apps a ON a.id = x.app_ref WHERE a.app_id = ANY($1)
              UNION ALL SELECT 'user ' || a.app_id || (to_jsonb(x) - 'app_ref' \(drop))::text FROM users x JOIN apps a ON a.id = x.app_ref WHERE a.app_id = ANY($1)
              UNION ALL SELECT 'signup ' || a.app_id || (to_jsonb(x) - 'app_ref' \(drop))::text FROM signups x JOIN apps a ON a.id = x.app_ref WHERE a.app_id = ANY($1)
              UNION ALL SELECT 'invite ' || a.app_id || (to_jsonb(x) - 'app_ref' - 'expires_at' \(drop))::text FROM invites x JOIN apps a ON a.id = x.app_ref WHERE a.app_id = ANY($1)
              UNION ALL SELECT 'template ' || a.app_id || (to_jsonb(x) - 'app_ref')::text FROM email_templates x JOIN apps a ON a.id = x.app_ref WHERE a.app_id = ANY($1)
            ) s
            """, binds: { var b = PostgresBindings(); b.append(appIds); return b }())
        return try await TestEnvironment.value(query, as: String.self, on: client) ?? ""
    }
}

@Suite("Legacy CosyncJWT import", .serialized)
struct LegacyImportTests {
    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    @Test("after import, shipped apps work unchanged: old app token, old passwords, old rawPublicKey, codes, TOTP; rerun is a no-op")
    func shippedAppsKeepWorking() async throws {
        let services = try await TestEnvironment.services()
        let (folder, manifest) = try LegacyFixture.make()
        let apps = manifest["apps"]?.arrayValue ?? []
        let appA = try #require(apps.first { $0["ref"] == .string("A") }?.objectValue)
        let appB = try #require(apps.first { $0["ref"] == .string("B") }?.objectValue)
        let appIds = [appA.string("appId"), appB.string("appId")]

        // A wrong encrypt key names the app and writes nothing.
        await #expect(throws: ImportFailure.self) { try await LegacyFixture.importInto(services, folder, encryptKey: "not-the-key") }
        #expect(try await LegacyFixture.snapshot(services.client, appIds: appIds, logger: services.logger).isEmpty)

        // A dry run writes nothing either.
        let dry = try await LegacyFixture.importInto(services, folder) { $0.dryRun = true }
        #expect(dry.counts("users")?.read == 10)
        #expect(try await LegacyFixture.snapshot(services.client, appIds: appIds, logger: services.logger).isEmpty)

        // The legacy server's access tokens stay valid until the cut-off (a key of the test's own).
        let legacyKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let summary = try await LegacyFixture.importInto(services, folder) {
            $0.legacyPublicKeyPEM = legacyKey.publicKey.pemRepresentation
            $0.legacyTokensUntil = Date().addingTimeInterval(86400)
        }
        #expect(summary.counts("apps")?.imported == 2)
        #expect(summary.counts("users")?.read == 10)
        let userCount = try await TestEnvironment.value(
            "SELECT count(*)::int FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = ANY(\(appIds))", as: Int.self)
        #expect(userCount == 9, "the duplicate pair gives one user")
        #expect(summary.counts("resetpasswords")?.imported == 2, "legacy reset codes are carried (by handle and by user name)")
        let report = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: folder.appendingPathComponent("report.json"))).arrayValue ?? []
        #expect(report.contains { $0["reason"]?.stringValue?.contains("duplicate handle") == true })
        #expect(report.contains { $0["reason"]?.stringValue?.contains("normalised from 'Eve@Example.com'") == true })

        // Idempotent: a rerun (resumed from the checkpoints, and again from scratch) changes nothing.
        let first = try await LegacyFixture.snapshot(services.client, appIds: appIds, logger: services.logger)
        #expect(!first.isEmpty)
        _ = try await LegacyFixture.importInto(services, folder)
        try await services.client.withConnection { _ = try await $0.query("DELETE FROM legacy_import_checkpoints", logger: services.logger) }
        _ = try await LegacyFixture.importInto(services, folder)
        #expect(try await LegacyFixture.snapshot(services.client, appIds: appIds, logger: services.logger) == first)

        try await TestEnvironment.withLiveServer { api in
            let a = SDK(api: api, appToken: appA.string("appToken"))
            let b = SDK(api: api, appToken: appB.string("appToken"))
            // getApplication returns the legacy settings.
            let settings = try await a.get("/api/appuser/getApplication").object
            #expect(settings["signupFlow"] == .string("code") && settings["twoFactorVerification"] == .string("google"))
            #expect(settings["locales"] == .array([.string("EN"), .string("FR")]) && settings["passwordMinLength"] == .int(8))
            #expect(settings["realmAppId"] == .string("acme-notes-abcde"))
            let settingsB = try await b.get("/api/appuser/getApplication").object
            #expect(settingsB["signupFlow"] == .string("none") && settingsB["userNamesEnabled"] == .bool(true) && settingsB["userJWTExpiration"] == .int(2))
            // The admin API shows the same rawPublicKey the apps embed.
            let adminView = try await api.call(.get, "/admin/v1/apps/\(appA.string("appId"))").object
            #expect(adminView["rawPublicKey"] == appA["rawPublicKey"] && adminView["appToken"] == appA["appToken"])
            #expect(adminView["googleAppName"] == .string("Acme") && adminView["metaDataEmail"] == .bool(true))

            // U1: old password, then a TOTP from the imported secret; the JWT verifies with the old key.
            let login = try await a.login("alice@example.com", "Password1!")
            let loginToken = try #require(login.object["login-token"]?.stringValue, "\(login.text)")
            let done = try await a.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", ReferenceTOTP.code(key: "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"))])
            let jwt = try #require(done.object["jwt"]?.stringValue, "\(done.text)")
            #expect(SDKJWTCheck.isValid(jwt: jwt, rawPublicKey: appA.string("rawPublicKey")))
            let claims = SDKJWTCheck.payload(jwt)
            #expect(claims["aud"] == .string("acme-notes-abcde") && claims["sub"] == .string("alice@example.com"))
            #expect(claims["user"]?["firstName"] == .string("Alice") && claims["email"] == .string("alice@example.com"))

            // U2 stays suspended; U3 logs in by user name (phone 2FA: a login-token); the mixed-case
            // and space-for-plus handles log in normalised; the raw-MD5 user logs in and is upgraded.
            #expect(code(try await a.login("bob@example.com", "hunter22")) == 404)
            #expect(try await b.login("carol", "Password1!").object["login-token"] != nil)
            // Eve's handle was normalised; her JWT keeps the legacy `sub`.
            let eveLogin = try await b.login("eve@example.com", "Admin#Made9").object
            let eve = eveLogin["jwt"]?.stringValue ?? ""
            #expect(SDKJWTCheck.payload(eve)["sub"] == .string("Eve@Example.com"))
            // Her access token from this server works on the access-token routes.
            let eveAccess = eveLogin["access-token"]?.stringValue ?? ""
            #expect(try await b.get("/api/appuser/getUser", accessToken: eveAccess).object["handle"] == .string("eve@example.com"))
            #expect(SDKJWTCheck.isValid(jwt: eve, rawPublicKey: appB.string("rawPublicKey")))
            #expect(try await a.login("henry@example.com", "HenryTwo#2").object["jwt"] != nil, "the newest duplicate won")
            #expect(code(try await a.login("henry@example.com", "HenryOne#1")) == 600)
            #expect(try await a.login("ivy+test@example.com", "Ivy+Pass1").object["jwt"] != nil)
            // Grace's raw MD5 was not stored as such; it becomes bcrypt at her first login.
            let before = try await TestEnvironment.value("SELECT u.password_hash FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appB.string("appId")) AND u.handle = 'grace@example.com'", as: String.self) ?? ""
            #expect(before.hasPrefix("$sha256-md5$") && !before.contains(SDK.md5("OldTimer7")))
            let grace = try await b.login("grace@example.com", "OldTimer7")
            #expect(grace.object["jwt"] != nil, "\(grace.text)")
            let upgraded = try await TestEnvironment.value("SELECT u.password_hash FROM users u JOIN apps a ON a.id = u.app_ref WHERE a.app_id = \(appB.string("appId")) AND u.handle = 'grace@example.com'", as: String.self) ?? ""
            #expect(upgraded.hasPrefix("$2"))
            // U4 stays anonymous-only; U5 logs in only through Google.
            #expect(try await b.post("/api/appuser/loginAnonymous", [("handle", "ANON_6f1d2c3b-0a9e-4f8d-b7c6-5a4b3c2d1e0f")]).object["jwt"] != nil)
            let google = try await SocialLoginTests().idToken(.google, email: "dave@gmail.com", sub: "109876543210987654321", aud: "111-abc.apps.googleusercontent.com")
            #expect(try await b.post("/api/appuser/socialLogin", [("token", google), ("provider", "google")]).object["jwt"] != nil)

            // The pending signup completes with its e-mailed code; the invite registers with its code.
            let signup = try await a.post("/api/appuser/completeSignup", [("handle", "erin@example.com"), ("code", "482913")])
            #expect(signup.object["jwt"] != nil, "\(signup.text)")
            let register = try await a.post("/api/appuser/register", [
                ("handle", "frank@example.com"), ("password", SDK.md5("Frank#2024")), ("code", "731046"), ("metaData", #"{"user":{"firstName":"Frank"}}"#),
            ])
            #expect(register.object["jwt"] != nil, "\(register.text)")

            // A legacy access token (never expiring) works until the cut-off, for imported users only.
            let legacyKeys = JWTKeyCollection()
            await legacyKeys.add(rsa: try Insecure.RSA.PrivateKey(pem: legacyKey.pemRepresentation), digestAlgorithm: .sha256)
            struct Legacy: JWTPayload {
                var handle: String, appId: String, scope: String, iat: Int
                func verify(using algorithm: some JWTAlgorithm) async throws {}
            }
            let old = try await legacyKeys.sign(Legacy(handle: "carol@example.com", appId: appB.string("appId"), scope: "user", iat: 1_650_000_000))
            #expect(try await b.get("/api/appuser/getUser", accessToken: old).object["handle"] == .string("carol@example.com"))
            let strangerKeys = JWTKeyCollection()
            await strangerKeys.add(rsa: try Insecure.RSA.PrivateKey(pem: try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation), digestAlgorithm: .sha256)
            let forged = try await strangerKeys.sign(Legacy(handle: "carol@example.com", appId: appB.string("appId"), scope: "user", iat: 1_650_000_000))
            #expect(code(try await b.get("/api/appuser/getUser", accessToken: forged)) == 405)
            // A password change on this server keeps the caller's token and ends the user's other ones.
            let otherDevice = try await legacyKeys.sign(Legacy(handle: "carol@example.com", appId: appB.string("appId"), scope: "user", iat: 1_650_000_500))
            #expect(try await b.get("/api/appuser/getUser", accessToken: otherDevice).object["handle"] == .string("carol@example.com"))
            #expect(try await b.post("/api/appuser/changePassword", [("password", SDK.md5("Password1!")), ("newPassword", SDK.md5("Password2!"))], accessToken: old).text == "true")
            #expect(try await b.get("/api/appuser/getUser", accessToken: old).object["handle"] == .string("carol@example.com"))
            #expect(code(try await b.get("/api/appuser/getUser", accessToken: otherDevice)) == 405)
        }
    }

    @Test("an appId that exists on this server and was not imported is refused, and nothing is written")
    func conflictingAppId() async throws {
        let services = try await TestEnvironment.services()
        let (folder, manifest) = try LegacyFixture.make(["--json-array"])
        // The --jsonArray form reads like the JSON-lines one.
        let dry = try await LegacyFixture.importInto(services, folder) { $0.dryRun = true }
        #expect(dry.counts("users")?.read == 10 && dry.counts("signups")?.read == 8 && dry.counts("emailtemplates")?.read == 24)
        // Replace app B's appId in the export with one of an app created here.
        let created = try await services.apps.create(["name": .string("Native")], actor: "test")
        let appB = manifest["apps"]?.arrayValue?.first { $0["ref"] == .string("B") }?["appId"]?.stringValue ?? ""
        let appsFile = folder.appendingPathComponent("apps.json")
        let text = try String(contentsOf: appsFile, encoding: .utf8).replacingOccurrences(of: appB, with: created.app.appId)
        try text.write(to: appsFile, atomically: true, encoding: .utf8)
        do {
            _ = try await LegacyFixture.importInto(services, folder)
            Issue.record("the import should have been refused")
        } catch let failure as ImportFailure {
            #expect(failure.description.contains(created.app.appId) && failure.description.contains("nothing was written"))
        }
        #expect(try await services.apps.view(appId: created.app.appId).state.name == "Native")
    }

    /// A new database on the test cluster, its URL, and a client on it.
    static func scratchDatabase(_ services: CosyncServices, _ name: String) async throws -> (String, PostgresClient, Task<Void, Never>) {
        guard let base = ProcessInfo.processInfo.environment["DATABASE_URL"], let slash = base.range(of: "/", options: .backwards) else {
            throw LegacyFixture.Failure(description: "DATABASE_URL is not set")
        }
        let query = base[slash.upperBound...].split(separator: "?", maxSplits: 1).dropFirst().first.map { "?\($0)" } ?? ""
        let database = "\(name)_\(Secrets.hexIdentifier().prefix(8))"
        try await services.client.withConnection { db in
            _ = try await db.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"), logger: services.logger)
        }
        let url = base[..<slash.upperBound] + database + query
        let client = PostgresClient(configuration: try DatabaseURL(url).clientConfiguration(maxConnections: 2), backgroundLogger: services.logger)
        return (url, client, Task { await client.run() })
    }

    /// Starts `cosyncauth import-legacy` (the binary Tests/test.sh built) on a database.
    static func importer(_ url: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = LegacyFixture.root.appendingPathComponent(".build/debug/cosyncauth")
        process.arguments = ["import-legacy"] + arguments
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = url
        env["COSYNC_MASTER_KEY"] = TestEnvironment.masterKey
        env["LOG_LEVEL"] = "error"
        process.environment = env
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    @Test("the legacy export ZIP: imports what it carries, with the same appId, token, key and hashes, and reports what it lost")
    func exportZip() async throws {
        let services = try await TestEnvironment.services()
        let (folder, manifest) = try LegacyFixture.make()
        let appA = try #require(manifest["apps"]?.arrayValue?.first { $0["ref"] == .string("A") }?.objectValue)
        let zip = folder.appendingPathComponent("export.zip")
        let make = Process()
        make.executableURL = URL(fileURLWithPath: try LegacyFixture.python())
        make.arguments = [LegacyFixture.root.appendingPathComponent("Tests/system/legacy/make_export_zip.py").path, folder.path, appA.string("appId"), zip.path]
        try make.run()
        make.waitUntilExit()
        try #require(make.terminationStatus == 0)

        let (url, client, runner) = try await Self.scratchDatabase(services, "import_zip")
        defer { runner.cancel() }
        let report = folder.appendingPathComponent("zip-report.json")
        let run = try Self.importer(url, [zip.path, "--report", report.path])
        run.waitUntilExit()
        #expect(run.terminationStatus == 0)
        let facts = try await client.withConnection { db -> [String] in
            var out: [String] = []
            let rows = try await db.query(
                """
                SELECT a.app_id || ' ' || encode(t.token_hash, 'hex') || ' ' || k.public_key_pem || ' ' || (SELECT count(*) FROM users u WHERE u.app_ref = a.id)
                    || ' ' || coalesce((SELECT password_hash FROM users u WHERE u.app_ref = a.id AND u.handle = 'alice@example.com'), '')
                FROM apps a JOIN app_tokens t ON t.app_ref = a.id JOIN app_keys k ON k.app_ref = a.id AND k.active
                """, logger: services.logger)
            for try await line in rows.decode(String.self) { out.append(line) }
            return out
        }
        let pem = String(decoding: Data(base64Encoded: appA.string("rawPublicKey")) ?? Data(), as: UTF8.self)
        let tokenHash = Secrets.sha256(appA.string("appToken")).map { String(format: "%02x", $0) }.joined()
        #expect(facts.count == 1)
        #expect(facts.first?.hasPrefix("\(appA.string("appId")) \(tokenHash) \(pem) ") == true, "\(facts)")
        #expect(facts.first?.hasSuffix(" $2b$10$lmJDx9lfQL5cH/0CxGeCD.cBpHHxCvY0tW/eHVRzlSchzGB7Vch9y") == true, "\(facts)")
        let entries = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: report)).arrayValue ?? []
        #expect(entries.contains { $0["action"] == .string("lost") && ($0["reason"]?.stringValue ?? "").contains("users.metaData") })
    }

    @Test("killed with SIGKILL mid-way and rerun, the import ends as an uninterrupted one")
    func killAndResume() async throws {
        let services = try await TestEnvironment.services()
        let (folder, manifest) = try LegacyFixture.make(["--apps", "3", "--users", "6000"])
        let appIds = (manifest["apps"]?.arrayValue ?? []).compactMap { $0["appId"]?.stringValue }
        let (straight, straightClient, straightRunner) = try await Self.scratchDatabase(services, "import_straight")
        let (resumed, client, resumedRunner) = try await Self.scratchDatabase(services, "import_resumed")
        defer { [straightRunner, resumedRunner].forEach { $0.cancel() } }
        func importer(_ url: String) throws -> Process {
            try Self.importer(url, [folder.path, "--encrypt-key", "jojo123", "--batch-size", "200", "--report", folder.appendingPathComponent("\(UUID()).json").path])
        }
        let first = try importer(straight)
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)

        // Kill the second one once some user batches have committed.
        let victim = try importer(resumed)
        var doneAtKill = 0
        for _ in 0..<2000 {
            doneAtKill = (try? await TestEnvironment.value(
                "SELECT coalesce(max(rows_done), 0)::int FROM legacy_import_checkpoints WHERE collection = 'users'", as: Int.self, on: client)) ?? 0
            if doneAtKill > 0 || !victim.isRunning { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        kill(victim.processIdentifier, SIGKILL)
        victim.waitUntilExit()
        #expect(doneAtKill > 0 && doneAtKill < 6010, "killed mid-way through the users (at \(doneAtKill))")
        let rerun = try importer(resumed)
        rerun.waitUntilExit()
        #expect(rerun.terminationStatus == 0)

        // The rerun's report still holds what the killed run refused before the kill.
        let reports = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: [.contentModificationDateKey])
            .filter { $0.pathExtension == "json" && $0.lastPathComponent.count > 40 }
            .sorted { (try? $0.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate ?? .distantPast) ?? .distantPast
                < (try? $1.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate ?? .distantPast) ?? .distantPast }
        let lastReport = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: try #require(reports.last))).arrayValue ?? []
        #expect(lastReport.contains { ($0["reason"]?.stringValue ?? "").contains("duplicate handle") })
        let a = try await LegacyFixture.snapshot(straightClient, appIds: appIds, comparableAcrossDatabases: true, logger: services.logger)
        let b = try await LegacyFixture.snapshot(client, appIds: appIds, comparableAcrossDatabases: true, logger: services.logger)
        #expect(a.count > 100_000 && a == b)
    }
}
