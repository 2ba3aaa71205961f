import Foundation
import Logging
import PostgresNIO

/// SQL of events and their webhooks: `events`, `webhook_endpoints`, `webhook_deliveries` and
/// `webhook_attempts`, and only here. One store owns the four because single statements write
/// several of them (an event with its deliveries; a delivered mark with its attempt row and the
/// endpoint's streak). The delivery worker's statements are in `EventStore+Delivery.swift`.
public enum EventStore {
    // MARK: events

    /// Writes the event (its body fixed) and one delivery per enabled endpoint of the app subscribed
    /// to its type, in one statement.
    static func insert(
        _ db: PostgresConnection, appRef: Int64, type: EventType, userId: UUID?, body: String, logger: Logger
    ) async throws {
        try await db.query(
            """
            WITH event AS (
                INSERT INTO events (app_ref, type, user_id, body) VALUES (\(appRef), \(type.rawValue), \(userId), \(body))
                RETURNING id, user_id
            )
            INSERT INTO webhook_deliveries (endpoint_id, event_ref, user_id)
            SELECT w.id, event.id, event.user_id FROM event, webhook_endpoints w
            WHERE w.app_ref = \(appRef) AND w.enabled AND \(type.rawValue) = ANY (w.event_types)
            """, logger: logger)
    }

