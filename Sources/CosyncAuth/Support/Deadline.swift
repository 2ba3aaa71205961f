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
