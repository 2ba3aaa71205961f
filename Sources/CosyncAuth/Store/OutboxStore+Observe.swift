import Foundation
import Logging
import PostgresNIO

/// The outbox as the Portal's overview shows it (issue 23): how many of an app's messages wait or
/// failed, and since when. Through the partial index `messages_app_open` (sql/0023), so the read does
/// not walk the app's sent messages.
extension OutboxStore {
    /// Per status (`queued`, `sending`, `failed`): the number of the app's messages and the oldest one's time.
    static func openCounts(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> [(status: String, count: Int, oldest: Date?)] {
        let rows = try await db.query(
            """
            SELECT status, count(*)::int, min(created_at) FROM messages
            WHERE app_ref = \(appRef) AND status IN ('queued', 'sending', 'failed')
            GROUP BY status
            """, logger: logger)
        var result: [(status: String, count: Int, oldest: Date?)] = []
        for try await (status, count, oldest) in rows.decode((String, Int, Date?).self) { result.append((status, count, oldest)) }
        return result
    }
}
