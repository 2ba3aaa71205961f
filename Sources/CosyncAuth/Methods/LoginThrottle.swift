import Foundation
import Logging
import PostgresNIO

/// The password-guessing limit of one attempt (login, and the password checks of changePassword and
/// deleteAccount, which count with the login failures of the same account).
///
/// Each attempt is **reserved** in PostgreSQL before the password is checked, on three subjects at
/// once, in one transaction (any refusal rolls the others back):
/// - `login:<handle>|<address>`: the app's `maxLoginAttempts` per (handle, client address). An address
///   that keeps failing locks only itself for that handle.
/// - `handle:<handle>`: `handleThresholdFactor` × `maxLoginAttempts` for the handle as a whole, which
///   only failures spread over several addresses reach (one address stops at its own limit first).
/// - `ip:<address>`: `addressThresholdFactor` × `maxLoginAttempts` for an address across handles.
///
/// The reservation that reaches a threshold locks that subject for 30 s, doubling with each further
/// counted attempt, at most `maxLockout` (15 min); while locked nothing is checked or counted. Counts
/// start again after `throttleWindow` without an attempt. A correct password forgets the
/// (handle, address) count and gives back its reservation on the other two.
///
/// The Portal's sign-in uses the same limit on its own counters (`ThrottleStore.Scope.portal`), with the
/// account's e-mail as the handle.
struct LoginThrottle {
    let client: PostgresClient
    let limits: PasswordLimits
    let logger: Logger
    /// Whose counters: an app's, or the Portal's.
    let scope: ThrottleStore.Scope
    /// The (handle, address) threshold the others are multiples of.
    let base: Int
    let handle: String
    let address: String?

    init(client: PostgresClient, limits: PasswordLimits, logger: Logger, app: App, handle: String, address: String?) {
        self.init(
            client: client, limits: limits, logger: logger, scope: .app(app.ref), maxAttempts: app.settings.maxLoginAttempts,
            handle: handle, address: address)
    }

    init(
        client: PostgresClient, limits: PasswordLimits, logger: Logger, scope: ThrottleStore.Scope, maxAttempts: Int, handle: String,
        address: String?
    ) {
        self.client = client
        self.limits = limits
        self.logger = logger
        self.scope = scope
        self.base = max(1, maxAttempts)
        self.handle = handle
        self.address = address
    }

    /// Thrown by `reserve(in:)` while a subject is locked: the caller's transaction must roll back, so
    /// that the subjects counted before it are not counted either.
    struct Locked: Error {}

    /// (subject, threshold) of every counter this attempt takes.
    var subjects: [(String, Int)] {
        var all = [("login:\(handle)|\(address ?? "-")", base), ("handle:\(handle)", base * limits.handleThresholdFactor)]
        if let address { all.append(("ip:\(address)", base * limits.addressThresholdFactor)) }
        return all
    }

    /// True when the attempt may go ahead (and is now counted); false while any subject is locked.
    func reserve() async throws -> Bool {
        do {
            try await Telemetry.sql("reserve attempt") {
                try await client.transaction(logger: logger) { db in try await reserve(in: db) }
            }
            return true
        } catch is Locked {
            return false
        }
    }

    /// Counts the attempt on every subject inside the caller's transaction (a login looks its user up
    /// in the same one); throws `Locked` while any subject is locked.
    func reserve(in db: PostgresConnection) async throws {
        for (subject, threshold) in subjects {
            guard try await ThrottleStore.reserve(
                db, scope: scope, subject: subject, threshold: threshold, windowSeconds: limits.throttleWindow,
                maxLockSeconds: limits.maxLockout, logger: logger)
            else { throw Locked() }
        }
    }

    /// The password check of a reserved attempt. Right: `succeeded()` (unless `releasing` is false: a
    /// login gives the attempt back inside its session transaction, `release(in:)`). Wrong: the attempt
    /// stays counted. A check that throws never reached a verdict (cancelled at the request bound while
    /// queued for bcrypt, a database error): its reservation is given back, even from a cancelled
    /// task, so an overloaded server cannot lock users out, and the error is rethrown.
    func check(releasing: Bool = true, _ verify: () async throws -> Bool) async throws -> Bool {
        let right: Bool
        do {
            right = try await verify()
        } catch {
            let throttle = self
            await Task { _ = try? await withDeadline(.seconds(5)) { try await throttle.giveBack(); return true } }.value
            throw error
        }
        if right && releasing { try await succeeded() }
        return right
    }

    /// Takes this attempt's reservation back from every subject.
    func giveBack() async throws {
        try await client.withConnection { db in
            for (subject, threshold) in subjects {
                try await ThrottleStore.release(db, scope: scope, subject: subject, threshold: threshold, logger: logger)
            }
        }
    }

    /// After a correct password (or when the password was not checked after all).
    func succeeded() async throws {
        try await Telemetry.sql("release attempt") { try await released() }
    }

    private func released() async throws {
        try await client.withConnection { db in try await release(in: db) }
    }

    /// A correct password, in the caller's transaction: forgets the (handle, address) count and gives
    /// the attempt back to the other subjects.
    func release(in db: PostgresConnection) async throws {
        for (index, (subject, threshold)) in subjects.enumerated() {
            if index == 0 {
                try await ThrottleStore.clear(db, scope: scope, subject: subject, logger: logger)
            } else {
                try await ThrottleStore.release(db, scope: scope, subject: subject, threshold: threshold, logger: logger)
            }
        }
    }
}
