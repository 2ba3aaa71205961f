import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import ServiceLifecycle

/// Sends webhook deliveries in small batches per lane, on every node. Like the e-mail outbox:
///
/// 1. **claim**: one statement takes up to `batchSize` of the oldest due deliveries
///    (`FOR UPDATE SKIP LOCKED`) whose endpoint is enabled and that no earlier undelivered event of the
///    same user on the same endpoint holds back; they become `sending`, their attempt is counted and
///    `next_attempt` moves forward by the lease;
/// 2. **send**: the signed POSTs of the batch, at once, outside any transaction, each under
///    `settings.timeout`;
/// 3. **mark**: the delivered ones in one statement (with their attempt-log rows); each failed one back
///    to `pending` after the next wait of the retry schedule (with jitter), or `dead` once the schedule
///    is used up. Every attempt is logged in `webhook_attempts`.
///
/// Batches exist for the cost under load: a login that writes one event for two endpoints should cost
/// its node next to nothing beyond the bcrypt hash (`deploy/bench/webhooks.sh` measures it). One claim
/// and one mark statement per batch replace one claim and a five-statement transaction per delivery.
///
/// A node that dies between 1 and 3 leaves the delivery `sending`; once its lease runs out another
/// worker sends it again with the same `webhook-id`, so receivers can drop the duplicate.
public struct WebhookWorker: Service {
    let client: PostgresClient
    let box: SecretBox
    let settings: WebhookSettings
    let logger: Logger
    let pollInterval: Duration
    let lanes: Int
    let batchSize: Int
    let leaseSeconds: Int
    /// The longest a lane waits for its batch (all its waves of sends) before it claims again.
    let batchTimeLimit: Duration

    public init(
        client: PostgresClient, box: SecretBox, settings: WebhookSettings, logger: Logger, pollInterval: Duration = .milliseconds(500),
        lanes: Int = 4, batchSize: Int = 16
    ) {
        self.client = client
        self.box = box
        self.settings = settings
        self.logger = logger
        self.pollInterval = pollInterval
        self.lanes = max(1, lanes)
        self.batchSize = min(max(1, batchSize), 256)
        // A batch sends in waves of `sendConcurrency`, each at most one timeout long: the lease covers
        // them all, so no delivery of a batch still sending is claimed again by another lane.
        let waves = (self.batchSize + Self.sendConcurrency - 1) / Self.sendConcurrency
        self.leaseSeconds = waves * Int(settings.timeout.components.seconds) + 30
        self.batchTimeLimit = settings.timeout * waves + .seconds(5)
    }

