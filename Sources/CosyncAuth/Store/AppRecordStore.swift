import Foundation
import Logging
import PostgresNIO

/// SQL for the per-app records listed by the admin API: pending signups, invites, e-mail templates
/// and the outbox. Every query is scoped by `app_ref`.
public enum AppRecordStore {
    public struct PendingRecord: Sendable {
        public let id: UUID
        public let handle: String
        public let status: String
        public let locale: String
        public let senderHandle: String?
        public let metaData: JSONValue
        public let expiresAt: Date
        public let createdAt: Date

    }

    public enum Kind: String, Sendable { case signups, invites }

    /// Newest first; `before` is `(createdAt, id)` of the previous page's last row.
    public static func listPending(
        _ db: PostgresConnection, kind: Kind, appRef: Int64, before: (Date, UUID)?, limit: Int, logger: Logger
    ) async throws -> [PendingRecord] {
        let sender = kind == .invites ? "sender_handle" : "NULL::text"
        let (beforeDate, beforeId) = before ?? (Date.distantFuture, UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)))
        let rows = try await db.query(
            """
            SELECT id, handle, status, locale, \(unescaped: sender), metadata::text, expires_at, created_at
            FROM \(unescaped: kind.rawValue)
            WHERE app_ref = \(appRef) AND (created_at, id) < (\(beforeDate), \(beforeId))
            ORDER BY created_at DESC, id DESC LIMIT \(limit)
            """, logger: logger)
        var records: [PendingRecord] = []
        for try await (id, handle, status, locale, sender, metadata, expiresAt, createdAt) in rows.decode(
            (UUID, String, String, String, String?, String, Date, Date).self)
        {
            let tree = (try? JSONDecoder().decode(JSONValue.self, from: Data(metadata.utf8))) ?? .object([:])
            records.append(
                PendingRecord(
                    id: id, handle: handle, status: status, locale: locale, senderHandle: sender, metaData: tree,
                    expiresAt: expiresAt, createdAt: createdAt))
        }
        return records
    }

    public static func deletePending(_ db: PostgresConnection, kind: Kind, appRef: Int64, id: UUID, logger: Logger) async throws -> String? {
        let rows = try await db.query(
            "DELETE FROM \(unescaped: kind.rawValue) WHERE app_ref = \(appRef) AND id = \(id) RETURNING handle",
            logger: logger)
        for try await handle in rows.decode(String.self) { return handle }
        return nil
    }

    // MARK: templates

    public static func template(_ db: PostgresConnection, appRef: Int64, name: String, locale: String, logger: Logger) async throws -> EmailTemplate? {
        let rows = try await db.query(
            """
            SELECT subject, html, text, reply_to, locale_link_text FROM email_templates
            WHERE app_ref = \(appRef) AND template = \(name) AND locale = \(locale)
            """, logger: logger)
        for try await (subject, html, text, replyTo, linkText) in rows.decode((String, String, String, String, String).self) {
            return EmailTemplate(subject: subject, html: html, text: text, replyTo: replyTo, localeLinkText: linkText)
        }
        return nil
    }

    public static func upsertTemplate(
        _ db: PostgresConnection, appRef: Int64, name: String, locale: String, template t: EmailTemplate, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO email_templates (app_ref, template, locale, subject, html, text, reply_to, locale_link_text)
            VALUES (\(appRef), \(name), \(locale), \(t.subject), \(t.html), \(t.text), \(t.replyTo), \(t.localeLinkText))
            ON CONFLICT (app_ref, template, locale) DO UPDATE SET subject = EXCLUDED.subject, html = EXCLUDED.html,
                text = EXCLUDED.text, reply_to = EXCLUDED.reply_to, locale_link_text = EXCLUDED.locale_link_text,
                updated_at = now()
            """, logger: logger)
    }

    public static func deleteTemplate(_ db: PostgresConnection, appRef: Int64, name: String, locale: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            DELETE FROM email_templates WHERE app_ref = \(appRef) AND template = \(name) AND locale = \(locale)
            RETURNING template
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    // MARK: outbox

    public struct Message: Sendable {
        public let id: Int64
        public let channel: String
        public let to: String
        public let template: String
        public let subject: String
        public let body: String
        public let status: String
        public let attempts: Int
        public let createdAt: Date
        public let sentAt: Date?

    }

    public static func messages(_ db: PostgresConnection, appRef: Int64, to: String?, before: Int64?, limit: Int, logger: Logger) async throws -> [Message] {
        let rows = try await db.query(
            """
            SELECT id, channel, recipient, template, subject, body, status, attempts, created_at, sent_at FROM messages
            WHERE app_ref = \(appRef) AND id < \(before ?? Int64.max) AND (\(to)::text IS NULL OR lower(recipient) = lower(\(to)))
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        var messages: [Message] = []
        for try await (id, channel, recipient, template, subject, body, status, attempts, createdAt, sentAt) in rows.decode(
            (Int64, String, String, String, String, String, String, Int, Date, Date?).self)
        {
            messages.append(
                Message(
                    id: id, channel: channel, to: recipient, template: template, subject: subject, body: body,
                    status: status, attempts: attempts, createdAt: createdAt, sentAt: sentAt))
        }
        return messages
    }
}
