import Foundation
import Logging
import PostgresNIO

/// SQL of the `messages` outbox, and only here: `Outbox` queues e-mails and SMS in the caller's
/// transaction, `DeliveryWorker` claims and marks them (its documentation says when and why).
enum OutboxStore {
    // MARK: queueing

    /// `appRef` is nil for a message of no app (the Portal's invites).
    static func insertEmail(
        _ db: PostgresConnection, appRef: Int64?, to: String, template: String, subject: String, text: String, html: String,
        sender: String, senderName: String, replyTo: String, attachmentName: String?, attachmentData: Data?, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO messages (app_ref, channel, recipient, template, subject, body, html_body, sender, sender_name, reply_to,
                                  attachment_name, attachment_data)
            VALUES (\(appRef), 'email', \(to), \(template), \(subject), \(text), \(html), \(sender), \(senderName), \(replyTo),
                    \(attachmentName), \(attachmentData))
            """, logger: logger)
    }

    static func insertSMS(_ db: PostgresConnection, appRef: Int64, to: String, text: String, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO messages (app_ref, channel, recipient, template, subject, body)
            VALUES (\(appRef), 'sms', \(to), 'sms', '', \(text))
            """, logger: logger)
    }

    // MARK: delivery

    /// A message the delivery worker claimed, with its app's settings and sealed credentials (a
    /// message of no app, such as a Portal invite: appId "", default settings, no credentials).
    struct ClaimedMessage {
        let message: OutboundMessage
        /// The attempt this claim is (already counted).
        let attempt: Int
        let settings: AppSettings
        let sealed: Data?
    }

    /// Takes the lease on the oldest due message (queued and due, or `sending` whose lease ran out)
    /// of no app or of an app that is not suspended, in one statement: it becomes `sending`, its
    /// attempt is counted and `next_attempt` moves `leaseSeconds` ahead. Nil when none is due.
    static func claim(_ db: PostgresConnection, leaseSeconds: Int, logger: Logger) async throws -> ClaimedMessage? {
        let rows = try await db.query(
            """
            WITH due AS (
                SELECT m.id FROM messages m LEFT JOIN apps a ON a.id = m.app_ref
                WHERE m.status IN ('queued', 'sending') AND m.next_attempt <= now() AND (m.app_ref IS NULL OR a.status <> 'suspended')
                ORDER BY m.next_attempt, m.id LIMIT 1
                FOR UPDATE OF m SKIP LOCKED
            ), claimed AS (
                UPDATE messages m SET status = 'sending', attempts = m.attempts + 1,
                    next_attempt = now() + make_interval(secs => \(leaseSeconds)::int)
                FROM due
                WHERE m.id = due.id
                RETURNING m.*
            )
            SELECT m.id, COALESCE(a.app_id, ''), m.channel, m.recipient, m.template, m.subject, m.body, m.html_body, m.sender,
                   m.sender_name, m.reply_to, m.attempts, a.settings, a.credentials_sealed, m.attachment_name, m.attachment_data
            FROM claimed m LEFT JOIN apps a ON a.id = m.app_ref
            """, logger: logger)
        for try await row in rows {
            let c = try row.decode(
                (Int64, String, String, String, String, String, String, String, String, String, String, Int, AppSettings?, Data?,
                 String?, Data?).self)
            // The column's CHECK admits exactly the MessageChannel cases.
            guard let channel = MessageChannel(rawValue: c.2) else { throw StoreError.unknownValue(column: "messages.channel", value: c.2) }
            return ClaimedMessage(
                message: OutboundMessage(
                    id: c.0, appId: c.1, channel: channel, to: c.3, template: c.4, subject: c.5, text: c.6, html: c.7,
                    sender: c.8, senderName: c.9, replyTo: c.10, attachmentName: c.14, attachmentData: c.15),
                attempt: c.11, settings: c.12 ?? AppSettings(), sealed: c.13)
        }
        return nil
    }

    /// Marks a message sent, its body, HTML and attachment replaced when `redact`; false when it is no
    /// longer this claim's (`attempt`): its lease ran out and another worker took it over.
    static func markSent(
        _ db: PostgresConnection, id: Int64, attempt: Int, redact: Bool, redactedBody: String, logger: Logger
    ) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE messages SET status = 'sent', sent_at = now(), last_error = NULL,
                body = CASE WHEN \(redact) THEN \(redactedBody) ELSE body END,
                html_body = CASE WHEN \(redact) THEN '' ELSE html_body END,
                attachment_data = CASE WHEN \(redact) THEN NULL ELSE attachment_data END
            WHERE id = \(id) AND status = 'sending' AND attempts = \(attempt)
            RETURNING id
            """, logger: logger)
        var marked = false
        for try await _ in rows { marked = true }
        return marked
    }

    /// A failed attempt: back to `queued` after `delaySeconds`, or `failed` when `final`; the body,
    /// HTML and attachment replaced when `redact`. Nothing when it is no longer this claim's.
    static func markFailed(
        _ db: PostgresConnection, id: Int64, attempt: Int, reason: String, final: Bool, delaySeconds: Int, redact: Bool,
        redactedBody: String, logger: Logger
    ) async throws {
        try await db.query(
            """
            UPDATE messages SET last_error = \(reason), status = \(final ? "failed" : "queued"),
                next_attempt = now() + make_interval(secs => \(delaySeconds)::int),
                body = CASE WHEN \(redact) THEN \(redactedBody) ELSE body END,
                html_body = CASE WHEN \(redact) THEN '' ELSE html_body END,
                attachment_data = CASE WHEN \(redact) THEN NULL ELSE attachment_data END
            WHERE id = \(id) AND status = 'sending' AND attempts = \(attempt)
            """, logger: logger)
    }

    /// Messages not sent yet (queued or being sent) and the age in seconds of the oldest, for the metrics.
    static func backlog(_ db: PostgresConnection, logger: Logger) async throws -> (count: Int, oldestSeconds: Double) {
        let rows = try await db.query(
            """
            SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8
            FROM messages WHERE status IN ('queued', 'sending')
            """, logger: logger)
        for try await (count, age) in rows.decode((Int, Double).self) { return (count, age) }
        return (0, 0)
    }
}
