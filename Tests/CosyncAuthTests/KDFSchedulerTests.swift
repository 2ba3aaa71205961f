import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import Testing

/// The bcrypt admission queue (issue 10 §4): bounded, fair per tenant, refusing with 503 + Retry-After.
@Suite("KDF scheduler: bounded, fair per app, 503 when saturated")
struct KDFSchedulerTests {
    /// Waits (bounded) until `condition` holds.
    func eventually(_ condition: @Sendable () -> Bool) async throws {
        for _ in 0..<400 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
        #expect(condition())
    }

    /// Queues `floods` jobs of tenant "flood" (named flood0, flood1, ... in `order` when they run), then
    /// one of `quiet`, each in turn once the one before is waiting.
    func queue(
        _ scheduler: KDFScheduler, floods: Int, then quiet: String, recordingIn order: NIOLockedValueBox<[String]>
    ) async throws -> [Task<Void, any Error>] {
        let before = scheduler.waiting
        var tasks: [Task<Void, any Error>] = []
        for (i, tenant) in ((0..<floods).map { ("flood\($0)", "flood") } + [(quiet, quiet)]).enumerated() {
            tasks.append(Task {
                try await scheduler.acquire(tenant: tenant.1)
                order.withLockedValue { $0.append(tenant.0) }
            })
            try await eventually { scheduler.waiting == before + i + 1 }
        }
        return tasks
    }

    @Test("a flooding tenant waits behind itself: another tenant's job runs next, not after the flood")
    func fairness() async throws {
        let scheduler = KDFScheduler(slots: 1, maxWait: .seconds(600))
        try await scheduler.acquire(tenant: "holder")
        let order = NIOLockedValueBox<[String]>([])
        let tasks = try await queue(scheduler, floods: 20, then: "quiet", recordingIn: order)
        // Each release hands the slot to the next tenant in turn.
        for served in 1...21 {
            // The job that finishes: the holder's, then each served one's.
            let finishing = served == 1 ? "holder" : (order.withLockedValue { $0[served - 2] }.hasPrefix("flood") ? "flood" : "quiet")
            scheduler.release(tenant: finishing, ranFor: .milliseconds(1))
            try await eventually { order.withLockedValue { $0.count } == served }
        }
        for task in tasks { try await task.value }
        let served = order.withLockedValue { $0 }
        #expect(served.firstIndex(of: "quiet").map { $0 <= 1 } == true, "served: \(served)")
        #expect(served.filter { $0.hasPrefix("flood") } == (0..<20).map { "flood\($0)" }, "a tenant's own jobs keep their order")
        scheduler.release(tenant: "flood", ranFor: .milliseconds(1))
        #expect(scheduler.running == 0 && scheduler.waiting == 0)
    }

    @Test("with every slot held by a flood, the first slot that frees goes to another tenant's job (fewest running first)")
    func fewestRunningFirst() async throws {
        let scheduler = KDFScheduler(slots: 2, maxWait: .seconds(600))
        try await scheduler.acquire(tenant: "flood")
        try await scheduler.acquire(tenant: "flood")
        let order = NIOLockedValueBox<[String]>([])
        let tasks = try await queue(scheduler, floods: 3, then: "quiet", recordingIn: order)
        // One flood job ends: the flood still runs one, the quiet tenant none. The quiet job goes first,
        // although the flood's turn came before it (one order by turn ran flood0 here).
        scheduler.release(tenant: "flood", ranFor: .milliseconds(1))
        try await eventually { order.withLockedValue { $0.count } == 1 }
        #expect(order.withLockedValue { $0 } == ["quiet"])
        for finishing in ["flood", "quiet", "flood"] {
            scheduler.release(tenant: finishing, ranFor: .milliseconds(1))
            try await Task.sleep(for: .milliseconds(5))
        }
        for task in tasks { try await task.value }
        #expect(order.withLockedValue { $0 } == ["quiet", "flood0", "flood1", "flood2"])
        for _ in 0..<2 { scheduler.release(tenant: "flood", ranFor: .milliseconds(1)) }
        #expect(scheduler.running == 0 && scheduler.waiting == 0)
    }

    @Test("precheck turns a flooding tenant away before its database work, and lets another tenant through")
    func precheck() async throws {
        let scheduler = KDFScheduler(slots: 1, maxWait: .milliseconds(250), initialEstimate: .milliseconds(100))
        #expect(throws: Never.self) { try scheduler.precheck(tenant: "flood") }  // a free slot
        try await scheduler.acquire(tenant: "flood")
        let queued = Task { try await scheduler.acquire(tenant: "flood") }
        try await eventually { scheduler.waiting == 1 }
        let second = Task { try await scheduler.acquire(tenant: "flood") }
        try await eventually { scheduler.waiting == 2 }
        // flood: 2 ahead + itself = 300 ms > 250 ms. quiet: 1 flood job ahead (its turn comes next) = 200 ms.
        #expect(throws: KDFOverloaded(retryAfterSeconds: 1)) { try scheduler.precheck(tenant: "flood") }
        #expect(throws: Never.self) { try scheduler.precheck(tenant: "quiet") }
        #expect(scheduler.waiting == 2, "a precheck queues nothing")
        for _ in 0..<3 { scheduler.release(tenant: "flood", ranFor: .milliseconds(100)) ; try await Task.sleep(for: .milliseconds(5)) }
        try await queued.value
        try await second.value
    }