    /// One HTTP client for every webhook: redirects are not followed (a redirect could lead past the
    /// address check), and it lives as long as the process.
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(10))
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    public func run() async throws {
        // Lane 0 always polls; the others join while claims come back full (a backlog) or while lane 0
        // is busy sending (a slow endpoint must not hold everyone's deliveries), so that a steady
        // trickle is claimed in batches by one lane instead of one row at a time by all of them.
        struct Activity { var backlog = false, firstLaneSending = false }
        let activity = NIOLockedValueBox(Activity())
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    await runClaimLane(
                        pollInterval: pollInterval, inFlightLimit: batchTimeLimit,
                        claim: { () async throws -> [Claimed]? in
                            if lane > 0, !activity.withLockedValue({ $0.backlog || $0.firstLaneSending }) { return nil }
                            let batch = try await claim(limit: batchSize)
                            activity.withLockedValue {
                                $0.backlog = batch.count >= batchSize
                                if lane == 0 { $0.firstLaneSending = !batch.isEmpty }
                            }
                            return batch.isEmpty ? nil : batch
                        },
                        deliver: { (batch: [Claimed]) in
                            defer { if lane == 0 { activity.withLockedValue { $0.firstLaneSending = false } } }
                            try await deliver(batch)
                        },
                        drained: { $0.count < batchSize })
                }
            }
            group.addTask {
                // The sample waits for a pooled connection: bounded, and dropped at a graceful shutdown, so
                // a node whose database is down still stops within its shutdown budget.
                while !Task.isCancelled, !Task.isShuttingDownGracefully {
                    _ = try? await cancelWhenGracefulShutdown {
                        try await withDeadline(.seconds(2)) { [self] in await sampleMetrics(); return true }
                    }
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(5)) }
                }
            }
        }
    }

    /// Sends due deliveries, batch by batch, until at least `limit` were handled or none is due. Returns
    /// how many were handled (for tests).
    @discardableResult
    public func deliverDue(limit: Int = 20) async throws -> Int {
        var handled = 0
        while handled < limit {
            let batch = try await claim(limit: min(batchSize, limit - handled))
            if batch.isEmpty { break }
            try await deliver(batch)
            handled += batch.count
        }
        return handled
    }

    func sampleMetrics() async {
        do {
            let (count, age) = try await client.withConnection { try await EventStore.backlog($0, logger: logger) }
            Gauge(label: "cosync_webhook_backlog").record(count)
            Gauge(label: "cosync_webhook_oldest_undelivered_seconds").record(age)
        } catch {
            logger.debug("webhook metrics sample skipped", metadata: ["reason": "\(describeForOperator(error))"])
        }
    }

    struct Claimed: Sendable {
        let delivery: Int64
        let endpoint: UUID
        let appRef: Int64
        let appId: String
        let url: String
        let event: UUID
        let type: String
        let body: String
        let attempt: Int
        let roundFailures: Int
        let secret: Data
        let previousSecret: Data?
    }

    /// Step 1. An earlier delivery of the same user to the same endpoint that is still pending or being
    /// sent holds this one back (the per-user order; within one batch too, since the check reads the
    /// statement's snapshot, where the earlier one is still pending); a dead one does not.
    ///
    /// Fairness: an app that has `lanes - 1` full batches of deliveries in flight (counted across all
    /// nodes) gets none claimed until some finish, so a tenant with slow endpoints cannot take every
    /// lane; and a batch's sends run side by side (`sendConcurrency` at a time), so other tenants'
    /// deliveries in the same batch are not held up behind a slow one. A suspended app's deliveries wait.
    func claim(limit: Int) async throws -> [Claimed] {
        // Counted in deliveries: `lanes - 1` full batches.
        let perAppInFlight = max(1, lanes - 1) * batchSize
        let rows = try await client.query(
            """
            WITH due AS (
                SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id JOIN apps a ON a.id = w.app_ref
                WHERE d.status IN ('pending', 'sending') AND d.next_attempt <= now() AND w.enabled AND a.status = 'active'
                  AND (SELECT count(*) FROM webhook_deliveries s JOIN webhook_endpoints sw ON sw.id = s.endpoint_id
                       WHERE sw.app_ref = w.app_ref AND s.status = 'sending' AND s.next_attempt > now()) < \(perAppInFlight)
                  AND NOT EXISTS (
                      SELECT 1 FROM webhook_deliveries p
                      WHERE d.user_id IS NOT NULL AND p.endpoint_id = d.endpoint_id AND p.user_id = d.user_id
                        AND p.event_ref < d.event_ref AND p.status IN ('pending', 'sending'))
                ORDER BY d.next_attempt, d.id LIMIT \(limit)
                FOR UPDATE OF d SKIP LOCKED
            )
            UPDATE webhook_deliveries d SET status = 'sending', attempts = d.attempts + 1,
                next_attempt = now() + make_interval(secs => \(leaseSeconds)::int)
            FROM due, webhook_endpoints w, events e, apps a
            WHERE d.id = due.id AND w.id = d.endpoint_id AND e.id = d.event_ref AND a.id = w.app_ref
            RETURNING d.id, w.id, a.id, a.app_id, w.url, e.event_id, e.type, e.body, d.attempts, d.round_failures, w.secret_sealed,
                      CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret_sealed END
            """, logger: logger)
        var claimed: [Claimed] = []
        for try await c in rows.decode((Int64, UUID, Int64, String, String, UUID, String, String, Int, Int, Data, Data?).self) {
            claimed.append(Claimed(
                delivery: c.0, endpoint: c.1, appRef: c.2, appId: c.3, url: c.4, event: c.5, type: c.6, body: c.7, attempt: c.8,
                roundFailures: c.9, secret: c.10, previousSecret: c.11))
        }
        // The statement's order is not the claim order; the per-user order only needs the ids.
        return claimed.sorted { $0.delivery < $1.delivery }
    }

    /// The outcome of one attempt.
    struct Outcome: Sendable {
        var status: Int?
        var error: String?
        var success: Bool { status.map { (200..<300).contains($0) } ?? false }
    }

    /// One finished send: what was claimed, what happened, in how many milliseconds.
    /// Sends of one batch in flight at once.
    static let sendConcurrency = 4

    struct Sent: Sendable {
        let claimed: Claimed
        let outcome: Outcome
        let latency: Int
    }

    /// Steps 2 and 3 for a batch: the sends run at once; then one statement marks the delivered ones
    /// and each failure is marked on its own (it may disable its endpoint).
    func deliver(_ batch: [Claimed]) async throws {
        let sent = await withTaskGroup(of: Sent.self, returning: [Sent].self) { group in
            @Sendable func timed(_ claimed: Claimed) async -> Sent {
                let started = ContinuousClock.now
                let outcome = await send(claimed)
                let elapsed = ContinuousClock.now - started
                return Sent(claimed: claimed, outcome: outcome, latency: Int(min(elapsed.nanoseconds / 1_000_000, Int64(Int32.max))))
            }
            var pending = batch[...]
            var inFlight = 0
            var all: [Sent] = []
            // At most `sendConcurrency` sends at a time: one finishing starts the next.
            while true {
                while inFlight < Self.sendConcurrency, let next = pending.popFirst() {
                    group.addTask { await timed(next) }
                    inFlight += 1
                }
                guard let one = await group.next() else { break }
                inFlight -= 1
                all.append(one)
            }
            return all
        }
        var firstError: (any Error)?
        let delivered = sent.filter { $0.outcome.success }
        if !delivered.isEmpty {
            do {
                try await markDelivered(delivered)
            } catch {
                // They stay `sending` until their lease runs out; then they are sent again, same webhook-id.
                logger.error(
                    "could not record webhook deliveries",
                    metadata: ["count": "\(delivered.count)", "error": "\(describeForOperator(error))"])
                firstError = error
            }
        }
        for failed in sent where !failed.outcome.success {
            do {
                try await markFailed(failed.claimed, outcome: failed.outcome, latency: failed.latency)
            } catch {
                logger.error(
                    "could not record a webhook attempt",
                    metadata: ["app": "\(failed.claimed.appId)", "webhook": "\(failed.claimed.endpoint)",
                               "error": "\(describeForOperator(error))"])
                firstError = firstError ?? error
            }
        }
        if let firstError { throw firstError }
    }

    /// The headers of one attempt: the webhook-id is the event's, whatever the attempt.
    func headers(_ claimed: Claimed, timestamp: Int) throws -> [(String, String)] {
        let purpose = WebhookAdministration.purpose(claimed.endpoint)
        var secrets = [String(decoding: try box.open(claimed.secret, purpose: purpose), as: UTF8.self)]
        if let previous = claimed.previousSecret {
            secrets.append(String(decoding: try box.open(previous, purpose: purpose), as: UTF8.self))
        }
        let id = WebhookMessageId.of(claimed.event)
        return [
            ("content-type", "application/json"), ("user-agent", "CosyncAuth-Webhooks/1"), ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", WebhookSignature.header(secrets: secrets, id: id, timestamp: timestamp, body: claimed.body)),
        ]
    }

    func send(_ claimed: Claimed) async -> Outcome {
        if let refusal = await settings.guardRule.check(claimed.url) {
            return Outcome(status: nil, error: "refused: \(refusal.message)")
        }
        do {
            var request = HTTPClientRequest(url: claimed.url)
            request.method = .POST
            for (name, value) in try headers(claimed, timestamp: Int(Date().timeIntervalSince1970)) {
                request.headers.add(name: name, value: value)
            }
            request.body = .bytes(ByteBuffer(string: claimed.body))
            let limit = settings.timeout
            let prepared = request
            let status = try await withDeadline(limit) {
                let response = try await Self.http.execute(prepared, timeout: .seconds(limit.components.seconds))
                _ = try? await response.body.collect(upTo: 64 * 1024)
                return Int(response.status.code)
            }
            return Outcome(status: status, error: (200..<300).contains(status) ? nil : "HTTP \(status)")
        } catch is DeadlineExceeded {
            return Outcome(status: nil, error: "timed out after \(settings.timeout)")
        } catch {
            return Outcome(status: nil, error: "\(type(of: error))")
        }
    }

    /// One statement (so one implicit transaction) for every delivered one of a batch: the delivery is
    /// marked (unless it is no longer this claim's: its lease ran out and another worker took it), the
    /// attempt logged (it was made either way), and the endpoint's failure streak ended (written only
    /// when there is one, so that the lanes do not queue on the endpoint's row lock for a no-op).
    func markDelivered(_ sent: [Sent]) async throws {
        let ids = sent.map(\.claimed.delivery)
        let attempts = sent.map { Int64($0.claimed.attempt) }
        let endpoints = sent.map(\.claimed.endpoint)
        let statuses = sent.map { Int64($0.outcome.status ?? 0) }
        let latencies = sent.map { Int64($0.latency) }
        try await client.query(
            """
            WITH batch AS (
                SELECT * FROM unnest(\(ids)::int8[], \(attempts)::int8[], \(endpoints)::uuid[], \(statuses)::int8[], \(latencies)::int8[])
                    AS b(id, attempt, endpoint_id, http_status, latency_ms)
            ), done AS (
                UPDATE webhook_deliveries d SET status = 'delivered', delivered_at = now(), last_error = NULL
                FROM batch b WHERE d.id = b.id AND d.status = 'sending' AND d.attempts = b.attempt
            ), logged AS (
                INSERT INTO webhook_attempts (delivery_ref, endpoint_id, attempt, http_status, error, latency_ms)
                SELECT b.id, b.endpoint_id, b.attempt, b.http_status, NULL, b.latency_ms FROM batch b
            )
            UPDATE webhook_endpoints SET consecutive_failures = 0
            WHERE id IN (SELECT endpoint_id FROM batch) AND consecutive_failures <> 0
            """, logger: logger)
    }

    /// The wait before the next attempt after `failures` failures in this round, with ±20 % jitter, or
    /// nil when the schedule is used up.
    static func backoff(failures: Int, schedule: [Double]) -> Double? {
        guard failures >= 1, failures <= schedule.count else { return nil }
        return schedule[failures - 1] * Double.random(in: 0.8...1.2)
    }

    func markFailed(_ claimed: Claimed, outcome: Outcome, latency: Int) async throws {
        let failures = claimed.roundFailures + 1
        let wait = Self.backoff(failures: failures, schedule: settings.retrySchedule)
        let reason = outcome.error ?? "failed"
        Telemetry.webhookFailure()
        let disabled: Bool = try await client.transaction(logger: logger) { db in
            try await db.query(
                """
                UPDATE webhook_deliveries SET last_error = \(reason), round_failures = \(failures),
                    status = \(wait == nil ? "dead" : "pending"),
                    next_attempt = now() + make_interval(secs => \(wait ?? 0)::float8)
                WHERE id = \(claimed.delivery) AND status = 'sending' AND attempts = \(claimed.attempt)
                """, logger: logger)
            try await logAttempt(db, claimed, outcome: outcome, latency: latency)
            let rows = try await db.query(
                """
                UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1,
                    enabled = CASE WHEN consecutive_failures + 1 >= \(settings.disableAfterFailures) THEN false ELSE enabled END,
                    disabled_reason = CASE WHEN enabled AND consecutive_failures + 1 >= \(settings.disableAfterFailures)
                        THEN \("disabled after \(settings.disableAfterFailures) failed attempts in a row") ELSE disabled_reason END
                WHERE id = \(claimed.endpoint)
                RETURNING (NOT enabled) AND consecutive_failures = \(settings.disableAfterFailures)
                """, logger: logger)
            var justDisabled = false
            for try await flag in rows.decode(Bool.self) { justDisabled = flag }
            if justDisabled {
                try await EventStore.park(db, endpoint: claimed.endpoint, logger: logger)
                try await AuditLog.record(
                    db, appRef: claimed.appRef, appId: claimed.appId, actor: "webhook-worker", action: "webhook.disable", status: "error",
                    detail: ["webhookId": .string(claimed.endpoint.uuidString.lowercased()),
                             "reason": .string("\(settings.disableAfterFailures) failed attempts in a row")],
                    logger: logger)
            }
            return justDisabled
        }
        if disabled {
            logger.warning(
                "webhook endpoint disabled after repeated failures",
                metadata: ["app": "\(claimed.appId)", "webhook": "\(claimed.endpoint)", "failures": "\(settings.disableAfterFailures)"])
        }
        logger.info(
            "webhook delivery failed",
            metadata: ["app": "\(claimed.appId)", "webhook": "\(claimed.endpoint)", "message": "\(WebhookMessageId.of(claimed.event))",
                       "attempt": "\(claimed.attempt)", "reason": "\(reason)", "dead": "\(wait == nil)"])
    }

    func logAttempt(_ db: PostgresConnection, _ claimed: Claimed, outcome: Outcome, latency: Int) async throws {
        try await db.query(
            """
            INSERT INTO webhook_attempts (delivery_ref, endpoint_id, attempt, http_status, error, latency_ms)
            VALUES (\(claimed.delivery), \(claimed.endpoint), \(claimed.attempt), \(outcome.status), \(outcome.error), \(latency))
            """, logger: logger)
    }
}

extension CosyncServices {
    /// The admin operations on webhook endpoints.
    public var webhooks: WebhookAdministration { WebhookAdministration(apps: apps, settings: configuration.webhooks) }

    /// The webhook delivery worker for this configuration.
    public func webhookWorker(pollInterval: Duration? = nil) -> WebhookWorker {
        WebhookWorker(
            client: client, box: configuration.secretBox, settings: configuration.webhooks, logger: logger,
            pollInterval: pollInterval ?? configuration.courierPollInterval)
    }
}
