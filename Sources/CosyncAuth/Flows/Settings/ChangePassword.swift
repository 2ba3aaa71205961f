import Foundation
import Logging
import PostgresNIO

// `POST changePassword`.

/// `POST changePassword` (<doc:EndUserAPI> §5.14): every failure is `invalidData` (legacy). Success ends every
/// other session of the user and keeps the caller's, so the app's own access token goes on working
/// (the shipped SDKs cannot get a new one without asking the user to log in again).
/// The current password is checked under the same reserved limit as a login of that account
/// (`PasswordMethod`), so a stolen access token does not give unlimited guesses. Whether the caller
/// may change it is the step-up rule's answer (`StepUp`, `.changePassword`): the session's own last
/// proof stands in for the current password only where that rule accepts it.
struct ChangePassword: Sendable {
    let client: PostgresClient
    let hasher: PasswordHasher
    let passwords: PasswordMethod
    let audit: UserAudit
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields, clientAddress: String?) async throws {
        let (app, user) = (caller.app, caller.user)
        let current = fields["password"]
        guard let new = fields["newPassword"], current != new else { throw EndUserError.invalidData }
        let sessionProofs = [caller.sessionProof].compactMap { $0 }
        guard current != nil || StepUp.allows(.changePassword, proofs: sessionProofs, app: app) else { throw EndUserError.invalidData }
        let md5 = try Input.md5(new)
        try Gates.requireActive(app)
        try Gates.requireActiveUser(user)
        var proofs = sessionProofs
        if let current {
            do {
                proofs.append(try await passwords.reprove(app: app, user: user, password: current, address: clientAddress))
            } catch let refused as PasswordMethod.Refused {
                await audit.record(app: app, handle: user.handle, action: "changePassword", status: "error", detail: ["reason": .string(refused.reason)])
                throw EndUserError.invalidData
            }
        }
        try StepUp.require(.changePassword, proofs: proofs, app: app, else: EndUserError.invalidData)
        let hash = try await hasher.hash(md5Hex: md5, tenant: String(app.ref))
        try await client.transaction(logger: logger) { db in
            // Nil: the user was deleted while its password was checked; its token no longer names anyone.
            guard let ended = try await UserWrites.setPassword(
                db, appRef: app.ref, userId: user.id, hash: hash, keepSession: caller.sessionId,
                keepTokenHash: caller.sessionId == nil ? caller.tokenHash : nil, logger: logger)
            else { throw EndUserError.invalidAccessToken }
            // The password typed proved the caller's session again, now.
            if current != nil, let kept = caller.sessionId { try await SessionStore.reprove(db, sessionId: kept, by: .password, logger: logger) }
            try await Events.sessionsRevoked(db, app: app, user: user, ended, reason: "password_changed", logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "changePassword")
            try await Events.record(db, app: app, type: .userPasswordChanged, user: user, logger: logger)
        }
    }
}

extension EndUserFlows {
    public func changePassword(caller: AuthenticatedCaller, fields: Fields, clientAddress: String? = nil) async throws {
        try await ChangePassword(client: client, hasher: hasher, passwords: passwords, audit: userAudit, logger: logger)
            .run(caller: caller, fields: fields, clientAddress: clientAddress)
    }
}
