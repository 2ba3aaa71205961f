import Foundation
import Logging
import PostgresNIO

/// The audit log: one row per admin or end-user action, kept per app.
public enum AuditLog {
    public struct Entry: Sendable, Codable {
        public let id: Int64
        public let actor: String
        public let action: String
        public let status: String
        public let detail: JSONValue
        public let createdAt: Date
    }

    public static func record(
        _ db: PostgresConnection, appRef: Int64?, appId: String, actor: String, action: String,
        status: String = "success", detail: [String: JSONValue] = [:], logger: Logger
    ) async throws {
        // An anonymous handle is a credential: never logged (README "Security rules").
        let detailJSON = String(decoding: try JSONCoding.encode(JSONValue.object(Events.redactingHandles(detail))), as: UTF8.self)
        try await db.query(
            """
            INSERT INTO audit_log (app_ref, app_id, actor, action, status, detail)
            VALUES (\(appRef), \(appId), \(actor), \(action), \(status), \(detailJSON)::jsonb)
            """, logger: logger)
    }

    /// Newest first; `before` is the id of the last entry of the previous page.
    public static func list(_ db: PostgresConnection, appRef: Int64, before: Int64?, limit: Int, logger: Logger) async throws -> [Entry] {
        let rows = try await db.query(
            """
            SELECT id, actor, action, status, detail::text, created_at FROM audit_log
            WHERE app_ref = \(appRef) AND id < \(before ?? Int64.max) ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        var entries: [Entry] = []
        for try await (id, actor, action, status, detail, createdAt) in rows.decode((Int64, String, String, String, String, Date).self) {
            let tree = (try? JSONDecoder().decode(JSONValue.self, from: Data(detail.utf8))) ?? .object([:])
            entries.append(Entry(id: id, actor: actor, action: action, status: status, detail: tree, createdAt: createdAt))
        }
        return entries
    }
}