    /// Housekeeping: removes events older than `days` days with their deliveries and attempt logs,
    /// unless a delivery of them is still pending (at most 10,000 a call); returns how many.
    static func purgeOld(_ db: PostgresConnection, olderThanDays days: Int, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            DELETE FROM events WHERE id IN (
                SELECT e.id FROM events e
                WHERE e.created_at < now() - make_interval(days => \(days)::int)
                  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_ref = e.id AND d.status IN ('pending', 'sending'))
                ORDER BY e.id LIMIT 10000)
            RETURNING 1
            """, logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }

    // MARK: endpoints

    static func endpoints(_ rows: PostgresRowSequence) async throws -> [WebhookEndpoint] {
        var result: [WebhookEndpoint] = []
        for try await c in rows.decode((UUID, String, [String], String, Bool, String?, Int, Date?, Date, Date).self) {
            result.append(WebhookEndpoint(
                id: c.0, url: c.1, eventTypes: c.2, description: c.3, enabled: c.4, disabledReason: c.5, consecutiveFailures: c.6,
                previousSecretExpiresAt: c.7, createdAt: c.8, updatedAt: c.9))
        }
        return result
    }

    public static func insertEndpoint(
        _ db: PostgresConnection, id: UUID, appRef: Int64, url: String, types: [String], description: String, sealed: Data, logger: Logger
    ) async throws -> WebhookEndpoint? {
        let rows = try await db.query(
            """
            INSERT INTO webhook_endpoints (id, app_ref, url, event_types, description, secret_sealed)
            VALUES (\(id), \(appRef), \(url), \(types), \(description), \(sealed))
            RETURNING id, url, event_types, description, enabled, disabled_reason, consecutive_failures, previous_secret_expires_at,
                      created_at, updated_at
            """, logger: logger)
        return try await endpoints(rows).first
    }

    public static func countEndpoints(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int FROM webhook_endpoints WHERE app_ref = \(appRef)", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    public static func listEndpoints(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> [WebhookEndpoint] {
        let rows = try await db.query(
            """
            SELECT id, url, event_types, description, enabled, disabled_reason, consecutive_failures, previous_secret_expires_at,
                   created_at, updated_at FROM webhook_endpoints WHERE app_ref = \(appRef) ORDER BY created_at, id
            """, logger: logger)
        return try await endpoints(rows)
    }

    public static func endpoint(_ db: PostgresConnection, appRef: Int64, id: UUID, forUpdate: Bool = false, logger: Logger) async throws -> WebhookEndpoint? {
        let rows = try await db.query(
            forUpdate
                ? """
                SELECT id, url, event_types, description, enabled, disabled_reason, consecutive_failures, previous_secret_expires_at,
                       created_at, updated_at FROM webhook_endpoints WHERE app_ref = \(appRef) AND id = \(id) FOR UPDATE
                """
                : """
                SELECT id, url, event_types, description, enabled, disabled_reason, consecutive_failures, previous_secret_expires_at,
                       created_at, updated_at FROM webhook_endpoints WHERE app_ref = \(appRef) AND id = \(id)
                """, logger: logger)
        return try await endpoints(rows).first
    }

    public static func updateEndpoint(
        _ db: PostgresConnection, id: UUID, url: String, types: [String], description: String, enabled: Bool, disabledReason: String?,
        logger: Logger
    ) async throws -> WebhookEndpoint? {
        let rows = try await db.query(
            """
            UPDATE webhook_endpoints SET url = \(url), event_types = \(types), description = \(description), enabled = \(enabled),
                disabled_reason = \(disabledReason),
                consecutive_failures = CASE WHEN \(enabled) AND NOT enabled THEN 0 ELSE consecutive_failures END,
                updated_at = now()
            WHERE id = \(id)
            RETURNING id, url, event_types, description, enabled, disabled_reason, consecutive_failures, previous_secret_expires_at,
                      created_at, updated_at
            """, logger: logger)
        return try await endpoints(rows).first
    }

    public static func rotateSecret(
        _ db: PostgresConnection, id: UUID, sealed: Data, previousExpires: Date, logger: Logger
    ) async throws -> WebhookEndpoint? {
        let rows = try await db.query(
            """
            UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed, previous_secret_expires_at = \(previousExpires),
                secret_sealed = \(sealed), updated_at = now()
            WHERE id = \(id)
            RETURNING id, url, event_types, description, enabled, disabled_reason, consecutive_failures, previous_secret_expires_at,
                      created_at, updated_at
            """, logger: logger)
        return try await endpoints(rows).first
    }

    public static func deleteEndpoint(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "DELETE FROM webhook_endpoints WHERE app_ref = \(appRef) AND id = \(id) RETURNING id", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Deletes every webhook endpoint of the app `appId`, each before its deliveries (an app's deletion
    /// runs it before it deletes the app row: `AppAdministration.delete`).
    static func deleteEndpoints(_ db: PostgresConnection, appId: String, logger: Logger) async throws {
        try await db.query(
            "DELETE FROM webhook_endpoints WHERE app_ref = (SELECT id FROM apps WHERE app_id = \(appId))", logger: logger)
    }

    /// Newest first; `before` is the id of the last attempt of the previous page.
    public static func attempts(_ db: PostgresConnection, endpoint: UUID, before: Int64?, limit: Int, logger: Logger) async throws -> [WebhookAttempt] {
        let rows = try await db.query(
            """
            SELECT a.id, e.event_id, e.type, a.attempt, a.http_status, a.error, a.latency_ms, a.created_at
            FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_ref JOIN events e ON e.id = d.event_ref
            WHERE a.endpoint_id = \(endpoint) AND a.id < \(before ?? Int64.max)
            ORDER BY a.id DESC LIMIT \(limit)
            """, logger: logger)
        var result: [WebhookAttempt] = []
        for try await c in rows.decode((Int64, UUID, String, Int, Int?, String?, Int, Date).self) {
            result.append(WebhookAttempt(
                id: c.0, messageId: WebhookMessageId.of(c.1), eventType: c.2, attempt: c.3, httpStatus: c.4, error: c.5,
                latencyMs: c.6, createdAt: c.7))
        }
        return result
    }

    /// The pending deliveries of a disabled endpoint move out of the due index's way (a century ahead),
    /// so that claims do not walk past them; enabling the endpoint makes them due again.
    static func park(_ db: PostgresConnection, endpoint: UUID, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE webhook_deliveries SET next_attempt = now() + interval '100 years'
            WHERE endpoint_id = \(endpoint) AND status = 'pending'
            """, logger: logger)
    }

    static func unpark(_ db: PostgresConnection, endpoint: UUID, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE webhook_deliveries SET next_attempt = now()
            WHERE endpoint_id = \(endpoint) AND status = 'pending' AND next_attempt > now() + interval '50 years'
            """, logger: logger)
    }

    /// Queues one finished (delivered or dead) message again (same webhook-id, the retry schedule from
    /// the start). False when the endpoint never had it finished.
    public static func replay(_ db: PostgresConnection, endpoint: UUID, event: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE webhook_deliveries d SET status = 'pending', round_failures = 0, next_attempt = now(), delivered_at = NULL
            FROM events e
            WHERE e.id = d.event_ref AND e.event_id = \(event) AND d.endpoint_id = \(endpoint) AND d.status IN ('delivered', 'dead')
            RETURNING d.id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Queues again the finished (delivered or dead) messages of the endpoint since `since`: at most
    /// 10,000 a call, oldest first (call again for more).
    public static func replay(_ db: PostgresConnection, endpoint: UUID, since: Date, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH queued AS (
                UPDATE webhook_deliveries d SET status = 'pending', round_failures = 0, next_attempt = now(), delivered_at = NULL
                WHERE d.id IN (
                    SELECT r.id FROM webhook_deliveries r JOIN events e ON e.id = r.event_ref
                    WHERE r.endpoint_id = \(endpoint) AND e.created_at >= \(since) AND r.status IN ('delivered', 'dead')
                    ORDER BY r.id LIMIT 10000)
                RETURNING d.id
            )
            SELECT count(*)::int FROM queued
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    /// Undelivered deliveries and the age of the oldest, for the metrics.
    public static func backlog(_ db: PostgresConnection, logger: Logger) async throws -> (count: Int, oldestSeconds: Double) {
        let rows = try await db.query(
            """
            SELECT count(*)::int, coalesce(extract(epoch FROM now() - min(d.created_at)), 0)::float8
            FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
            WHERE d.status IN ('pending', 'sending') AND w.enabled
            """, logger: logger)
        for try await (count, age) in rows.decode((Int, Double).self) { return (count, age) }
        return (0, 0)
    }
}
