import Foundation
import Logging
import PostgresNIO

/// The SMS caps: per number and hour (counted on the outbox) and per app and day.
enum SMSQuotaStore {
    /// SMS queued to one number of the app in the last hour. Takes a transaction-scoped lock on the
    /// (app, number) pair first, so concurrent requests for one number count one after the other.
    static func recentSMS(_ db: PostgresConnection, appRef: Int64, to: String, logger: Logger) async throws -> Int {
        try await db.query("SELECT pg_advisory_xact_lock(\(Int32(truncatingIfNeeded: appRef)), hashtext(\(to)))", logger: logger)
        let rows = try await db.query(
            """
            SELECT count(*)::int FROM messages
            WHERE app_ref = \(appRef) AND channel = 'sms' AND recipient = \(to) AND created_at > now() - interval '1 hour'
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    /// Counts one SMS against today's (UTC) cap of the app; false when the cap is reached.
    static func takeSMSQuota(_ db: PostgresConnection, appRef: Int64, dailyLimit: Int, logger: Logger) async throws -> Bool {
        guard dailyLimit > 0 else { return false }
        let rows = try await db.query(
            """
            INSERT INTO sms_daily_usage AS u (app_ref, day, queued) VALUES (\(appRef), (now() AT TIME ZONE 'UTC')::date, 1)
            ON CONFLICT (app_ref, day) DO UPDATE SET queued = u.queued + 1 WHERE u.queued < \(dailyLimit)
            RETURNING queued
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }
}
