import Foundation
import Logging
import PostgresNIO

/// Reads of events and webhook deliveries for the Portal's overview and delivery log (issue 23).
/// Every read is scoped to one app (its endpoints) and goes through an index: per-day counts through
/// `events_app_time` (app_ref, created_at), an endpoint's deliveries through
/// `webhook_deliveries_endpoint` (endpoint_id, id) (sql/0023), its pending ones through the partial
/// `webhook_deliveries_user_order`.
extension EventStore {
    /// How many events of each of `types` the app had per UTC day since `since`: (type, day, count),
    /// the day as whole days since 1970-01-01.
    public static func dailyCounts(
        _ db: PostgresConnection, appRef: Int64, types: [String], since: Date, logger: Logger
    ) async throws -> [(type: String, day: Int, count: Int)] {
        let rows = try await db.query(
            """
            SELECT type, floor(extract(epoch FROM created_at) / 86400)::int AS day, count(*)::int
            FROM events
            WHERE app_ref = \(appRef) AND created_at >= \(since) AND type = ANY (\(types))
            GROUP BY type, day
            """, logger: logger)
        var result: [(type: String, day: Int, count: Int)] = []
        for try await (type, day, count) in rows.decode((String, Int, Int).self) { result.append((type, day, count)) }
        return result
    }

    /// The app's undelivered (pending or sending) deliveries per endpoint, with the oldest one's time;
    /// disabled endpoints included (their deliveries wait parked).
    public static func appBacklog(
        _ db: PostgresConnection, appRef: Int64, logger: Logger
    ) async throws -> [(endpoint: UUID, url: String, enabled: Bool, count: Int, oldest: Date?)] {
        let rows = try await db.query(
            """
            SELECT w.id, w.url, w.enabled, count(d.id)::int, min(d.created_at)
            FROM webhook_endpoints w
            LEFT JOIN webhook_deliveries d ON d.endpoint_id = w.id AND d.status IN ('pending', 'sending')
            WHERE w.app_ref = \(appRef)
            GROUP BY w.id, w.url, w.enabled, w.created_at
            ORDER BY w.created_at, w.id
            """, logger: logger)
        var result: [(endpoint: UUID, url: String, enabled: Bool, count: Int, oldest: Date?)] = []
        for try await (id, url, enabled, count, oldest) in rows.decode((UUID, String, Bool, Int, Date?).self) {
            result.append((id, url, enabled, count, oldest))
        }
        return result
    }

    static let deliveryColumns = """
        d.id, e.event_id, e.type, d.status, d.attempts, d.last_error, d.created_at, d.delivered_at, d.next_attempt
        """

    static func deliveries(_ rows: PostgresRowSequence) async throws -> [WebhookDelivery] {
        var result: [WebhookDelivery] = []
        for try await c in rows.decode((Int64, UUID, String, String, Int, String?, Date, Date?, Date).self) {
            result.append(WebhookDelivery(
                id: c.0, messageId: WebhookMessageId.of(c.1), eventType: c.2, status: c.3, attempts: c.4, lastError: c.5, createdAt: c.6,
                deliveredAt: c.7, nextAttempt: c.8))
        }
        return result
    }

    /// An endpoint's deliveries, newest first; `before` is the id of the last delivery of the previous page.
    public static func deliveries(
        _ db: PostgresConnection, endpoint: UUID, before: Int64?, limit: Int, logger: Logger
    ) async throws -> [WebhookDelivery] {
        let rows = try await db.query(
            """
            SELECT \(unescaped: deliveryColumns)
            FROM webhook_deliveries d JOIN events e ON e.id = d.event_ref
            WHERE d.endpoint_id = \(endpoint) AND d.id < \(before ?? Int64.max)
            ORDER BY d.id DESC LIMIT \(limit)
            """, logger: logger)
        return try await deliveries(rows)
    }

    /// One delivery of an endpoint, by its event.
    public static func delivery(_ db: PostgresConnection, endpoint: UUID, event: UUID, logger: Logger) async throws -> WebhookDelivery? {
        let rows = try await db.query(
            """
            SELECT \(unescaped: deliveryColumns)
            FROM webhook_deliveries d JOIN events e ON e.id = d.event_ref
            WHERE d.endpoint_id = \(endpoint) AND e.event_id = \(event)
            """, logger: logger)
        return try await deliveries(rows).first
    }

    /// Every logged attempt of one delivery, oldest first (at most `limit`).
    public static func deliveryAttempts(_ db: PostgresConnection, delivery: Int64, limit: Int, logger: Logger) async throws -> [WebhookAttempt] {
        let rows = try await db.query(
            """
            SELECT a.id, e.event_id, e.type, a.attempt, a.http_status, a.error, a.latency_ms, a.created_at
            FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_ref JOIN events e ON e.id = d.event_ref
            WHERE a.delivery_ref = \(delivery)
            ORDER BY a.id LIMIT \(limit)
            """, logger: logger)
        var result: [WebhookAttempt] = []
        for try await c in rows.decode((Int64, UUID, String, Int, Int?, String?, Int, Date).self) {
            result.append(WebhookAttempt(
                id: c.0, messageId: WebhookMessageId.of(c.1), eventType: c.2, attempt: c.3, httpStatus: c.4, error: c.5,
                latencyMs: c.6, createdAt: c.7))
        }
        return result
    }
}
