import NIOConcurrencyHelpers

/// Wakes the outbox and webhook workers when work arrives, so that an idle node does not poll the
/// database (issue 24: an idle node ≤ 1 transaction per second). `WorkListener` signals it on every
/// `NOTIFY cosync_work` (sql/0030 sends one when a message or delivery is queued, at its commit; the
/// queueing node hears its own notification like every other node). While no listener is connected
/// the workers poll at their old pace (`isListening` false), so nothing waits on a notification that
/// cannot come. The same type wakes the key pool's filler when a creation took a key.
public final class WorkSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var listening = false
    }
    private let state = NIOLockedValueBox(State())

    public init() {}

    /// The count of signals so far: read it before looking for work, and pass it to `wait`, so that a
    /// signal that arrives between the look and the wait is not missed.
    public var generation: UInt64 { state.withLockedValue { $0.generation } }

    /// Whether notifications arrive (a listener is connected).
    public var isListening: Bool { state.withLockedValue { $0.listening } }

    public func setListening(_ listening: Bool) {
        state.withLockedValue { $0.listening = listening }
        // Whoever waits for a long while because notifications were coming must now poll again.
        if !listening { signal() }
    }

    /// Wakes every waiter.
    public func signal() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns when a signal newer than `since` arrives, after `limit`, or when the task is cancelled.
    public func wait(since: UInt64, upTo limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: limit) }
            group.addTask { await self.waitForSignal(since: since) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal(since: UInt64) async {
        let id = state.withLockedValue { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLockedValue { state -> Bool in
                    if state.generation != since || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
