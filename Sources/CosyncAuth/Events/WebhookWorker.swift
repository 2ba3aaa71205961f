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
/// 2. **send**: the signed POSTs of the batch, outside any transaction, each under `settings.timeout`:
///    the endpoints of the batch side by side, each endpoint's deliveries `sendConcurrency` at a time;
///    each POST goes to an address the SSRF guard checked just before (`WebhookConnector`);
/// 3. **mark**: each delivery as soon as its POST has finished, on its own: delivered (one statement,
///    with its attempt-log row), or back to `pending` after the next wait of the retry schedule (with
///    jitter), or `dead` once the schedule is used up. Every attempt is logged in `webhook_attempts`.
///
/// Batches exist for the cost under load: a login that writes one event for two endpoints should cost
/// its node next to nothing beyond the bcrypt hash (`tools/bench/webhooks.sh` measures it): one claim
/// statement per batch, and one mark statement per delivered message.
///
/// Marks are per delivery so that nothing one endpoint (or tenant) does reaches another's: a slow or
/// hanging endpoint does not hold back the marks of the batch's other deliveries (and with them the
/// next events of their users), and an endpoint deleted while its POST is in flight only makes its own
/// mark find nothing.
///
/// A node that dies between 1 and 3 leaves the delivery `sending`; once its lease (`leaseSeconds`) runs
/// out another worker sends it again with the same `webhook-id`, so receivers can drop the duplicate.
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
    /// The node's wake-up for new deliveries (`NOTIFY cosync_work, 'webhooks'`); nil: poll.
    var wake: WorkSignal? = nil
    /// With notifications coming, how often an idle worker still looks (`COSYNC_WORKER_IDLE_POLL_MS`).
    var idlePoll: Duration = .seconds(5)

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
                        pollInterval: pollInterval, inFlightLimit: batchTimeLimit, wake: wake, idlePoll: idlePoll,
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
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(30)) }  // as the outbox's
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

    /// A claimed delivery (`EventStore.ClaimedDelivery`).
    typealias Claimed = EventStore.ClaimedDelivery

    /// Step 1. An earlier delivery of the same user to the same endpoint that is still pending or being
    /// sent holds this one back (the per-user order; within one batch too, since the check reads the
    /// statement's snapshot, where the earlier one is still pending); a dead one does not.
    ///
    /// Fairness: an app that has `lanes - 1` full batches of deliveries to its healthy endpoints in
    /// flight (counted across all nodes) gets none claimed for them until some finish, so a tenant with
    /// slow endpoints cannot take every lane; and a batch's endpoints are sent to side by side, so other
    /// endpoints' deliveries in the same batch are not held up behind a slow one. A suspended app's
    /// deliveries wait.
    ///
    /// A failing endpoint (its last attempt failed: `consecutive_failures > 0`) does not count against
    /// its app's slots, and gets deliveries claimed only while none of its own is in flight; `deliver`
    /// then sends the first alone and puts the others back if it fails. So a dead endpoint, however long
    /// its backlog, holds one POST in flight across all nodes and none of its app's slots; its first
    /// success makes it healthy again.
    ///
    /// What is in flight is counted once per statement: deliveries `sending` under a lease that has not
    /// run out (a lease ends at most `leaseSeconds` from now, which keeps the scan off the far future).
    func claim(limit: Int) async throws -> [Claimed] {
        // Counted in deliveries: `lanes - 1` full batches.
        let perAppInFlight = max(1, lanes - 1) * batchSize
        return try await client.withConnection {
            try await EventStore.claimDeliveries(
                $0, limit: limit, perAppInFlight: perAppInFlight, leaseSeconds: leaseSeconds, logger: logger)
        }
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

    /// Steps 2 and 3 for a batch: the batch's endpoints side by side, each endpoint's deliveries
    /// `sendConcurrency` at a time (claim order), each one marked as soon as its POST has finished.
    /// Throws the first error of a mark, once every delivery of the batch is done.
    func deliver(_ batch: [Claimed]) async throws {
        var queues: [UUID: [Claimed]] = [:]
        var endpoints: [UUID] = []
        for claimed in batch {
            if queues[claimed.endpoint] == nil { endpoints.append(claimed.endpoint) }
            queues[claimed.endpoint, default: []].append(claimed)
        }
        let firstError = await withTaskGroup(of: (any Error)?.self, returning: (any Error)?.self) { group in
            for endpoint in endpoints {
                let queue = queues[endpoint] ?? []
                group.addTask { await deliver(toOneEndpoint: queue) }
            }
            var first: (any Error)?
            for await error in group { first = first ?? error }
            return first
        }
        if let firstError { throw firstError }
    }

    /// The deliveries of one endpoint: at most `sendConcurrency` POSTs at a time, one finishing starts
    /// the next. A failing endpoint's first delivery goes alone, as a probe. Once a POST fails without
    /// an answer (refused, reset, timed out), or a probe fails, the deliveries not yet started are put
    /// back as they were claimed (no attempt counted), so a dead endpoint costs one POST per batch.
    func deliver(toOneEndpoint queue: [Claimed]) async -> (any Error)? {
        var pending = queue[...]
        if queue.first?.endpointFailing == true, let probe = pending.popFirst() {
            let (outcome, error) = await sendAndMark(probe)
            if !outcome.success {
                return await putBack(Array(pending)) ?? error
            }
            if let error { return await putBack(Array(pending)) ?? error }
        }
        return await withTaskGroup(of: (Outcome, (any Error)?).self, returning: (any Error)?.self) { group in
            var inFlight = 0
            var stopped = false
            var first: (any Error)?
            while true {
                while !stopped, inFlight < Self.sendConcurrency, let next = pending.popFirst() {
                    group.addTask { await sendAndMark(next) }
                    inFlight += 1
                }
                guard let (outcome, error) = await group.next() else { break }
                inFlight -= 1
                first = first ?? error
                if outcome.status == nil, !outcome.success { stopped = true }
            }
            if !pending.isEmpty, let error = await putBack(Array(pending)) { first = first ?? error }
            return first
        }
    }

    /// Claimed deliveries that were not sent go back to `pending`, due now, their claim's attempt not
    /// counted. Those no longer this claim's (a lease that ran out) are left alone.
    func putBack(_ claimed: [Claimed]) async -> (any Error)? {
        guard !claimed.isEmpty else { return nil }
        let ids = claimed.map(\.delivery)
        let attempts = claimed.map { Int64($0.attempt) }
        do {
            try await client.withConnection { try await EventStore.putBack($0, ids: ids, attempts: attempts, logger: logger) }
            return nil
        } catch {
            logger.error(
                "could not put back unsent webhook deliveries",
                metadata: ["count": "\(claimed.count)", "error": "\(describeForOperator(error))"])
            return error
        }
    }

    /// One delivery: its POST, then its mark. Returns the outcome and the mark's error (logged here).
    func sendAndMark(_ claimed: Claimed) async -> (Outcome, (any Error)?) {
        let started = ContinuousClock.now
        let outcome = await send(claimed)
        let elapsed = ContinuousClock.now - started
        let sent = Sent(claimed: claimed, outcome: outcome, latency: Int(min(elapsed.nanoseconds / 1_000_000, Int64(Int32.max))))
        do {
            if outcome.success {
                try await markDelivered(sent)
            } else {
                try await markFailed(claimed, outcome: outcome, latency: sent.latency)
            }
            return (outcome, nil)
        } catch {
            // It stays `sending` until its lease runs out; then it is sent again, same webhook-id.
            logger.error(
                "could not record a webhook attempt",
                metadata: ["app": "\(claimed.appId)", "webhook": "\(claimed.endpoint)", "delivered": "\(outcome.success)",
                           "error": "\(describeForOperator(error))"])
            return (outcome, error)
        }
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

    /// One POST, to an address the SSRF guard checked just now (the client never resolves the host).
    /// `settings.timeout` bounds all of it: the host's resolution, the connection and the answer.
    func send(_ claimed: Claimed) async -> Outcome {
        let limit = settings.timeout
        let deadline = ContinuousClock.now + limit
        do {
            return try await withDeadline(limit) {
                let route: WebhookURLGuard.Route
                switch await settings.guardRule.route(claimed.url) {
                case .failure(let refusal): return Outcome(status: nil, error: "refused: \(refusal.message)")
                case .success(let checked): route = checked
                }
                var request = HTTPClientRequest(url: claimed.url)
                request.method = .POST
                for (name, value) in try headers(claimed, timestamp: Int(Date().timeIntervalSince1970)) {
                    request.headers.add(name: name, value: value)
                }
                request.body = .bytes(ByteBuffer(string: claimed.body))
                let prepared = request
                let remaining = max(deadline - ContinuousClock.now, .milliseconds(1))
                let status = try await WebhookConnector.shared.withClient(route, connectTimeout: limit) { http in
                    let response = try await http.execute(prepared, timeout: .nanoseconds(remaining.nanoseconds))
                    _ = try? await response.body.collect(upTo: 64 * 1024)
                    return Int(response.status.code)
                }
                return Outcome(status: status, error: (200..<300).contains(status) ? nil : "HTTP \(status)")
            }
        } catch is DeadlineExceeded {
            return Outcome(status: nil, error: "timed out after \(limit)")
        } catch let error as HTTPClientError where error == .deadlineExceeded {
            return Outcome(status: nil, error: "timed out after \(limit)")
        } catch {
            return Outcome(status: nil, error: WebhookConnector.describe(error))
        }
    }

    /// One statement (so one implicit transaction) for one delivered message. It first takes the
    /// endpoint's row (KEY SHARE), as deleting the endpoint does before it removes the deliveries: an
    /// endpoint deleted meanwhile leaves nothing to mark, and a deletion waits for this short statement
    /// (no deadlock, no error). Then the delivery is marked (unless it is no longer this claim's: its
    /// lease ran out and another worker took it), the attempt logged (it was made either way), and the
    /// endpoint's failure streak ended (written only when there is one, so that the lanes do not queue
    /// on the endpoint's row lock for a no-op).
    func markDelivered(_ sent: Sent) async throws {
        let c = sent.claimed
        let status = sent.outcome.status ?? 0
        try await client.withConnection {
            try await EventStore.markDelivered(
                $0, delivery: c.delivery, endpoint: c.endpoint, attempt: c.attempt, httpStatus: status, latency: sent.latency, logger: logger)
        }
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
        let disabled: Bool? = try await client.transaction(logger: logger) { db in
            // The endpoint's row first, as deleting the endpoint takes it before the deliveries: one
            // deleted meanwhile leaves nothing to mark (and no deadlock with the deletion).
            guard try await EventStore.lockEndpointForFailure(db, endpoint: claimed.endpoint, logger: logger) else { return nil }
            try await EventStore.markFailed(
                db, delivery: claimed.delivery, attempt: claimed.attempt, reason: reason, roundFailures: failures, wait: wait, logger: logger)
            try await EventStore.logAttempt(
                db, delivery: claimed.delivery, endpoint: claimed.endpoint, attempt: claimed.attempt, httpStatus: outcome.status,
                error: outcome.error, latency: latency, logger: logger)
            let justDisabled = try await EventStore.countEndpointFailure(
                db, endpoint: claimed.endpoint, disableAfter: settings.disableAfterFailures, logger: logger)
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
        guard let disabled else {
            logger.info(
                "webhook endpoint deleted during its attempt",
                metadata: ["app": "\(claimed.appId)", "webhook": "\(claimed.endpoint)", "reason": "\(reason)"])
            return
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
}

extension CosyncServices {
    /// The admin operations on webhook endpoints.
    public var webhooks: WebhookAdministration { WebhookAdministration(apps: apps, settings: configuration.webhooks) }

    /// The webhook delivery worker for this configuration.
    public func webhookWorker(pollInterval: Duration? = nil) -> WebhookWorker {
        var worker = WebhookWorker(
            client: client, box: configuration.secretBox, settings: configuration.webhooks, logger: logger,
            pollInterval: pollInterval ?? configuration.courierPollInterval)
        worker.wake = state.webhookWork
        worker.idlePoll = configuration.workerIdlePoll
        return worker
    }
}
