import Foundation
import Logging
import PostgresNIO

/// What the Portal's overview draws (issue 23): an app's activity per day, its webhook backlog and its
/// outbox. Read-only; each read is one indexed statement on the owning store.
public struct AppActivity: Sendable {
    /// One UTC day of the period, oldest first.
    public struct Day: Sendable, Equatable {
        /// Midnight UTC of the day.
        public let date: Date
        public let signIns: Int
        public let failures: Int
        public let lockouts: Int
        public let newUsers: Int
    }

    /// An endpoint's undelivered messages.
    public struct Backlog: Sendable, Equatable {
        public let endpointId: UUID
        public let url: String
        public let enabled: Bool
        public let count: Int
        public let oldest: Date?
    }

    public let days: [Day]
    public let backlog: [Backlog]
    /// Messages waiting to be sent (queued or being sent), failed ones, and the oldest waiting one's time.
    public let outboxQueued: Int
    public let outboxFailed: Int
    public let outboxOldest: Date?
}

extension AppRecords {
    /// The event types the overview counts.
    static let activityTypes: [EventType] = [.userLoginSucceeded, .userLoginFailed, .userLocked, .userCreated]

    /// The last `days` UTC days (today included; 1–90) of sign-ins, failures, lockouts and new users
    /// (from the event stream, kept 30 days), the webhook backlog per endpoint, and the outbox.
    public func activity(app: App, days: Int = 30, now: Date = Date()) async throws -> AppActivity {
        let count = min(max(days, 1), 90)
        let today = Int((now.timeIntervalSince1970 / 86_400).rounded(.down))
        let first = today - count + 1
        let since = Date(timeIntervalSince1970: TimeInterval(first) * 86_400)
        let (counts, backlog, outbox) = try await client.withConnection { db in
            let counts = try await EventStore.dailyCounts(
                db, appRef: app.ref, types: Self.activityTypes.map(\.rawValue), since: since, logger: logger)
            let backlog = try await EventStore.appBacklog(db, appRef: app.ref, logger: logger)
            let outbox = try await OutboxStore.openCounts(db, appRef: app.ref, logger: logger)
            return (counts, backlog, outbox)
        }
        var table: [String: [Int: Int]] = [:]
        for row in counts { table[row.type, default: [:]][row.day, default: 0] += row.count }
        func value(_ type: EventType, _ day: Int) -> Int { table[type.rawValue]?[day] ?? 0 }
        let daysList = (first...today).map { day in
            AppActivity.Day(
                date: Date(timeIntervalSince1970: TimeInterval(day) * 86_400), signIns: value(.userLoginSucceeded, day),
                failures: value(.userLoginFailed, day), lockouts: value(.userLocked, day), newUsers: value(.userCreated, day))
        }
        var queued = 0, failed = 0
        var oldest: Date?
        for row in outbox {
            if row.status == "failed" {
                failed += row.count
            } else {
                queued += row.count
                if let time = row.oldest, oldest.map({ time < $0 }) ?? true { oldest = time }
            }
        }
        return AppActivity(
            days: daysList,
            backlog: backlog.map { AppActivity.Backlog(endpointId: $0.endpoint, url: $0.url, enabled: $0.enabled, count: $0.count, oldest: $0.oldest) },
            outboxQueued: queued, outboxFailed: failed, outboxOldest: oldest)
    }

    /// The audit log of the app, filtered (see `AuditLog.Filter`), newest first.
    public func logs(app: App, filter: AuditLog.Filter, limit: Int, cursor: String?) async throws -> Page<AuditLog.Entry> {
        let before = try Cursor.intOrNil(cursor)
        let rows = try await client.withConnection { db in
            try await AuditLog.search(db, appRef: app.ref, filter: filter, before: before, limit: limit + 1, logger: logger)
        }
        let page = Array(rows.prefix(limit))
        return Page(items: page, nextCursor: rows.count > limit ? page.last.map { Cursor.encode($0.id) } : nil)
    }
}
