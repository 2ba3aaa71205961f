import Foundation
import Logging
import PostgresNIO

// `POST resetPassword`.

/// `POST resetPassword` (<doc:EndUserAPI> §5.13): a valid code sets the password, disables every second factor and
/// revokes the user's access tokens. Wrong guesses are counted per user across all of the user's
/// codes, old and new, each reserved before the compare, so asking for a new code never buys fresh
/// guesses: at most `maxCodeAttempts` per (user, client address) and `handleThresholdFactor` times
/// that per user, per `resetCodeLifetime` (so one address cannot lock the owner out of recovery).
struct ResetPassword: Sendable {
    let client: PostgresClient
    let hasher: PasswordHasher
    let codes: CodeChallenge
    let audit: UserAudit
    let settings: FlowSettings
    let logger: Logger

    func run(app: App, fields: Fields, clientAddress: String?) async throws {
        let identifier = Identifiers.handle(try fields.require("handle"))
        let password = try fields.require("password")
        let rawCode = try fields.require("code")
        try Gates.requireActive(app)
        let md5 = try Input.md5(password)
        let code = try Input.code(rawCode)
        enum Check { case matched(UUID), failed }
        let check: Check = try await client.transaction(logger: logger) { db in
            let live = try await ResetCodeStore.liveResetCodes(db, appRef: app.ref, identifier: identifier, logger: logger)
            guard let userId = live.first?.userId else { return .failed }
            let perAddress = "reset-guess:\(userId)|\(clientAddress ?? "-")", perUser = "reset-guess:\(userId)"
            guard try await ThrottleStore.take(
                db, appRef: app.ref, subject: perAddress, limit: settings.maxCodeAttempts, windowSeconds: settings.resetCodeLifetime,
                logger: logger),
                try await ThrottleStore.take(
                    db, appRef: app.ref, subject: perUser, limit: settings.maxCodeAttempts * settings.handleThresholdFactor,
                    windowSeconds: settings.resetCodeLifetime, logger: logger)
            else {
                try await audit.record(db, app: app, handle: identifier, action: "resetPassword", status: "error", detail: ["reason": .string("too many wrong codes")])
                return .failed
            }
            let purpose = SealPurpose.resetCode(appId: app.appId, identifier: identifier)
            // Compare with every live code (constant time each), so timing does not tell which matched.
            var matched: ResetCodeStore.ResetCode?
            for candidate in live where codes.matches(code, sealed: candidate.codeSealed, purpose: purpose) { matched = candidate }
            guard let matched else {
                try await audit.record(db, app: app, handle: identifier, action: "resetPassword", status: "error", detail: ["reason": .string("wrong code")])
                return .failed
            }
            // The code is spent now, whatever happens next: a second use finds nothing.
            try await ResetCodeStore.deleteResetCodes(db, userId: matched.userId, logger: logger)
            try await ThrottleStore.reset(db, appRef: app.ref, subject: perAddress, logger: logger)
            return .matched(matched.userId)
        }
        guard case .matched(let userId) = check else { throw EndUserError.invalidData }
        let hash = try await hasher.hash(md5Hex: md5, tenant: String(app.ref))
        try await client.transaction(logger: logger) { db in
            guard let user = try await UserStore.find(db, appRef: app.ref, id: userId, forUpdate: true, logger: logger) else {
                throw EndUserError.invalidData
            }
            let ended = try await UserWrites.setPassword(db, appRef: app.ref, userId: user.id, hash: hash, disableSecondFactor: true, logger: logger) ?? []
            try await Events.sessionsRevoked(db, app: app, user: user, ended, reason: "password_reset", logger: logger)
            try await IdentityStore.ensurePassword(db, appRef: app.ref, userId: user.id, handle: user.handle, logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "resetPassword")
            try await Events.record(db, app: app, type: .userPasswordReset, user: user, logger: logger)
        }
    }
}

extension EndUserFlows {
    public func resetPassword(app: App, fields: Fields, clientAddress: String? = nil) async throws {
        try await ResetPassword(client: client, hasher: hasher, codes: codes, audit: userAudit, settings: settings, logger: logger)
            .run(app: app, fields: fields, clientAddress: clientAddress)
    }
}
