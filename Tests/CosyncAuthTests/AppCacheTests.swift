import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Hummingbird
import JWTKit
import _CryptoExtras
import HummingbirdTesting
import PostgresNIO
import Testing

/// Two nodes in one process: each has its own PostgresClient, its own app cache and its own listener,
/// as two server processes would. A change made on node A must stop working on node B within 1 s
/// (the cache's TTL is 10 s, so only the notification can make it).
@Suite("App cache: two nodes, LISTEN/NOTIFY invalidation")
struct AppCacheTests {
    final class Node: Sendable {
        let services: CosyncServices
        let tasks: [Task<Void, Never>]

        init(services: CosyncServices, tasks: [Task<Void, Never>]) {
            self.services = services
            self.tasks = tasks
        }

        static func start() async throws -> Node {
            let shared = try await TestEnvironment.services()
            let client = PostgresClient(
                configuration: shared.configuration.database.clientConfiguration(maxConnections: 4), backgroundLogger: shared.logger)
            let run = Task { await client.run() }
            let (services, _) = try await CosyncServices.prepare(
                configuration: shared.configuration, client: client, migrator: try TestEnvironment.migrator(), logger: shared.logger)
            let listener = services.appCacheListener()
            let listen = Task { _ = try? await listener.run() }
            for _ in 0..<500 where !services.apps.cache.isLive { try await Task.sleep(for: .milliseconds(10)) }
            #expect(services.apps.cache.isLive)
            return Node(services: services, tasks: [listen, run])
        }

        func stop() { tasks.forEach { $0.cancel() } }
        var apps: AppAdministration { services.apps }
    }

