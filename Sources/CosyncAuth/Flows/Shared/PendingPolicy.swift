import Foundation
import Logging
import PostgresNIO

// What pending signups and invites share: when a code can still complete one, and the e-mails of a handle.

/// The rules of pending signups and invites, as a small type the signup and invite steps declare.
struct PendingPolicy: Sendable {
    let maxCodeAttempts: Int
    let codeMailsPerHandlePerHour: Int
    let logger: Logger

    /// A pending signup or invite whose code can still complete it.
    func isLive(_ pending: PendingStore.Pending) -> Bool {
        pending.attempts < maxCodeAttempts && pending.expiresAt > Date() && pending.codeSealed != nil
    }

    /// One signup or invite e-mail of a handle (new code or re-send), within `codeMailsPerHandlePerHour`.
    func takeCodeMail(_ db: PostgresConnection, app: App, handle: String) async throws -> Bool {
        try await ThrottleStore.take(
            db, appRef: app.ref, subject: "code-mail:\(handle)", limit: codeMailsPerHandlePerHour, windowSeconds: 3600,
            logger: logger)
    }
}

extension EndUserFlows {
    var pendingPolicy: PendingPolicy {
        PendingPolicy(maxCodeAttempts: settings.maxCodeAttempts, codeMailsPerHandlePerHour: settings.codeMailsPerHandlePerHour, logger: logger)
    }
}
