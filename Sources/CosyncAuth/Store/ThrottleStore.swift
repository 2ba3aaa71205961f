import Foundation
import Logging
import PostgresNIO

/// SQL of every limit that must hold under concurrency and on any number of nodes. Each limit is
/// taken as a reservation in one atomic upsert (`INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING`):
/// PostgreSQL serialises concurrent upserts of one row, so no two requests can both take the last
/// slot. Nothing here checks first and counts afterwards.
enum ThrottleStore {
    // MARK: lockouts (login_throttle, portal_throttle)

    /// Where a lockout counter lives. An app's counters are in `login_throttle`, keyed by the app (they go
    /// with it); the Portal's accounts belong to no app, so theirs are in `portal_throttle`, which has the
    /// same columns with `app_ref` always 0. One set of statements serves both: only the table name (from
    /// this closed list, never from input) and the key differ.
    enum Scope: Sendable, Equatable {
        case app(Int64)
        case portal

        var table: String {
            switch self {
            case .app: "login_throttle"
            case .portal: "portal_throttle"
            }
        }

        var appRef: Int64 {
            switch self {
            case .app(let ref): ref
            case .portal: 0
            }
        }
    }

    /// `reserve`, `release` and `clear` on an app's counters (`login_throttle`).
    static func reserve(
        _ db: PostgresConnection, appRef: Int64, subject: String, threshold: Int, windowSeconds: Int, maxLockSeconds: Int,
        logger: Logger
    ) async throws -> Bool {
        try await reserve(
            db, scope: .app(appRef), subject: subject, threshold: threshold, windowSeconds: windowSeconds, maxLockSeconds: maxLockSeconds,
            logger: logger)
    }

    static func release(_ db: PostgresConnection, appRef: Int64, subject: String, threshold: Int, logger: Logger) async throws {
        try await release(db, scope: .app(appRef), subject: subject, threshold: threshold, logger: logger)
    }

    static func clear(_ db: PostgresConnection, appRef: Int64, subject: String, logger: Logger) async throws {
        try await clear(db, scope: .app(appRef), subject: subject, logger: logger)
    }

    /// Reserves one attempt on `subject` before the expensive or sensitive check (bcrypt, a code
    /// compare). Returns false, and counts nothing, while the subject is locked.
    ///
    /// The reservation that brings the count to `threshold` also locks the subject: for 30 s, doubling
    /// with each further counted attempt, at most `maxLockSeconds`. So at most `threshold` checks run per
    /// window, whatever the concurrency. Counts start again only after `windowSeconds` in which the
    /// subject was neither tried nor locked: a lock as long as the window does not reset the count, so
    /// the doubling holds (after the longest lock, one attempt per `maxLockSeconds`).
    static func reserve(
        _ db: PostgresConnection, scope: Scope, subject: String, threshold: Int, windowSeconds: Int, maxLockSeconds: Int,
        logger: Logger
    ) async throws -> Bool {
        let appRef = scope.appRef
        let rows = try await db.query(
            """
            INSERT INTO \(unescaped: scope.table) AS t (app_ref, subject, failures, locked_until, updated_at)
            VALUES (\(appRef), \(subject), 1,
                    CASE WHEN 1 >= \(threshold) THEN now() + make_interval(secs => LEAST(30, \(maxLockSeconds)::int)) END, now())
            ON CONFLICT (app_ref, subject) DO UPDATE SET
                failures = CASE WHEN GREATEST(t.updated_at, COALESCE(t.locked_until, t.updated_at)) < now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE t.failures + 1 END,
                locked_until = CASE
                    WHEN (CASE WHEN GREATEST(t.updated_at, COALESCE(t.locked_until, t.updated_at)) < now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE t.failures + 1 END) >= \(threshold)
                    THEN now() + make_interval(secs => LEAST(\(maxLockSeconds)::int,
                        30 * power(2, LEAST(20, (CASE WHEN GREATEST(t.updated_at, COALESCE(t.locked_until, t.updated_at)) < now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE t.failures + 1 END) - \(threshold)))::int))
                    ELSE NULL END,
                updated_at = now()
            WHERE t.locked_until IS NULL OR t.locked_until <= now()
            RETURNING locked_until IS NOT NULL
            """, logger: logger)
        for try await lockedNow in rows.decode(Bool.self) {
            if lockedNow { Telemetry.lockout(subject: subject) }
            return true
        }
        return false
    }

    /// Gives back one reservation after a success: the count goes down by one, and a lock that this
    /// count no longer reaches is lifted.
    static func release(_ db: PostgresConnection, scope: Scope, subject: String, threshold: Int, logger: Logger) async throws {
        let appRef = scope.appRef
        try await db.query(
            """
            UPDATE \(unescaped: scope.table) SET failures = GREATEST(failures - 1, 0),
                locked_until = CASE WHEN failures - 1 < \(threshold) THEN NULL ELSE locked_until END
            WHERE app_ref = \(appRef) AND subject = \(subject)
            """, logger: logger)
    }

