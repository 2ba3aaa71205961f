import CosyncAuth
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import Testing

/// Issue 24's cheaper parts of a request and of an idle node: one clock for every request deadline
/// (`DeadlineWatch`), and workers that wait for `NOTIFY cosync_work` instead of polling (`WorkSignal`).
@Suite("Request deadlines and idle workers")
struct RequestCostTests {
    struct Stuck: Error {}

    @Test("a deadline watch returns the body's value, or DeadlineExceeded within a tick of the limit while the body hangs")
    func deadlines() async throws {
        let watch = DeadlineWatch(tick: .milliseconds(50))
        #expect(try await watch.run(.seconds(5)) { 42 } == 42)
        await #expect(throws: Stuck.self) { try await watch.run(.seconds(5)) { () async throws -> Int in throw Stuck() } }
        let started = ContinuousClock.now
        await #expect(throws: DeadlineExceeded.self) {
            // A body that ignores cancellation (a query on a dead connection) is left behind.
            try await watch.run(.milliseconds(200)) { () async -> Int in await Self.ignoringCancellation(.seconds(15)) }
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(200) && waited < .seconds(5), "answered after \(waited)")
        // Many calls at once, each answered with its own value; the table empties and the clock stops.
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for n in 0..<200 { group.addTask { try await watch.run(.seconds(5)) { try await Task.sleep(for: .milliseconds(5)); return n } } }
            return try await group.reduce(0, +)
        }
        #expect(values == (0..<200).reduce(0, +))
    }

    @Test("a deadline watch gives every waiting call up at once when abandonWhen says so, and answers a cancelled caller at once")
    func abandonAndCancel() async throws {
        let down = LockedFlag()
        let watch = DeadlineWatch(tick: .milliseconds(50), abandonWhen: { down.value ? Stuck() : nil })
        let started = ContinuousClock.now
        let waiting = Task { try await watch.run(.seconds(30)) { () async -> Int in
            try? await Task.sleep(for: .seconds(30))
            return 1
        } }
        try await Task.sleep(for: .milliseconds(100))
        down.set(true)
        await #expect(throws: Stuck.self) { try await waiting.value }
        #expect(ContinuousClock.now - started < .seconds(10))

        down.set(false)
        let cancelled = Task { try await watch.run(.seconds(30)) { () async -> Int in await Self.ignoringCancellation(.seconds(30)) } }
        try await Task.sleep(for: .milliseconds(100))
        let cancelledAt = ContinuousClock.now
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        // (Loose bounds: the suite shares 2 cores; what they catch is an answer only when the body ends, 30 s.)
        #expect(ContinuousClock.now - cancelledAt < .seconds(10))
    }

    @Test("a work signal wakes a waiter at once, also when it came between the look and the wait; without one the wait ends at its limit")
    func workSignal() async throws {
        let signal = WorkSignal()
        let seen = signal.generation
        let waiter = Task {
            let started = ContinuousClock.now
            await signal.wait(since: seen, upTo: .seconds(30))
            return ContinuousClock.now - started
        }
        try await Task.sleep(for: .milliseconds(100))
        signal.signal()
        // (Bounds are loose: the suite shares 2 cores with builds; the failure they catch is a wait of 30 s.)
        #expect(await waiter.value < .seconds(10))
        // A signal newer than what the waiter saw: no wait at all.
        let started = ContinuousClock.now
        await signal.wait(since: seen, upTo: .seconds(30))
        #expect(ContinuousClock.now - started < .seconds(5))
        // Nothing new: the limit.
        let quiet = ContinuousClock.now
        await signal.wait(since: signal.generation, upTo: .milliseconds(150))
        let waited = ContinuousClock.now - quiet
        #expect(waited >= .milliseconds(150) && waited < .seconds(10))
    }

    @Test("a queued message and a queued webhook delivery wake a listening node's workers within 1 s (sql/0030 NOTIFY cosync_work)")
    func notifyWakesWorkers() async throws {
        let shared = try await TestEnvironment.services()
        let client = PostgresClient(
            configuration: shared.configuration.database.clientConfiguration(maxConnections: 4), backgroundLogger: shared.logger)
        let run = Task { await client.run() }
        defer { run.cancel() }
        let (node, _) = try await CosyncServices.prepare(
            configuration: shared.configuration, client: client, migrator: try TestEnvironment.migrator(), logger: shared.logger)
        let listener = node.appCacheListener()
        let listen = Task { _ = try? await listener.run() }
        defer { listen.cancel() }
        for _ in 0..<500 where !node.state.outboxWork.isListening { try await Task.sleep(for: .milliseconds(10)) }
        #expect(node.state.outboxWork.isListening && node.state.webhookWork.isListening)
        try await Task.sleep(for: .milliseconds(100))

        let outboxBefore = node.state.outboxWork.generation, webhooksBefore = node.state.webhookWork.generation
        try await TestEnvironment.sql(
            "INSERT INTO messages (app_ref, channel, recipient, template, subject, body, next_attempt) VALUES (NULL, 'email', 'idle-wake@cosync.test', 'invite', 'Idle', 'wake', now() + interval '1 day')")
        // (Due tomorrow: the suite's own workers leave it alone, and it is deleted below.)
        defer { Task { try? await TestEnvironment.sql("DELETE FROM messages WHERE recipient = 'idle-wake@cosync.test'") } }
        #expect(try await within(.seconds(1)) { node.state.outboxWork.generation != outboxBefore }, "the outbox workers were not woken")
        #expect(node.state.webhookWork.generation == webhooksBefore, "a message woke the webhook workers")

        // A webhook delivery: an app, an endpoint and an event, as the event stream writes them.
        let created = try await shared.apps.create(["name": .string("Idle wake"), "signupFlow": .string("none")], actor: "test")
        try await TestEnvironment.sql(
            """
            WITH a AS (SELECT id FROM apps WHERE app_id = \(created.app.appId)),
                 ep AS (INSERT INTO webhook_endpoints (app_ref, url, secret_sealed, event_types, enabled)
                        SELECT a.id, 'https://hooks.cosync.test/idle', '\\x00'::bytea, '{}', false FROM a RETURNING id),
                 ev AS (INSERT INTO events (app_ref, type, body) SELECT a.id, 'user.created', '{}' FROM a RETURNING id)
            INSERT INTO webhook_deliveries (endpoint_id, event_ref) SELECT ep.id, ev.id FROM ep, ev
            """)
        #expect(try await within(.seconds(1)) { node.state.webhookWork.generation != webhooksBefore }, "the webhook workers were not woken")
    }

    @Test("a new app takes its own key pair from the pool generated ahead (sealed, used once), and signs with it")
    func keyPool() async throws {
        let services = try await TestEnvironment.services()
        let filler = KeyPoolFiller(client: services.client, box: services.configuration.secretBox, size: 40, logger: services.logger, taken: WorkSignal())
        try await filler.fill()
        let pooled = try await kids("SELECT kid FROM app_key_pool")
        #expect(pooled.count >= 40)
        let taken = services.apps.keyPoolTaken.generation
        let first = try await services.apps.create(["name": .string("Pooled 1"), "signupFlow": .string("none")], actor: "test")
        let second = try await services.apps.create(["name": .string("Pooled 2"), "signupFlow": .string("none")], actor: "test")
        let firstKids = try await kids("SELECT k.kid FROM app_keys k JOIN apps a ON a.id = k.app_ref WHERE a.app_id = \(first.app.appId)")
        let secondKids = try await kids("SELECT k.kid FROM app_keys k JOIN apps a ON a.id = k.app_ref WHERE a.app_id = \(second.app.appId)")
        #expect(firstKids.count == 1 && secondKids.count == 1 && firstKids != secondKids, "each app has a key pair of its own")
        #expect(firstKids.isSubset(of: pooled) && secondKids.isSubset(of: pooled), "the keys came from the pool")
        let left = try await kids("SELECT kid FROM app_key_pool")
        #expect(left.isDisjoint(with: firstKids.union(secondKids)), "a taken key left the pool")
        #expect(services.apps.keyPoolTaken.generation != taken, "taking a key wakes the filler")
        // The pooled key is the app's signing key: its JWKS names it, and a user JWT verifies with it.
        let jwks = try await services.apps.jwks(appId: first.app.appId)
        #expect(jwks.map { $0["kid"] } == [firstKids.first])
        #expect(first.app.rawPublicKey.map { Data(base64Encoded: $0) != nil } == true)
        try await TestEnvironment.withAPI { api in
            let sdk = SDK(api: api, appToken: try #require(first.app.appToken))
            let signup = try await sdk.post("/api/appuser/signup", [("handle", "pool@cosync.test"), ("password", SDK.md5("pool"))])
            #expect(signup.status == .ok, "\(signup.text)")
            let jwt = try #require(signup.object["jwt"]?.stringValue)
            #expect(SDKJWTCheck.isValid(jwt: jwt, rawPublicKey: try #require(first.app.rawPublicKey)), "the user JWT verifies with the pooled key")
            #expect(!SDKJWTCheck.isValid(jwt: jwt, rawPublicKey: try #require(second.app.rawPublicKey)))
        }
    }

    @Test("COSYNC_BCRYPT_NICE: the hashing threads run at the nice value asked (10 here), the caller's thread is left alone")
    func bcryptBelowRequests() async throws {
        // A pool of its own: the shared one's threads serve other tests' hashers (at nice 0) meanwhile.
        let pool = NIOThreadPool(numberOfThreads: System.coreCount)
        pool.start()
        defer { pool.shutdownGracefully { _ in } }
        let hasher = PasswordHasher(cost: 10, pool: pool, niceness: BackgroundPriority.niceness)
        let own = BackgroundPriority.currentNiceness()
        // Four times as many 60 ms jobs as threads, at once: every thread of the pool runs some.
        try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<(4 * System.coreCount) { group.addTask { try await hasher.hash(md5Hex: PasswordHasher.md5Hex("p\(i)")) } }
            for try await _ in group {}
        }
        // One job per thread, each held until all have started: every thread of the pool answers once.
        let started = NIOLockedValueBox(0)
        let threads = System.coreCount
        let seen = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    try await pool.runIfActive { () -> Int32 in
                        started.withLockedValue { $0 += 1 }
                        for _ in 0..<2000 where started.withLockedValue({ $0 }) < threads { usleep(1000) }
                        return BackgroundPriority.currentNiceness()
                    }
                }
            }
            var all: [Int32] = []
            for try await value in group { all.append(value) }
            return all
        }
        #expect(seen.count == threads)
        #expect(seen.allSatisfy { $0 == BackgroundPriority.niceness }, "the hashing threads' nice values: \(seen)")
        #expect(BackgroundPriority.currentNiceness() == own, "the caller's thread keeps its priority")
    }

    /// A service that stands still until the group shuts down.
    struct Idle: Service {
        func run() async throws { try await gracefulShutdown() }
    }

    @Test("a key pool of size 0 (COSYNC_KEY_POOL_SIZE=0, the pool off) keeps its service running: the server stays up")
    func keyPoolOff() async throws {
        let services = try await TestEnvironment.services()
        let filler = KeyPoolFiller(client: services.client, box: services.configuration.secretBox, size: 0, logger: services.logger, taken: WorkSignal())
        let group = ServiceGroup(configuration: .init(services: [.init(service: filler), .init(service: Idle())], logger: services.logger))
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(300))
        // Before the fix the filler returned at once and the group (the server) had ended with an error.
        await group.triggerGracefulShutdown()
        try await running.value
    }

    /// A wait that cancellation does not end (as a query on a dead connection), without holding a thread.
    static func ignoringCancellation(_ duration: Duration) async -> Int {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(duration.nanoseconds / 1_000_000))) { continuation.resume(returning: 1) }
        }
    }

    func kids(_ query: PostgresQuery) async throws -> Set<String> {
        let services = try await TestEnvironment.services()
        var found = Set<String>()
        for try await kid in try await services.client.query(query, logger: services.logger).decode(String.self) { found.insert(kid) }
        return found
    }

    func within(_ limit: Duration, _ condition: @Sendable () -> Bool) async throws -> Bool {
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }
}

final class LockedFlag: Sendable {
    private let box = NIOLockedValueBox(false)
    var value: Bool { box.withLockedValue { $0 } }
    func set(_ value: Bool) { box.withLockedValue { $0 = value } }
}
