import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// Sends queued outbox rows. Any number of nodes may run it: each claims due rows with
/// `FOR UPDATE SKIP LOCKED` inside a transaction, sends them, and records the outcome before
/// committing. A crash before the commit leaves the rows queued for the next worker; failures are
/// retried with exponential backoff (5 s doubling, at most 1 h) up to `maxAttempts`.
public struct DeliveryWorker: Service {
    let client: PostgresClient
    let box: SecretBox
    let email: any EmailTransport
    let sms: any SMSTransport
    let logger: Logger
    let pollInterval: Duration
    let maxAttempts: Int
    let batchSize: Int

    public init(
        client: PostgresClient, box: SecretBox, email: any EmailTransport, sms: any SMSTransport, logger: Logger,
        pollInterval: Duration = .milliseconds(500), maxAttempts: Int = 8, batchSize: Int = 20
    ) {
        self.client = client
        self.box = box
        self.email = email
        self.sms = sms
        self.logger = logger
        self.pollInterval = pollInterval
        self.maxAttempts = maxAttempts
        self.batchSize = batchSize
    }

    /// Templates whose body is a long-lived secret (the TOTP key and its QR code): once sent, the
    /// outbox keeps only the envelope.
    static let redactedAfterSending: Set<String> = ["qrCode"]

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let sent = (try? await deliverDue()) ?? 0
                if sent == 0 { try? await Task.sleep(for: pollInterval) }
            }
        }
    }

    /// Claims and sends one batch of due messages. Returns how many were handled.
    @discardableResult
    public func deliverDue() async throws -> Int {
        try await client.transaction(logger: logger) { db in
            let rows = try await db.query(
                """
                SELECT m.id, a.app_id, m.channel, m.recipient, m.template, m.subject, m.body, m.html_body, m.sender,
                       m.sender_name, m.reply_to, m.attempts, a.settings, a.credentials_sealed, m.attachment_name, m.attachment_data
                FROM messages m JOIN apps a ON a.id = m.app_ref
                WHERE m.status = 'queued' AND m.next_attempt <= now()
                ORDER BY m.id LIMIT \(batchSize)
                FOR UPDATE OF m SKIP LOCKED
                """, logger: logger)
            var batch: [(OutboundMessage, Int, AppSettings, Data?)] = []
            for try await row in rows {
                let c = try row.decode(
                    (Int64, String, String, String, String, String, String, String, String, String, String, Int, AppSettings, Data?,
                     String?, Data?).self)
                batch.append((
                    OutboundMessage(id: c.0, appId: c.1, channel: c.2, to: c.3, template: c.4, subject: c.5, text: c.6, html: c.7,
                                    sender: c.8, senderName: c.9, replyTo: c.10, attachmentName: c.14, attachmentData: c.15),
                    c.11, c.12, c.13))
            }
            for (message, attempts, settings, sealed) in batch {
                do {
                    let credentials = try sealed.map {
                        try JSONDecoder().decode(ProviderCredentials.self, from: try box.open($0, purpose: "app-credentials:\(message.appId)"))
                    } ?? ProviderCredentials()
                    if message.channel == "sms" {
                        try await sms.send(message, credentials: credentials)
                    } else {
                        let appKey = settings.emailExtension ? credentials.emailExtensionAPIKey : nil
                        try await email.send(message, apiKey: appKey)
                    }
                    try await db.query(
                        "UPDATE messages SET status = 'sent', attempts = attempts + 1, sent_at = now(), last_error = NULL WHERE id = \(message.id)",
                        logger: logger)
                    if Self.redactedAfterSending.contains(message.template) {
                        try await db.query(
                            """
                            UPDATE messages SET body = '[redacted after delivery]', html_body = '', attachment_data = NULL
                            WHERE id = \(message.id)
                            """, logger: logger)
                    }
                } catch {
                    let reason = (error as? DeliveryError)?.description ?? "\(type(of: error))"
                    let retryable = (error as? DeliveryError)?.retryable ?? true
                    let next = attempts + 1
                    let finalFailure = !retryable || next >= maxAttempts
                    let delay = min(5 * (1 << min(next, 10)), 3600)
                    try await db.query(
                        """
                        UPDATE messages SET attempts = \(next), last_error = \(reason),
                            status = \(finalFailure ? "failed" : "queued"),
                            next_attempt = now() + make_interval(secs => \(delay)::int)
                        WHERE id = \(message.id)
                        """, logger: logger)
                    logger.warning("message delivery failed", metadata: ["id": "\(message.id)", "app": "\(message.appId)", "reason": "\(reason)", "final": "\(finalFailure)"])
                }
            }
            return batch.count
        }
    }
}
