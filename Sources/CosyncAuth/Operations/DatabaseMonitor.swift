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
    /// How often the pool and outbox figures are sampled (each sample is a query or two; at 10 s they
    /// were a quarter of an idle node's transactions).
    var collectInterval: Duration = .seconds(30)

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
        var collected: ContinuousClock.Instant?
        while !Task.isCancelled {
            let started = ContinuousClock.now
            // The app cache listener pings its pooled connection every 2 s: while those pings answer,
            // they stand for this probe (an idle node's transactions, issue 24). When that connection
            // ends, the contact is forgotten at once and this loop probes every `interval` again.
            // (Within 1.5 pings: a ping that hangs hands the watch back to this probe 1 s after it was due.
            // At 1.2 pings, the jitter of the two loops let a probe through every few seconds: 0.2 of
            // the idle node's 1.2 transactions/s.)
            if failures == 0, state.heardFromDatabase(within: .milliseconds(3000)) {
                up.record(1)
                if state.setDatabaseUp(true) { logger.notice("database reachable again") }
                if collected.map({ started - $0 >= collectInterval }) ?? true {
                    collected = started
                    _ = try? await abandoningOnCancel { await collect(); return true }
                }
                try? await Task.sleep(until: started + interval)
                continue
            }
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
                        try await DatabaseStatusStore.ping(probing, logger: logger)
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
                    try await client.withConnection { try await DatabaseStatusStore.ping($0, logger: logger) }
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
            if failures == 0, collected.map({ started - $0 >= collectInterval }) ?? true {
                collected = started
                _ = try? await abandoningOnCancel { await collect(); return true }
            }
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
                    if let pool = try await DatabaseStatusStore.connectionStates(db, applicationName: database.applicationName, logger: logger) {
                        Gauge(label: "cosync_db_connections", dimensions: [("state", "active")]).record(pool.active)
                        Gauge(label: "cosync_db_connections", dimensions: [("state", "idle")]).record(pool.idle)
                        Gauge(label: "cosync_db_connections", dimensions: [("state", "idle_in_transaction")]).record(pool.inTransaction)
                    }
                    let (backlog, age) = try await OutboxStore.backlog(db, logger: logger)
                    Gauge(label: "cosync_outbox_backlog").record(backlog)
                    Gauge(label: "cosync_outbox_oldest_age_seconds").record(age)
                    return true
                }
            }
        } catch {
            logger.debug("metrics sample skipped", metadata: ["reason": "\(describeForOperator(error))"])
        }
    }
}
