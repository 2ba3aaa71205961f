import Foundation
import Logging
import PostgresNIO

/// The operator's tenants view (issue 23): sizes and recent activity of a page of apps, in one
/// statement over the page's app ids. Reads only (users, sessions and events are written by their own
/// stores). Each figure is an index range scan limited to one app (sql/0022_portal_tenants.sql):
/// users by `users_app_handle`, live sessions by `sessions_app_expiry`, the last sign-in by
/// `users_app_last_login` (one index entry), events of the last 7 days by `events_app_time`.
public enum TenantStore {
    public struct Stats: Sendable, Equatable {
        public let users: Int64
        public let sessions: Int64
        public let lastLogin: Date?
        public let events7d: Int64
    }

    /// The figures of each of these apps (by app id); an unknown id is absent.
    static func stats(_ db: PostgresConnection, appIds: [String], logger: Logger) async throws -> [String: Stats] {
        guard !appIds.isEmpty else { return [:] }
        let rows = try await db.query(
            """
            SELECT a.app_id,
                (SELECT count(*) FROM users u WHERE u.app_ref = a.id),
                (SELECT count(*) FROM sessions s WHERE s.app_ref = a.id AND s.expires_at > now()),
                (SELECT max(u.last_login) FROM users u WHERE u.app_ref = a.id AND u.last_login IS NOT NULL),
                (SELECT count(*) FROM events e WHERE e.app_ref = a.id AND e.created_at > now() - interval '7 days')
            FROM apps a WHERE a.app_id = ANY(\(appIds))
            """, logger: logger)
        var found: [String: Stats] = [:]
        for try await (appId, users, sessions, last, events) in rows.decode((String, Int64, Int64, Date?, Int64).self) {
            found[appId] = Stats(users: users, sessions: sessions, lastLogin: last, events7d: events)
        }
        return found
    }
}
