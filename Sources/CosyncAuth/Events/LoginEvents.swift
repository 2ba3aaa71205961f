import Foundation
import Logging
import PostgresNIO

/// The events of a wrong password, as a small type the login step declares.
struct FailedLoginEvents: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// A wrong password: `user.login.failed`, and `user.locked` when this attempt (or a concurrent one)
    /// left the account locked for this address or as a whole. The login's own work has no transaction
    /// to join (its reservation committed before the check), so these get a short one of their own.
    /// Failing to write them does not change the answer the caller gets; it is logged.
    func record(app: App, user: User, throttle: LoginThrottle) async {
        do {
            try await client.transaction(logger: logger) { db in
                try await Events.record(db, app: app, type: .userLoginFailed, user: user, data: ["reason": .string("wrong_password")], logger: logger)
                if try await throttle.isLocked(db) {
                    try await Events.record(db, app: app, type: .userLocked, user: user, logger: logger)
                }
            }
        } catch {
            logger.warning("could not record a failed-login event", metadata: ["app": "\(app.appId)", "error": "\(type(of: error))"])
        }
    }
}

extension LoginThrottle {
    /// Whether the (handle, address) or the whole-handle counter is locked now.
    func isLocked(_ db: PostgresConnection) async throws -> Bool {
        try await ThrottleStore.anyLocked(db, scope: scope, subjects: subjects.prefix(2).map(\.0), logger: logger)
    }
}
