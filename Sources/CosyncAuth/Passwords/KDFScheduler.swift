import NIOConcurrencyHelpers

/// Thrown instead of queueing a bcrypt job whose expected wait passes the bound: the end-user and admin
/// APIs answer HTTP 503 with `Retry-After` (the shipped SDKs treat any non-200 as an error).
public struct KDFOverloaded: Error, Equatable, CustomStringConvertible {
    /// Whole seconds after which the queue is expected to have room again (at least 1).
    public let retryAfterSeconds: Int
    public init(retryAfterSeconds: Int) { self.retryAfterSeconds = retryAfterSeconds }
    public var description: String { "password hashing is saturated; retry after \(retryAfterSeconds) s" }
}

/// Admission and order for bcrypt jobs. At most `slots` jobs run at once (one per thread of the hashing
/// pool); the others wait in one queue per tenant, and a finishing job hands its slot to the waiting
/// tenant with the fewest jobs running (round robin among equals), so an app that floods logins waits
/// behind itself, not in front of the others: another app's login takes the first slot that frees
/// while the flood holds the others (measured: with a single order by turn, it waited for one flood
/// job per slot first, and its p99 was 5 hashes at a flood of 3 times the ceiling).
///
/// A job whose expected wait (the jobs that round robin puts ahead of it, divided by the slots, times
/// the moving average of one job's run time) is over `maxWait` is refused at once with
/// `KDFOverloaded`, instead of queueing without bound. Only the tenant's own queue and one turn of each
/// other tenant count, so a storm from one app fills that app's queue up to the bound and gets the
/// 503s, while another app's jobs are still admitted.
///
/// Hand-written: no package here offers a fair, bounded admission queue for a thread pool.
public final class KDFScheduler: Sendable {
    struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    struct State {
        var running = 0
        /// Running jobs per tenant (tenants with none are absent).
        var runningBy: [String: Int] = [:]
        var waiting = 0
        var queues: [String: [Waiter]] = [:]
        /// Tenants with waiters, in the order their turn comes.
        var ring: [String] = []
        /// Waiters cancelled before they were queued (their task's cancellation ran first).
        var cancelledEarly: Set<UInt64> = []
        var nextId: UInt64 = 0
        /// Moving average of one job's run time, in nanoseconds.
        var averageNanos: Double

        /// The next waiter, taken off its queue and counted as running: the first tenant in turn among
        /// those with the fewest running jobs.
        mutating func popNext() -> Waiter? {
            ring.removeAll { queues[$0]?.isEmpty ?? true }
            var best: Int?
            for index in ring.indices {
                if let chosen = best, runningBy[ring[index], default: 0] >= runningBy[ring[chosen], default: 0] { continue }
                best = index
            }
            guard let index = best else { return nil }
            let tenant = ring.remove(at: index)
            guard var queue = queues[tenant], !queue.isEmpty else { return nil }  // removed above: not reached
            let waiter = queue.removeFirst()
            waiting -= 1
            if queue.isEmpty {
                queues[tenant] = nil
            } else {
                queues[tenant] = queue
                ring.append(tenant)
            }
            runningBy[tenant, default: 0] += 1
            return waiter
        }

        mutating func finished(_ tenant: String) {
            guard let count = runningBy[tenant] else { return }
            runningBy[tenant] = count > 1 ? count - 1 : nil
        }

        mutating func remove(id: UInt64) -> Waiter? {
            for (tenant, queue) in queues {
                guard let index = queue.firstIndex(where: { $0.id == id }) else { continue }
                var rest = queue
                let waiter = rest.remove(at: index)
                waiting -= 1
                if rest.isEmpty {
                    queues[tenant] = nil
                    ring.removeAll { $0 == tenant }
                } else {
                    queues[tenant] = rest
                }
                return waiter
            }
            return nil
        }
    }

    public let slots: Int
    public let maxWait: Duration
    let state: NIOLockedValueBox<State>

