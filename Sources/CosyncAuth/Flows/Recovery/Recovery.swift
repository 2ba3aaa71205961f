import Foundation
import PostgresNIO

extension EndUserFlows {
    /// `POST forgotPassword` (§5.12): e-mails a reset code to the account of a handle or user name.
    public func forgotPassword(appToken: String?, fields: Fields) async throws {
        let app = try await app(token: appToken, whenMissing: .missingParameter)
        let identifier = Input.handle(try fields.require("handle"))
        try requireActive(app)
        if !identifier.contains("@") && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
        guard let user = try await client.withConnection({
            try await EndUserStore.user($0, appRef: app.ref, handleOrUserName: identifier, logger: logger)
        }) else { throw EndUserError.accountDoesNotExist }
        let code = Secrets.numericCode()
        try await client.transaction(logger: logger) { db in
            let sealed = try sealCode(code, purpose: "reset-code:\(app.appId):\(identifier)")
            try await EndUserStore.insertResetCode(
                db, appRef: app.ref, userId: user.id, identifier: identifier, codeSealed: sealed,
                lifetimeSeconds: settings.resetCodeLifetime, logger: logger)
            try await outbox.email(
                db, app: app, template: "resetPassword", locale: user.locale, to: user.handle,
                values: ["HANDLE": identifier, "CODE": code], logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "forgotPassword")
        }
    }

    /// `POST resetPassword` (§5.13): a valid code sets the password, disables every second factor and
    /// revokes the user's access tokens. Wrong codes count against every live code of the identifier.
    public func resetPassword(appToken: String?, fields: Fields) async throws {
        let app = try await app(token: appToken, whenMissing: .missingParameter)
        let identifier = Input.handle(try fields.require("handle"))
        let password = try fields.require("password")
        let rawCode = try fields.require("code")
        try requireActive(app)
        let md5 = try Input.md5(password)
        let code = try Input.code(rawCode)
        let hash = try await hasher.hash(md5Hex: md5)
        let failure: EndUserError? = try await client.transaction(logger: logger) { db in
            let live = try await EndUserStore.liveResetCodes(
                db, appRef: app.ref, identifier: identifier, maxAttempts: settings.maxCodeAttempts, logger: logger)
            let purpose = "reset-code:\(app.appId):\(identifier)"
            // Compare with every live code (constant time each), so timing does not tell which matched.
            var matched: EndUserStore.ResetCode?
            for candidate in live where codeMatches(code, sealed: candidate.codeSealed, purpose: purpose) { matched = candidate }
            guard let matched else {
                try await EndUserStore.countFailedResetCodes(db, ids: live.map(\.id), logger: logger)
                try await audit(db, app: app, handle: identifier, action: "resetPassword", status: "error", detail: ["reason": .string("wrong code")])
                return .invalidData
            }
            guard let user = try await UserStore.find(db, appRef: app.ref, id: matched.userId, forUpdate: true, logger: logger) else {
                return .invalidData
            }
            try await EndUserStore.setPassword(db, userId: user.id, hash: hash, disableSecondFactor: true, logger: logger)
            try await EndUserStore.deleteResetCodes(db, userId: user.id, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "resetPassword")
            return nil
        }
        if let failure { throw failure }
    }

    /// `POST changePassword` (§5.14): every failure is `invalidData` (legacy); success revokes the
    /// user's access tokens (the app must log in again).
    public func changePassword(accessToken: String?, fields: Fields) async throws {
        let (app, user) = try await session(accessToken: accessToken, whenMissing: .invalidData)
        guard let current = fields["password"], let new = fields["newPassword"], current != new else { throw EndUserError.invalidData }
        let md5 = try Input.md5(new)
        try requireActive(app)
        try requireActiveUser(user)
        guard try await verifyPassword(current, user: user) else {
            await audit(app: app, handle: user.handle, action: "changePassword", status: "error", detail: ["reason": .string("wrong password")])
            throw EndUserError.invalidData
        }
        let hash = try await hasher.hash(md5Hex: md5)
        try await client.transaction(logger: logger) { db in
            try await EndUserStore.setPassword(db, userId: user.id, hash: hash, disableSecondFactor: false, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "changePassword")
        }
    }
}
