import Foundation
import Logging
import PostgresNIO

// The small pieces the flow steps share. Each names its own dependencies, so a step that uses one
// declares it, not the whole of `EndUserFlows`.

/// The status gates of every end-user step.
enum Gates {
    /// `suspended` → 402, `migrated` → 413.
    static func requireActive(_ app: App) throws(EndUserError) {
        switch app.status {
        case .active: return
        case .migrated: throw .appMigrated
        default: throw .appSuspended
        }
    }

    static func requireActiveUser(_ user: User) throws(EndUserError) {
        guard user.status == .active else { throw .userSuspended }
    }
}

/// The audit rows of end-user steps (actor `user`, the handle in the detail).
struct UserAudit: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// In the step's transaction.
    func record(_ db: PostgresConnection, app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async throws {
        var all = detail
        all["handle"] = .string(handle)
        try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: "user", action: action, status: status, detail: all, logger: logger)
    }

    /// On its own, best effort (a refusal's row must not turn the refusal into a 500).
    func record(app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async {
        try? await client.withConnection { db in
            try await record(db, app: app, handle: handle, action: action, status: status, detail: detail)
        }
    }
}

/// Account rows as the steps write them: a new user, the caller's row locked, the anonymous quota.
struct Accounts: Sendable {
    let settings: FlowSettings
    let logger: Logger

    /// The first statement of an access-token write (end-user or AppKey): locks the caller's user row
    /// and answers the user as it is now. A user deleted since the token was checked is
    /// `invalidAccessToken`, one suspended meanwhile `userSuspended`, as the next request would answer.
    @discardableResult
    func lockCaller(_ db: PostgresConnection, app: App, userId: UUID) async throws -> User {
        guard let user = try await UserStore.lockExisting(db, appRef: app.ref, userId: userId, logger: logger) else {
            throw EndUserError.invalidAccessToken
        }
        guard user.status == .active else { throw EndUserError.userSuspended }
        return user
    }

    /// Counts one new anonymous account, per client address and per app (both, or neither: the caller's
    /// transaction rolls back on refusal); false when either quota is used up for this hour.
    func takeAnonymousAccountQuota(_ db: PostgresConnection, app: App) async throws -> Bool {
        let address = ClientOrigin.current.address ?? "-"
        for (subject, limit) in [
            ("anonymous-account-ip:\(address)", settings.anonymousAccountsPerAddressPerHour),
            ("anonymous-account", settings.anonymousAccountsPerAppPerHour),
        ] {
            guard try await ThrottleStore.take(db, appRef: app.ref, subject: subject, limit: limit, windowSeconds: 3600, logger: logger)
            else { return false }
        }
        return true
    }

    /// Inserts a user, mapping a handle clash to `handleAlreadyRegistered`.
    func insertUser(
        _ db: PostgresConnection, app: App, handle: String, passwordHash: String?, locale: String, metadata: [String: JSONValue]
    ) async throws -> User {
        do {
            let user = try await UserWrites.insert(
                db, appRef: app.ref, handle: handle, userName: nil, passwordHash: passwordHash, locale: locale, metaData: metadata,
                logger: logger)
            try await Events.record(db, app: app, type: .userCreated, user: user, logger: logger)
            return user
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw EndUserError.handleAlreadyRegistered
        }
    }
}