    /// Forgets a subject (a success that proves the caller: its failures no longer count).
    static func clear(_ db: PostgresConnection, scope: Scope, subject: String, logger: Logger) async throws {
        let appRef = scope.appRef
        try await db.query("DELETE FROM \(unescaped: scope.table) WHERE app_ref = \(appRef) AND subject = \(subject)", logger: logger)
    }

    /// Whether any of `subjects` is locked now.
    static func anyLocked(_ db: PostgresConnection, scope: Scope, subjects: [String], logger: Logger) async throws -> Bool {
        let appRef = scope.appRef
        let rows = try await db.query(
            """
            SELECT EXISTS (SELECT 1 FROM \(unescaped: scope.table) WHERE app_ref = \(appRef) AND subject = ANY (\(subjects)) AND locked_until > now())
            """, logger: logger)
        for try await locked in rows.decode(Bool.self) { return locked }
        return false
    }

    /// Seconds until the last of `subjects` that is locked now is unlocked (0 when none is), for a
    /// Retry-After.
    static func lockedSeconds(_ db: PostgresConnection, scope: Scope, subjects: [String], logger: Logger) async throws -> Int {
        let appRef = scope.appRef
        let rows = try await db.query(
            """
            SELECT COALESCE(ceil(EXTRACT(EPOCH FROM max(locked_until) - now())), 0)::int FROM \(unescaped: scope.table)
            WHERE app_ref = \(appRef) AND subject = ANY (\(subjects)) AND locked_until > now()
            """, logger: logger)
        for try await seconds in rows.decode(Int.self) { return max(0, seconds) }
        return 0
    }

    // MARK: fixed-window quotas (rate_limits)

    /// Takes one of `limit` slots of the current window of `windowSeconds` for `subject`. False when
    /// the window's slots are used up (nothing is counted then).
    static func take(
        _ db: PostgresConnection, appRef: Int64, subject: String, limit: Int, windowSeconds: Int, logger: Logger
    ) async throws -> Bool {
        try await takeCounting(db, appRef: appRef, subject: subject, limit: limit, windowSeconds: windowSeconds, logger: logger) != nil
    }

    /// `take`, answering which slot of the window this was (1 for the first), or nil when refused.
    static func takeCounting(
        _ db: PostgresConnection, appRef: Int64, subject: String, limit: Int, windowSeconds: Int, logger: Logger
    ) async throws -> Int? {
        guard limit > 0 else { return nil }
        let rows = try await db.query(
            """
            INSERT INTO rate_limits AS r (app_ref, subject, window_start, count) VALUES (\(appRef), \(subject), now(), 1)
            ON CONFLICT (app_ref, subject) DO UPDATE SET
                count = CASE WHEN r.window_start <= now() - make_interval(secs => \(windowSeconds)::int) THEN 1 ELSE r.count + 1 END,
                window_start = CASE WHEN r.window_start <= now() - make_interval(secs => \(windowSeconds)::int) THEN now() ELSE r.window_start END
            WHERE r.window_start <= now() - make_interval(secs => \(windowSeconds)::int) OR r.count < \(limit)
            RETURNING count
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return nil
    }

    /// Drops a quota subject (e.g. a user's wrong-guess count once the right code was given).
    static func reset(_ db: PostgresConnection, appRef: Int64, subject: String, logger: Logger) async throws {
        try await db.query("DELETE FROM rate_limits WHERE app_ref = \(appRef) AND subject = \(subject)", logger: logger)
    }

    // MARK: housekeeping

    /// Deletes counters nobody has touched for `idleSeconds` (longer than every window and lock), so
    /// keys an attacker makes up (handles, addresses) do not pile up. Returns how many rows went.
    static func purgeIdle(_ db: PostgresConnection, idleSeconds: Int, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH throttles AS (
                DELETE FROM login_throttle
                WHERE GREATEST(updated_at, COALESCE(locked_until, updated_at)) < now() - make_interval(secs => \(idleSeconds)::int)
                RETURNING 1),
            portal AS (
                DELETE FROM portal_throttle
                WHERE GREATEST(updated_at, COALESCE(locked_until, updated_at)) < now() - make_interval(secs => \(idleSeconds)::int)
                RETURNING 1),
            quotas AS (
                DELETE FROM rate_limits WHERE window_start < now() - make_interval(secs => \(idleSeconds)::int) RETURNING 1)
            SELECT (SELECT count(*) FROM throttles)::int + (SELECT count(*) FROM portal)::int + (SELECT count(*) FROM quotas)::int
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
