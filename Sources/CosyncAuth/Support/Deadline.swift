import NIOConcurrencyHelpers

extension Duration {
    /// Whole nanoseconds, clamped at zero (for swift-metrics timers and logged durations).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(0, seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000)
    }
}

public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var description: String { "timed out" }
}

/// Runs `body`, throwing `DeadlineExceeded` when it takes longer than `limit`, or `CancellationError`
/// as soon as the caller is cancelled. The body runs in an unstructured task so that a call that
/// ignores cancellation (a connect to a silent host) cannot hold the caller; it is cancelled when the
/// deadline passes or the caller is cancelled.
@discardableResult
public func withDeadline<T: Sendable>(
    _ limit: Duration, abandonWhen: (@Sendable () -> (any Error)?)? = nil, _ body: @Sendable @escaping () async throws -> T
) async throws -> T {
    let work = Task { try await body() }
    let waiting = NIOLockedValueBox<CheckedContinuation<T, any Error>?>(nil)
    let take: @Sendable () -> CheckedContinuation<T, any Error>? = {
        waiting.withLockedValue { value in
            defer { value = nil }
            return value
        }
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            waiting.withLockedValue { $0 = continuation }
            if Task.isCancelled {
                take()?.resume(throwing: CancellationError())
                work.cancel()
            }
            let timer = Task {
                // With `abandonWhen`, the wait is also given up as soon as it returns an error
                // (checked every 250 ms): a request waiting on a database that just went away.
                let end = ContinuousClock.now + limit
                while ContinuousClock.now < end {
                    let step = min(end - ContinuousClock.now, abandonWhen == nil ? limit : .milliseconds(250))
                    guard (try? await Task.sleep(for: step)) != nil else { return }
                    if let reason = abandonWhen?() {
                        take()?.resume(throwing: reason)
                        work.cancel()
                        return
                    }
                }
                // Answer first, then cancel: a body that fails fast on cancellation must not win.
                take()?.resume(throwing: DeadlineExceeded())
                work.cancel()
            }
            Task {
                let result = await work.result
                timer.cancel()
                take()?.resume(with: result)
            }
        }
    } onCancel: {
        // The caller gives up at once; `body` is cancelled (a task it only awaits is not).
        take()?.resume(throwing: CancellationError())
        work.cancel()
    }
}

/// Runs `body` so that the caller returns as soon as it is cancelled, even when `body` waits on
/// something that misses the cancellation: a connection-pool lease requested just as a shutting-down
/// service was cancelled, with PostgreSQL down, is served only when a connection opens, and held the
/// service (and the server's shutdown) until ServiceLifecycle trapped (seen in the ops dbdown test).
/// The abandoned body is cancelled too and ends whenever it notices.
public func abandoningOnCancel<T: Sendable>(_ body: @Sendable @escaping () async throws -> T) async throws -> T {
    try await withDeadline(.seconds(365 * 24 * 3600), body)
}

/// Deadlines for many concurrent calls (every request of the server), kept by one clock task rather
/// than a timer task per call: `withDeadline` starts three tasks and a sleeping timer for each call,
/// which showed in a cheap request's profile (timer heap and task switches, issue 24). Each call here
/// costs one task (its body, so that a body stuck on a dead connection can be left behind), one
/// continuation and a table entry. The clock looks every `tick` (deadlines are kept to within it) and
/// stops while no call is waiting. `abandonWhen`, asked on each tick while calls wait, ends every
/// waiting call at once with its error (a database that just went away).
public final class DeadlineWatch: Sendable {
    let tick: Duration
    let abandonWhen: (@Sendable () -> (any Error)?)?
    private let table = NIOLockedValueBox(Table())

    struct Table {
        var next: UInt64 = 0
        var calls: [UInt64: (deadline: ContinuousClock.Instant, expire: @Sendable (any Error) -> Void)] = [:]
        var clockRunning = false
    }

