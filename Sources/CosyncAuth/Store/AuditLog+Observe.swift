import Foundation
import Logging
import PostgresNIO

/// The audit log with filters (the Portal's audit page, issue 23).
extension AuditLog {
    /// What an audit search keeps; nil keeps everything. `action` matches exactly or, ending in `.*`,
    /// by prefix (`user.*`); `actor` exactly; `userId` the `userId` of the entry's detail; the time
    /// range is `from` inclusive, `to` exclusive.
    public struct Filter: Sendable, Equatable {
        public var action: String?
        public var actor: String?
        public var userId: UUID?
        public var from: Date?
        public var to: Date?

        public init(action: String? = nil, actor: String? = nil, userId: UUID? = nil, from: Date? = nil, to: Date? = nil) {
            self.action = action
            self.actor = actor
            self.userId = userId
            self.from = from
            self.to = to
        }
    }

    /// Newest first, through `audit_log_app` (app_ref, id DESC); `before` is the id of the last entry
    /// of the previous page.
    public static func search(
        _ db: PostgresConnection, appRef: Int64, filter: Filter, before: Int64?, limit: Int, logger: Logger
    ) async throws -> [Entry] {
        var exact: String?, prefix: String?
        if let action = filter.action {
            if action.hasSuffix(".*") { prefix = String(action.dropLast(1)) } else { exact = action }
        }
        let rows = try await db.query(
            """
            SELECT id, actor, action, status, detail::text, created_at FROM audit_log
            WHERE app_ref = \(appRef) AND id < \(before ?? Int64.max)
              AND (\(exact)::text IS NULL OR action = \(exact))
              AND (\(prefix)::text IS NULL OR starts_with(action, \(prefix)))
              AND (\(filter.actor)::text IS NULL OR actor = \(filter.actor))
              AND (\(filter.userId?.uuidString.lowercased())::text IS NULL OR detail ->> 'userId' = \(filter.userId?.uuidString.lowercased()))
              AND (\(filter.from)::timestamptz IS NULL OR created_at >= \(filter.from))
              AND (\(filter.to)::timestamptz IS NULL OR created_at < \(filter.to))
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        var entries: [Entry] = []
        for try await (id, actor, action, status, detail, createdAt) in rows.decode((Int64, String, String, String, String, Date).self) {
            let tree = (try? JSONDecoder().decode(JSONValue.self, from: Data(detail.utf8))) ?? .object([:])
            entries.append(Entry(id: id, actor: actor, action: action, status: status, detail: tree, createdAt: createdAt))
        }
        return entries
    }
}
