import Foundation
import PostgresNIO

// `POST deleteAccount`.

extension EndUserFlows {
    /// `POST deleteAccount` (<doc:EndUserAPI> §5.24): password mode, or token mode for social accounts (the provider
    /// token must verify and name the user's own provider account). Deleting the user also deletes its reset codes (cascade) and
    /// so revokes its access tokens (the user no longer exists).
    /// The password mode is checked under the same reserved limit as a login of that account.
    public func deleteAccount(caller: AuthenticatedCaller, fields: Fields, clientAddress: String? = nil) async throws {
        let (app, user) = (caller.app, caller.user)
        let handleField = fields["handle"], password = fields["password"], socialToken = fields["token"]
        guard handleField != nil || password != nil || socialToken != nil else { throw EndUserError.missingParameter }
        // Unlike legacy, a suspended (402) or migrated (413) app's users cannot delete their accounts
        // either: the app is frozen as a whole (README "Suspended apps").
        try requireActive(app)
        if let handleField, let password {
            let handle = Identifiers.handle(handleField)
            if Identifiers.hasAt(handle) && handle != user.handle.lowercased() { throw EndUserError.invalidCredentials }
            if !Identifiers.hasAt(handle) && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
            guard let target = try await client.withConnection({
                try await UserStore.user($0, appRef: app.ref, handleOrUserName: handle, logger: logger)
            }), target.id == user.id else { throw EndUserError.invalidCredentials }
            let throttle = LoginThrottle(flows: self, app: app, handle: user.handle.lowercased(), address: clientAddress)
            guard try await throttle.reserve() else {
                await audit(app: app, handle: user.handle, action: "deleteAccount", status: "error", detail: ["reason": .string("locked")])
                throw EndUserError.invalidCredentials
            }
            guard PasswordHasher.isMD5Hex(password), try await throttle.check({ try await verifyPassword(password, user: user) }) else {
                await audit(app: app, handle: user.handle, action: "deleteAccount", status: "error", detail: ["reason": .string("wrong password")])
                throw EndUserError.invalidCredentials
            }
        } else if let socialToken {
            guard try await verifyOwnSocialToken(app: app, user: user, token: socialToken) else {
                await audit(app: app, handle: user.handle, action: "deleteAccount", status: "error", detail: ["reason": .string("invalid provider token")])
                throw EndUserError.invalidSocialToken
            }
        } else {
            throw EndUserError.invalidData
        }
        try await client.transaction(logger: logger) { db in
            // Already gone (a concurrent deleteAccount won): no second deletion event.
            guard try await UserStore.delete(db, appRef: app.ref, id: user.id, logger: logger) != nil else { throw EndUserError.invalidAccessToken }
            try await audit(db, app: app, handle: user.handle, action: "deleteAccount")
            try await Events.record(db, app: app, type: .userDeleted, user: user, logger: logger)
        }
    }
}
