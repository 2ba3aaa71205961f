import Foundation
import Logging
import PostgresNIO

/// The webhook worker's statements (`WebhookWorker` says when each runs and why): claim due
/// deliveries, put unsent ones back, mark one delivered or failed, log the attempt, count the
/// endpoint's failures.
extension EventStore {
    /// A delivery the worker claimed, with what sending it needs.
    struct ClaimedDelivery: Sendable {
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
        /// The endpoint's last attempt had failed when this was claimed.
        let endpointFailing: Bool
    }

    /// Claims up to `limit` due deliveries in one statement: they become `sending`, their attempt is
    /// counted and `next_attempt` moves `leaseSeconds` ahead. `perAppInFlight` caps what an app's
    /// healthy endpoints have in flight; see `WebhookWorker.claim` for the rules. In delivery order.
    static func claimDeliveries(
        _ db: PostgresConnection, limit: Int, perAppInFlight: Int, leaseSeconds: Int, logger: Logger
    ) async throws -> [ClaimedDelivery] {
        let rows = try await db.query(
            """
            WITH in_flight AS MATERIALIZED (
                SELECT s.endpoint_id, count(*) AS n FROM webhook_deliveries s
                WHERE s.status = 'sending' AND s.next_attempt > now()
                  AND s.next_attempt <= now() + make_interval(secs => \(leaseSeconds)::int)
                GROUP BY s.endpoint_id
            ), app_load AS MATERIALIZED (
                SELECT w.app_ref, sum(f.n) AS n FROM in_flight f JOIN webhook_endpoints w ON w.id = f.endpoint_id
                WHERE w.consecutive_failures = 0 GROUP BY w.app_ref
            ), due AS (
                SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id JOIN apps a ON a.id = w.app_ref
                WHERE d.status IN ('pending', 'sending') AND d.next_attempt <= now() AND w.enabled AND a.status = 'active'
                  AND CASE WHEN w.consecutive_failures = 0
                      THEN coalesce((SELECT l.n FROM app_load l WHERE l.app_ref = w.app_ref), 0) < \(perAppInFlight)
                      ELSE NOT EXISTS (SELECT 1 FROM in_flight f WHERE f.endpoint_id = d.endpoint_id)
                  END
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
                      CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret_sealed END, w.consecutive_failures > 0
            """, logger: logger)
        var claimed: [ClaimedDelivery] = []
        for try await c in rows.decode((Int64, UUID, Int64, String, String, UUID, String, String, Int, Int, Data, Data?, Bool).self) {
            claimed.append(ClaimedDelivery(
                delivery: c.0, endpoint: c.1, appRef: c.2, appId: c.3, url: c.4, event: c.5, type: c.6, body: c.7, attempt: c.8,
                roundFailures: c.9, secret: c.10, previousSecret: c.11, endpointFailing: c.12))
        }
        // The statement's order is not the claim order; the per-user order only needs the ids.
        return claimed.sorted { $0.delivery < $1.delivery }
    }

    /// Claimed deliveries (ids with the attempt each claim counted) back to `pending`, due now, that
    /// attempt not counted; those no longer at that attempt and `sending` are left alone.
    static func putBack(_ db: PostgresConnection, ids: [Int64], attempts: [Int64], logger: Logger) async throws {
        try await db.query(
            """
            UPDATE webhook_deliveries d SET status = 'pending', attempts = d.attempts - 1, next_attempt = now()
            FROM unnest(\(ids)::int8[], \(attempts)::int8[]) AS b(id, attempt)
            WHERE d.id = b.id AND d.status = 'sending' AND d.attempts = b.attempt
            """, logger: logger)
    }

    /// One delivered message, in one statement: the endpoint's row (KEY SHARE) first, then the
    /// delivery marked (when still this claim's), the attempt logged, and the endpoint's failure
    /// streak ended (written only when there is one).
    static func markDelivered(
        _ db: PostgresConnection, delivery: Int64, endpoint: UUID, attempt: Int, httpStatus: Int, latency: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            WITH w AS (
                SELECT id, consecutive_failures FROM webhook_endpoints WHERE id = \(endpoint) FOR KEY SHARE
            ), done AS (
                UPDATE webhook_deliveries d SET status = 'delivered', delivered_at = now(), last_error = NULL
                FROM w WHERE d.id = \(delivery) AND d.endpoint_id = w.id AND d.status = 'sending' AND d.attempts = \(attempt)
            ), logged AS (
                INSERT INTO webhook_attempts (delivery_ref, endpoint_id, attempt, http_status, error, latency_ms)
                SELECT d.id, w.id, \(attempt), \(httpStatus), NULL, \(latency)
                FROM w JOIN webhook_deliveries d ON d.id = \(delivery) AND d.endpoint_id = w.id
            )
            UPDATE webhook_endpoints e SET consecutive_failures = 0 FROM w WHERE e.id = w.id AND w.consecutive_failures <> 0
            """, logger: logger)
    }

    /// Locks the endpoint's row (`FOR NO KEY UPDATE`) for a failed attempt's marks; false when the
    /// endpoint was deleted meanwhile.
    static func lockEndpointForFailure(_ db: PostgresConnection, endpoint: UUID, logger: Logger) async throws -> Bool {
        let live = try await db.query(
            "SELECT true FROM webhook_endpoints WHERE id = \(endpoint) FOR NO KEY UPDATE", logger: logger)
        var exists = false
        for try await _ in live { exists = true }
        return exists
    }

    /// A failed attempt of a delivery still this claim's: back to `pending` after `wait` seconds, or
    /// `dead` when `wait` is nil (the schedule is used up).
    static func markFailed(
        _ db: PostgresConnection, delivery: Int64, attempt: Int, reason: String, roundFailures: Int, wait: Double?, logger: Logger
    ) async throws {
        try await db.query(
            """
            UPDATE webhook_deliveries SET last_error = \(reason), round_failures = \(roundFailures),
                status = \(wait == nil ? "dead" : "pending"),
                next_attempt = now() + make_interval(secs => \(wait ?? 0)::float8)
            WHERE id = \(delivery) AND status = 'sending' AND attempts = \(attempt)
            """, logger: logger)
    }

    /// One row of the attempt log.
    static func logAttempt(
        _ db: PostgresConnection, delivery: Int64, endpoint: UUID, attempt: Int, httpStatus: Int?, error: String?, latency: Int,
        logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO webhook_attempts (delivery_ref, endpoint_id, attempt, http_status, error, latency_ms)
            VALUES (\(delivery), \(endpoint), \(attempt), \(httpStatus), \(error), \(latency))
            """, logger: logger)
    }

    /// Counts one more failure in a row for the endpoint, and disables it at `disableAfter`. True when
    /// this call disabled it.
    static func countEndpointFailure(_ db: PostgresConnection, endpoint: UUID, disableAfter: Int, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1,
                enabled = CASE WHEN consecutive_failures + 1 >= \(disableAfter) THEN false ELSE enabled END,
                disabled_reason = CASE WHEN enabled AND consecutive_failures + 1 >= \(disableAfter)
                    THEN \("disabled after \(disableAfter) failed attempts in a row") ELSE disabled_reason END
            WHERE id = \(endpoint)
            RETURNING (NOT enabled) AND consecutive_failures = \(disableAfter)
            """, logger: logger)
        var justDisabled = false
        for try await flag in rows.decode(Bool.self) { justDisabled = flag }
        return justDisabled
    }
}
