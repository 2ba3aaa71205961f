import Foundation
import Logging
import PostgresNIO

// `POST forgotPassword`.

/// `POST forgotPassword` (<doc:EndUserAPI> §5.12): e-mails a reset code to the account of a handle or user name.
/// At most `resetMailsPerAccountPerHour` per account and `resetRequestsPerAddressPerHour` per client
/// address (each taken atomically with the code's insert; over either, `rateLimited` and nothing
/// is stored or sent).
struct ForgotPassword: Sendable {
    let client: PostgresClient
    let codes: CodeChallenge
    let outbox: Outbox
    let audit: UserAudit
    let settings: FlowSettings
    let logger: Logger

    func run(app: App, fields: Fields, clientAddress: String?) async throws {
        let identifier = Identifiers.handle(try fields.require("handle"))
        try Gates.requireActive(app)
        if !Identifiers.hasAt(identifier) && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
        guard let user = try await client.withConnection({
            try await UserStore.user($0, appRef: app.ref, handleOrUserName: identifier, logger: logger)
        }) else { throw EndUserError.accountDoesNotExist }
        let code = Secrets.numericCode()
        try await client.transaction(logger: logger) { db in
            // The user row first: an account deleted since the lookup is answered as unknown, not
            // as a failed foreign key on the reset code (a 500).
            guard try await UserStore.lockExisting(db, appRef: app.ref, userId: user.id, logger: logger) != nil else {
                throw EndUserError.accountDoesNotExist
            }
            if let clientAddress {
                guard try await ThrottleStore.take(
                    db, appRef: app.ref, subject: "forgot-ip:\(clientAddress)", limit: settings.resetRequestsPerAddressPerHour,
                    windowSeconds: 3600, logger: logger)
                else { throw EndUserError.rateLimited }
            }
            guard try await ThrottleStore.take(
                db, appRef: app.ref, subject: "forgot:\(user.id)", limit: settings.resetMailsPerAccountPerHour, windowSeconds: 3600,
                logger: logger)
            else { throw EndUserError.rateLimited }
            let sealed = try codes.seal(code, purpose: .resetCode(appId: app.appId, identifier: identifier))
            try await ResetCodeStore.insertResetCode(
                db, appRef: app.ref, userId: user.id, identifier: identifier, codeSealed: sealed,
                lifetimeSeconds: settings.resetCodeLifetime, logger: logger)
            try await outbox.email(
                db, app: app, template: "resetPassword", locale: user.locale, to: user.handle,
                values: ["HANDLE": identifier, "CODE": code], logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "forgotPassword")
        }
    }
}

extension EndUserFlows {
    public func forgotPassword(app: App, fields: Fields, clientAddress: String? = nil) async throws {
        try await ForgotPassword(client: client, codes: codes, outbox: outbox, audit: userAudit, settings: settings, logger: logger)
            .run(app: app, fields: fields, clientAddress: clientAddress)
    }
}