    @Test("a job whose expected wait passes the bound is refused at once with a Retry-After; cancelled waiters give their place back")
    func boundAndCancellation() async throws {
        let scheduler = KDFScheduler(slots: 1, maxWait: .milliseconds(250), initialEstimate: .milliseconds(100))
        try await scheduler.acquire(tenant: "a")
        let first = Task { try await scheduler.acquire(tenant: "a") }  // expected wait 100 ms
        try await eventually { scheduler.waiting == 1 }
        let second = Task { try await scheduler.acquire(tenant: "b") }  // 200 ms
        try await eventually { scheduler.waiting == 2 }
        let started = ContinuousClock.now
        await #expect(throws: KDFOverloaded(retryAfterSeconds: 1)) { try await scheduler.acquire(tenant: "c") }  // 300 ms > 250 ms
        #expect(ContinuousClock.now - started < .milliseconds(100), "refused at once, not after waiting")

        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(scheduler.waiting == 1)
        scheduler.release(tenant: "a", ranFor: .milliseconds(100))  // the holder finishes: `first` runs
        try await first.value
        #expect(scheduler.running == 1 && scheduler.waiting == 0)
        scheduler.release(tenant: "a", ranFor: .milliseconds(100))
        #expect(scheduler.running == 0)
    }

    @Test("a flooding tenant fills its own queue up to the bound and is refused; another tenant is still admitted")
    func floodIsRefusedOthersAdmitted() async throws {
        let scheduler = KDFScheduler(slots: 1, maxWait: .milliseconds(450), initialEstimate: .milliseconds(100))
        try await scheduler.acquire(tenant: "holder")
        var flood: [Task<Void, any Error>] = []
        for i in 0..<4 {  // expected waits 100..400 ms: admitted
            flood.append(Task { try await scheduler.acquire(tenant: "flood") })
            try await eventually { scheduler.waiting == i + 1 }
        }
        await #expect(throws: KDFOverloaded.self) { try await scheduler.acquire(tenant: "flood") }
        // The quiet tenant's job comes right after the flood's next one: admitted.
        let quiet = Task { try await scheduler.acquire(tenant: "quiet") }
        try await eventually { scheduler.waiting == 5 }
        // Finishing in turn: the holder, a flood job, the quiet one (the tenant with none running goes
        // first among the waiting), then the flood's.
        for finishing in ["holder", "flood", "quiet", "flood", "flood", "flood"] {
            scheduler.release(tenant: finishing, ranFor: .milliseconds(100))
            try await Task.sleep(for: .milliseconds(5))
        }
        try await quiet.value
        for task in flood { try await task.value }
        #expect(scheduler.running == 0 && scheduler.waiting == 0)
    }

    @Test("over HTTP: a login storm past the bound gets 503 with Retry-After and the {code, message} body; never a 500")
    func overloadOverHTTP() async throws {
        let shared = try await TestEnvironment.services()
        var configuration = shared.configuration
        configuration.kdfMaxWait = .milliseconds(10)
        let (busy, _) = try await CosyncServices.prepare(
            configuration: configuration, client: shared.client, migrator: try TestEnvironment.migrator(), logger: shared.logger)
        let app = Application(router: buildRouter(services: busy))
        try await app.test(.router) { client in
            let api = API(client: client)
            let created = try await api.createApp("KDF", settings: ["signupFlow": .string("none"), "maxLoginAttempts": .int(1000)])
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = "kdf\(Secrets.hexIdentifier().prefix(8))@example.com"
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let replies = try await withThrowingTaskGroup(of: API.Reply.self) { group in
                for _ in 0..<24 { group.addTask { try await sdk.login(handle, "pw") } }
                var all: [API.Reply] = []
                for try await reply in group { all.append(reply) }
                return all
            }
            let refused = replies.filter { $0.status == .serviceUnavailable }
            #expect(replies.allSatisfy { $0.status == .ok || $0.status == .serviceUnavailable }, "\(replies.map(\.status.code))")
            #expect(!refused.isEmpty, "24 logins at once with a 10 ms bound: some are refused")
            #expect(replies.contains { $0.status == .ok }, "the admitted ones succeed")
            for reply in refused {
                #expect(reply.object["code"] == .int(503))
                #expect(reply.headers[.retryAfter].flatMap { Int($0) }.map { $0 >= 1 } == true)
            }
        }
    }
}