    /// `initialEstimate` is the run time of one job assumed until the first jobs finished.
    public init(slots: Int, maxWait: Duration, initialEstimate: Duration = .milliseconds(100)) {
        self.slots = max(1, slots)
        self.maxWait = maxWait
        self.state = NIOLockedValueBox(State(averageNanos: Double(max(1, initialEstimate.nanoseconds))))
    }

    /// Jobs waiting for a slot (all tenants).
    public var waiting: Int { state.withLockedValue { $0.waiting } }
    /// Jobs running.
    public var running: Int { state.withLockedValue { $0.running } }

    /// Throws `KDFOverloaded` when a job of `tenant` queued now would be refused: a flow calls it before
    /// the database work that leads to bcrypt, so a tenant's flood is turned away for the price of this
    /// check instead of a user lookup and an attempt reservation each. Only an early answer: `acquire`
    /// still decides.
    public func precheck(tenant: String) throws(KDFOverloaded) {
        let refusal = state.withLockedValue { state -> Int? in state.running < slots ? nil : self.refusal(of: tenant, in: state) }
        if let refusal { throw KDFOverloaded(retryAfterSeconds: refusal) }
    }

    /// The Retry-After seconds when a job of `tenant` queued now would wait longer than `maxWait`; nil
    /// when it may queue. Jobs ahead of it in round-robin order: its own tenant's queue, and from every
    /// other tenant at most one more job than that (their turns come in between). A tenant that floods
    /// lengthens its own wait, not the other tenants'.
    func refusal(of tenant: String, in state: State) -> Int? {
        let own = state.queues[tenant]?.count ?? 0
        var ahead = own
        for (other, queue) in state.queues where other != tenant { ahead += min(queue.count, own + 1) }
        let expected = Double(ahead + 1) / Double(slots) * state.averageNanos
        guard expected > Double(maxWait.nanoseconds) else { return nil }
        let seconds = expected / 1e9
        return seconds.isFinite ? max(1, min(3600, Int(seconds.rounded(.up)))) : 60
    }

    /// Waits for a slot for `tenant`, or throws `KDFOverloaded` at once. Every successful call must be
    /// paired with one `release`.
    public func acquire(tenant: String) async throws {
        let id = state.withLockedValue { state -> UInt64 in
            state.nextId &+= 1
            return state.nextId
        }
        // A cancellation that came too late to find the waiter leaves its id behind: drop it.
        defer { state.withLockedValue { _ = $0.cancelledEarly.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Decision { case run, queued, refuse(Int), cancelled }
                let decision = state.withLockedValue { state -> Decision in
                    if state.cancelledEarly.remove(id) != nil { return .cancelled }
                    if state.running < slots {
                        state.running += 1
                        state.runningBy[tenant, default: 0] += 1
                        return .run
                    }
                    if let seconds = refusal(of: tenant, in: state) { return .refuse(seconds) }
                    state.queues[tenant, default: []].append(Waiter(id: id, continuation: continuation))
                    if state.queues[tenant]?.count == 1 { state.ring.append(tenant) }
                    state.waiting += 1
                    return .queued
                }
                switch decision {
                case .run: continuation.resume()
                case .queued: break
                case .refuse(let seconds): continuation.resume(throwing: KDFOverloaded(retryAfterSeconds: seconds))
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let removed = state.withLockedValue { state -> Waiter? in
                if let waiter = state.remove(id: id) { return waiter }
                state.cancelledEarly.insert(id)
                return nil
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Ends a job of `tenant` (one `acquire` of it): gives the slot to the next job, and folds `ranFor`
    /// into the average job time.
    public func release(tenant: String, ranFor: Duration) {
        let next = state.withLockedValue { state -> Waiter? in
            let sample = Double(max(1, ranFor.nanoseconds))
            state.averageNanos = state.averageNanos * 0.8 + sample * 0.2
            state.finished(tenant)
            if let waiter = state.popNext() { return waiter }  // the slot passes on: `running` stays
            state.running -= 1
            return nil
        }
        next?.continuation.resume()
    }
}
