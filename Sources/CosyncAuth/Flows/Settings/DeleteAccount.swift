import Foundation
import Logging
import PostgresNIO

// `POST deleteAccount`.

/// `POST deleteAccount` (<doc:EndUserAPI> §5.24): password mode, or token mode for social accounts (the provider
/// token must verify and name the user's own provider account). Deleting the user also deletes its reset codes (cascade) and
/// so revokes its access tokens (the user no longer exists).
/// The password mode is checked under the same reserved limit as a login of that account.
struct DeleteAccount: Sendable {
    let client: PostgresClient
    let passwords: PasswordMethod
    let socialIdentities: SocialIdentities
    let audit: UserAudit
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields, clientAddress: String?) async throws {
        let (app, user) = (caller.app, caller.user)
        let handleField = fields["handle"], password = fields["password"], socialToken = fields["token"]
        guard handleField != nil || password != nil || socialToken != nil else { throw EndUserError.missingParameter }
        // Unlike legacy, a suspended (402) or migrated (413) app's users cannot delete their accounts
        // either: the app is frozen as a whole (README "Suspended apps").
        try Gates.requireActive(app)
        let proof: AuthProof
        if let handleField, let password {
            let handle = Identifiers.handle(handleField)
            if Identifiers.hasAt(handle) && handle != user.handle.lowercased() { throw EndUserError.invalidCredentials }
            if !Identifiers.hasAt(handle) && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
            guard let target = try await client.withConnection({
                try await UserStore.user($0, appRef: app.ref, handleOrUserName: handle, logger: logger)
            }), target.id == user.id else { throw EndUserError.invalidCredentials }
            do {
                proof = try await passwords.reprove(app: app, user: user, password: password, address: clientAddress)
            } catch let refused as PasswordMethod.Refused {
                await audit.record(app: app, handle: user.handle, action: "deleteAccount", status: "error", detail: ["reason": .string(refused.reason)])
                throw EndUserError.invalidCredentials
            }
        } else if let socialToken {
            guard let presented = try await socialIdentities.verifyOwnSocialToken(app: app, user: user, token: socialToken),
                StepUp.allows(.deleteAccount, proofs: [presented], app: app)
            else {
                await audit.record(app: app, handle: user.handle, action: "deleteAccount", status: "error", detail: ["reason": .string("invalid provider token")])
                throw EndUserError.invalidSocialToken
            }
            proof = presented
        } else {
            throw EndUserError.invalidData
        }
        // The factor this request presented is the proof; the session's own sign-in does not replace
        // it on this wire (the contract asks for a password or a provider token every time).
        try StepUp.require(.deleteAccount, proofs: [proof], app: app, else: EndUserError.invalidCredentials)
        try await client.transaction(logger: logger) { db in
            // Already gone (a concurrent deleteAccount won): no second deletion event.
            guard try await UserStore.delete(db, appRef: app.ref, id: user.id, logger: logger) != nil else { throw EndUserError.invalidAccessToken }
            try await audit.record(db, app: app, handle: user.handle, action: "deleteAccount")
            try await Events.record(db, app: app, type: .userDeleted, user: user, logger: logger)
        }
    }
}

extension EndUserFlows {
    public func deleteAccount(caller: AuthenticatedCaller, fields: Fields, clientAddress: String? = nil) async throws {
        try await DeleteAccount(client: client, passwords: passwords, socialIdentities: socialIdentities, audit: userAudit, logger: logger)
            .run(caller: caller, fields: fields, clientAddress: clientAddress)
    }
}