    public init(tick: Duration = .milliseconds(250), abandonWhen: (@Sendable () -> (any Error)?)? = nil) {
        self.tick = tick
        self.abandonWhen = abandonWhen
    }

    /// Runs `body`, throwing `DeadlineExceeded` when it takes longer than `limit` (give or take a
    /// tick), the error of `abandonWhen`, or `CancellationError` as soon as the caller is cancelled. In
    /// each case `body` is cancelled and left to finish on its own.
    public func run<T: Sendable>(_ limit: Duration, _ body: @Sendable @escaping () async throws -> T) async throws -> T {
        let slot = DeadlineSlot<T>()
        let id = register(deadline: ContinuousClock.now + limit) { error in slot.settle(.failure(error)) }
        defer { unregister(id) }
        slot.start(
            Task {
                do { slot.settle(.success(try await body())) } catch { slot.settle(.failure(error)) }
            })
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in slot.wait(continuation) }
        } onCancel: {
            slot.settle(.failure(CancellationError()))
        }
    }

    private func register(deadline: ContinuousClock.Instant, expire: @escaping @Sendable (any Error) -> Void) -> UInt64 {
        let (id, startClock) = table.withLockedValue { table -> (UInt64, Bool) in
            table.next &+= 1
            table.calls[table.next] = (deadline, expire)
            defer { table.clockRunning = true }
            return (table.next, !table.clockRunning)
        }
        if startClock { Task { await self.runClock() } }
        return id
    }

    private func unregister(_ id: UInt64) {
        table.withLockedValue { _ = $0.calls.removeValue(forKey: id) }
    }

    private func runClock() async {
        while true {
            try? await Task.sleep(for: tick)
            let reason = abandonWhen?()
            let now = ContinuousClock.now
            let due: [(any Error, @Sendable (any Error) -> Void)]? = table.withLockedValue { table in
                if table.calls.isEmpty {
                    table.clockRunning = false
                    return nil
                }
                var due: [(any Error, @Sendable (any Error) -> Void)] = []
                for (id, call) in table.calls {
                    if let reason {
                        due.append((reason, call.expire))
                    } else if call.deadline <= now {
                        due.append((DeadlineExceeded(), call.expire))
                    } else {
                        continue
                    }
                    table.calls.removeValue(forKey: id)
                }
                return due
            }
            guard let due else { return }
            for (error, expire) in due { expire(error) }
        }
    }
}

/// One call of `DeadlineWatch.run`: its outcome (the body's result, or why it was given up) is taken
/// once, and handed to the caller's continuation whichever of the two comes first.
final class DeadlineSlot<T: Sendable>: Sendable {
    private struct State {
        var outcome: Result<T, any Error>?
        var continuation: CheckedContinuation<T, any Error>?
        var work: Task<Void, Never>?
        var resumed = false
    }
    private let state = NIOLockedValueBox(State())

    func start(_ work: Task<Void, Never>) {
        let settled = state.withLockedValue { state -> Bool in
            state.work = work
            return state.outcome != nil
        }
        if settled { work.cancel() }
    }

    /// The first outcome wins; a failure cancels the body.
    func settle(_ outcome: Result<T, any Error>) {
        let (resume, work) = state.withLockedValue { state -> (CheckedContinuation<T, any Error>?, Task<Void, Never>?) in
            guard state.outcome == nil else { return (nil, nil) }
            state.outcome = outcome
            let failed: Bool
            if case .failure = outcome { failed = true } else { failed = false }
            guard let continuation = state.continuation, !state.resumed else { return (nil, failed ? state.work : nil) }
            state.resumed = true
            return (continuation, failed ? state.work : nil)
        }
        resume?.resume(with: outcome)
        work?.cancel()
    }

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let outcome = state.withLockedValue { state -> Result<T, any Error>? in
            guard let outcome = state.outcome else {
                state.continuation = continuation
                return nil
            }
            state.resumed = true
            return outcome
        }
        if let outcome { continuation.resume(with: outcome) }
    }
}