    /// How long until `condition` holds (polled every 5 ms), or nil when it did not within 3 s.
    func timeUntil(_ condition: @Sendable () async throws -> Bool) async throws -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(3) {
            if try await condition() { return ContinuousClock.now - start }
            try await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    @Test("a rotated-away app token, a suspension, a settings change and a deletion on node A stop working on node B within 1 s")
    func twoNodes() async throws {
        let a = try await Node.start()
        let b = try await Node.start()
        defer { a.stop(); b.stop() }

        let created = try await a.apps.create(["name": .string("Cache Test"), "signupFlow": .string("none")], actor: "test")
        let appId = created.app.appId
        let token = try #require(created.app.appToken)

        // Node B loads the app and then holds it. (A load that overlaps a notification is not kept: the
        // creation's own notification may still be on its way, hence the wait.)
        #expect(try await b.apps.app(forToken: token)?.appId == appId)
        let held = try await timeUntil { _ = try await b.apps.app(forToken: token); return b.apps.cache.count == 1 }
        #expect(held != nil)
        #expect(try await b.apps.cachedApp(appId: appId)?.appId == appId)

        // A settings change on A: B sees the new value at once (well inside 1 s).
        _ = try await a.apps.update(appId: appId, patch: ["passwordMinLength": .int(12)], actor: "test")
        let settingsSeen = try await timeUntil { try await b.apps.app(forToken: token)?.settings.passwordMinLength == 12 }
        #expect(try #require(settingsSeen) < .seconds(1))

        // The same through node B's HTTP API (getApplication reads only the cache on a hit).
        let router = Application(router: buildRouter(services: b.services))
        try await router.test(.router) { client in
            let reply = try await client.execute(uri: "/api/appuser/getApplication", method: .get, headers: [.init("app-token")!: token])
            #expect(reply.status == .ok)
        }

        // Suspension.
        _ = try await a.apps.update(appId: appId, patch: ["status": .string("suspended")], actor: "test")
        let suspendedSeen = try await timeUntil { try await b.apps.app(forToken: token)?.status == .suspended }
        #expect(try #require(suspendedSeen) < .seconds(1))
        _ = try await a.apps.update(appId: appId, patch: ["status": .string("active")], actor: "test")

        // Token rotation with no grace: the old token stops on B.
        let rotation = try await a.apps.rotateAppToken(appId: appId, graceSeconds: 0, actor: "test")
        let oldTokenGone = try await timeUntil { try await b.apps.app(forToken: token) == nil }
        #expect(try #require(oldTokenGone) < .seconds(1))
        #expect(try await b.apps.app(forToken: rotation.appToken)?.appId == appId)

        // A change by plain SQL (an operator's hand, another release) is notified by the trigger too.
        try await TestEnvironment.sql("UPDATE apps SET name = 'Renamed by SQL' WHERE app_id = \(appId)")
        let renamedSeen = try await timeUntil { try await b.apps.cachedApp(appId: appId)?.name == "Renamed by SQL" }
        #expect(try #require(renamedSeen) < .seconds(1))

        // Deletion.
        #expect(try await b.apps.app(forToken: rotation.appToken) != nil)
        try await a.apps.delete(appId: appId, actor: "test")
        let deletedSeen = try await timeUntil {
            let byToken = try await b.apps.app(forToken: rotation.appToken)
            let byId = try await b.apps.cachedApp(appId: appId)
            return byToken == nil && byId == nil
        }
        #expect(try #require(deletedSeen) < .seconds(1))
        print("app cache, node A -> node B: settings \(settingsSeen.map { "\($0)" } ?? "-"), suspension \(suspendedSeen.map { "\($0)" } ?? "-"), token rotation \(oldTokenGone.map { "\($0)" } ?? "-"), SQL change \(renamedSeen.map { "\($0)" } ?? "-"), deletion \(deletedSeen.map { "\($0)" } ?? "-") (bound 1 s, TTL 10 s)")
    }

    @Test("a grace-period token stops when its grace ends, without any notification")
    func graceEnds() async throws {
        let b = try await Node.start()
        defer { b.stop() }
        let created = try await b.apps.create(["name": .string("Grace")], actor: "test")
        let token = try #require(created.app.appToken)
        _ = try await b.apps.rotateAppToken(appId: created.app.appId, graceSeconds: 1, actor: "test")
        #expect(try await b.apps.app(forToken: token) != nil)  // cached now, with its deadline
        try await Task.sleep(for: .milliseconds(1200))
        #expect(try await b.apps.app(forToken: token) == nil)
    }

    @Test("without its listener the cache empties and serves nothing; a new listener turns it on again")
    func listenerLost() async throws {
        let b = try await Node.start()
        defer { b.stop() }
        let created = try await b.apps.create(["name": .string("Listener")], actor: "test")
        let token = try #require(created.app.appToken)
        let held = try await timeUntil { _ = try await b.apps.app(forToken: token); return b.apps.cache.count == 1 }
        #expect(held != nil)

        b.tasks[0].cancel()  // the listener stops (as when its connection is lost)
        let off = try await timeUntil { !b.apps.cache.isLive && b.apps.cache.count == 0 }
        #expect(off != nil)
        // Off: lookups still answer (from the database) but nothing is kept.
        #expect(try await b.apps.app(forToken: token)?.appId == created.app.appId)
        #expect(b.apps.cache.count == 0)

        let listener = b.services.appCacheListener()
        let again = Task { try? await listener.run() }
        defer { again.cancel() }
        #expect(try await timeUntil { b.apps.cache.isLive } != nil)
        #expect(try await b.apps.app(forToken: token)?.appId == created.app.appId)
        #expect(b.apps.cache.count == 1)
    }

    @Test("a legacy server key imported through node A is accepted by node B within 1 s, and its removal too (not after the minute's reload)")
    func legacyKeysReachOtherNodes() async throws {
        let a = try await Node.start()
        let b = try await Node.start()
        defer { a.stop(); b.stop() }
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signer = JWTKeyCollection()
        await signer.add(rsa: try Insecure.RSA.PrivateKey(pem: key.pemRepresentation), digestAlgorithm: .sha256)
        struct Legacy: JWTPayload {
            var handle: String, appId: String, scope: String, iat: Int
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let token = try await signer.sign(Legacy(handle: "nina@example.com", appId: "legacy-app", scope: "user", iat: 1_650_000_000))
        // Node B loads the keys first (without this one), so only a notification can make it see the new key.
        #expect(await b.services.flows.tokens.verifyLegacyAccessToken(token) == nil)

        let pem = key.publicKey.pemRepresentation
        try await a.services.client.withConnection { db in
            try await LegacyTokenKeyStore.upsertLegacyTokenKey(db, publicKeyPEM: pem, acceptUntil: Date().addingTimeInterval(3600), logger: a.services.logger)
        }
        let accepted = try await timeUntil { await b.services.flows.tokens.verifyLegacyAccessToken(token)?.handle == "nina@example.com" }
        #expect(accepted.map { $0 < .seconds(1) } == true, "accepted after \(String(describing: accepted))")

        try await TestEnvironment.sql("DELETE FROM legacy_token_keys WHERE public_key_pem = \(pem)")
        let refused = try await timeUntil { await b.services.flows.tokens.verifyLegacyAccessToken(token) == nil }
        #expect(refused.map { $0 < .seconds(1) } == true, "refused after \(String(describing: refused))")
    }
}
