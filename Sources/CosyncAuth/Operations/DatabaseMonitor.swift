import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle

/// Probes PostgreSQL once a second on a connection of its own (outside the pool, so a busy pool is
/// not mistaken for a dead database), and records what operators watch:
///
/// - `cosync_db_up` (1/0) and `cosync_db_probe_seconds`: whether `SELECT 1` answered within
///   `probeTimeout`. While it does not, `ServerState.isDatabaseUp` is false and the HTTP layer answers
///   requests at once with 503 (see `AvailabilityMiddleware`) instead of letting them wait for a pool
///   that cannot connect. The pool itself reconnects on its own when PostgreSQL is back.
/// - `cosync_db_pool_acquire_seconds`: how long taking a connection from this node's pool took
///   (PostgresNIO does not publish its queue; this is the wait a request sees).
/// - `cosync_db_connections{state}`: this node's pool connections in `pg_stat_activity`
///   (`active`, `idle`, `idle_in_transaction`).
/// - `cosync_outbox_backlog` and `cosync_outbox_oldest_age_seconds`: messages queued or being sent,
///   and the age of the oldest (every node reports the same database-wide figure).
public struct DatabaseMonitor: Service {
    let database: DatabaseURL
    let client: PostgresClient
    let state: ServerState
    let logger: Logger
    let interval: Duration
    let probeTimeout: Duration

    public init(
        database: DatabaseURL, client: PostgresClient, state: ServerState, logger: Logger,
        interval: Duration = .seconds(1), probeTimeout: Duration = .seconds(2)
    ) {
        self.database = database
        self.client = client
        self.state = state
        self.logger = logger
        self.interval = interval
        self.probeTimeout = probeTimeout
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown { await probeLoop() }
    }

    /// The probe loop without the service wrapper (tests run it in a task and cancel it).
    public func probeLoopForTests() async { await probeLoop() }

    func probeLoop() async {
        let up = Gauge(label: "cosync_db_up")
        let probe = Timer(label: "cosync_db_probe_seconds", preferredDisplayUnit: .seconds)
        var connection: PostgresConnection?
        var failures = 0
        var probeConnectionFailing = false
        while !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                if connection == nil || connection?.isClosed == true {
                    connection = try await withDeadline(probeTimeout) { [database, logger] in
                        try await PostgresConnection.connect(
                            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: try database.connectionConfiguration(),
                            id: 0, logger: logger)
                    }
                }
                if let probing = connection {
                    try await withDeadline(probeTimeout) { [logger] in
                        try await probing.query("SELECT 1", logger: logger)
                        return true
                    }
                }
                failures = 0
                probeConnectionFailing = false
            } catch {
                try? await connection?.close()
                connection = nil
                // The probe's own connection may fail while the pool's are fine (PostgreSQL at
                // max_connections): ask the pool before counting a failure.
                let poolAnswers = (try? await withDeadline(.seconds(1)) { [client, logger] in
                    try await client.query("SELECT 1", logger: logger)
                    return true
                }) ?? false
                if poolAnswers {
                    if !probeConnectionFailing {
                        logger.warning("database probe connection failed, the pool still answers", metadata: ["reason": "\(describeForOperator(error))"])
                    }
                    probeConnectionFailing = true
                    failures = 0
                } else {
                    failures += 1
                    if failures == 1 { logger.warning("database probe failed", metadata: ["reason": "\(describeForOperator(error))"]) }
                }
            }
            probe.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
            // Two failed probes in a row (1-3 s) mark the database down; one success marks it up.
            let ok = failures < 2
            up.record(ok ? 1 : 0)
            if state.setDatabaseUp(ok) {
                if ok {
                    logger.notice("database reachable again")
                } else {
                    logger.error("database unreachable: API requests answer 503 until it is back", metadata: ["host": "\(database.host)"])
                }
            }
            if failures == 0 { await collect() }
            try? await Task.sleep(until: started + interval)
        }
        try? await connection?.close()
    }

    /// The pool and outbox figures; a failure here only skips one sample.
    func collect() async {
        let acquire = Timer(label: "cosync_db_pool_acquire_seconds", preferredDisplayUnit: .seconds)
        do {
            let waitStarted = ContinuousClock.now
            try await withDeadline(probeTimeout) { [client, logger, database] in
                try await client.withConnection { db -> Bool in
                    acquire.recordNanoseconds((ContinuousClock.now - waitStarted).nanoseconds)
                    let pool = try await db.query(
                        """
                        SELECT count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE state = 'idle'),
                               count(*) FILTER (WHERE state LIKE 'idle in transaction%')
                        FROM pg_stat_activity WHERE application_name = \(database.applicationName)
                        """, logger: logger)
                    for try await (active, idle, inTransaction) in pool.decode((Int, Int, Int).self) {
                        Gauge(label: "cosync_db_connections", dimensions: [("state", "active")]).record(active)
                        Gauge(label: "cosync_db_connections", dimensions: [("state", "idle")]).record(idle)
                        Gauge(label: "cosync_db_connections", dimensions: [("state", "idle_in_transaction")]).record(inTransaction)
                    }
                    let outbox = try await db.query(
                        """
                        SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
                        FROM messages WHERE status IN ('queued', 'sending')
                        """, logger: logger)
                    for try await (backlog, age) in outbox.decode((Int, Double).self) {
                        Gauge(label: "cosync_outbox_backlog").record(backlog)
                        Gauge(label: "cosync_outbox_oldest_age_seconds").record(age)
                    }
                    return true
                }
            }
        } catch {
            logger.debug("metrics sample skipped", metadata: ["reason": "\(describeForOperator(error))"])
        }
    }
}

extension Duration {
    /// Whole nanoseconds, clamped at zero (for swift-metrics timers).
    var nanoseconds: Int64 {
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
