import Foundation
import Logging
import PostgresNIO

// `POST setUserName` and `GET userNameAvailable`.

/// The user name steps: `POST setUserName` (<doc:EndUserAPI> §5.21) and `GET userNameAvailable`
/// (<doc:EndUserAPI> §5.22).
struct UserNames: Sendable {
    let client: PostgresClient
    let audit: UserAudit
    let logger: Logger

    /// `POST setUserName`: once per user; `^[a-z][a-z0-9]*$`; unique per app and distinct from every
    /// handle (a clash, even under concurrency, is `userNameInUse`).
    func set(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let raw = try fields.require("userName")
        guard app.settings.userNamesEnabled else { throw EndUserError.userNamesDisabled }
        try Gates.requireActive(app)
        try Gates.requireActiveUser(user)
        guard user.userName == nil || user.userName == "" else { throw EndUserError.invalidData }
        guard let name = Identifiers.normalizedUserName(raw) else { throw EndUserError.invalidData }
        do {
            let failure: EndUserError? = try await client.transaction(logger: logger) { db in
                if try await UserStore.identifierTaken(db, appRef: app.ref, name: name, logger: logger) { return .userNameInUse }
                guard try await UserStore.setUserName(db, userId: user.id, userName: name, logger: logger) else { return .invalidData }
                try await audit.record(db, app: app, handle: user.handle, action: "setUserName", detail: ["userName": .string(name)])
                return nil
            }
            if let failure { throw failure }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw EndUserError.userNameInUse
        }
    }

    /// `GET userNameAvailable`: false also for names setUserName would reject.
    func available(caller: AuthenticatedCaller, userName raw: String?) async throws -> Bool {
        let app = caller.app
        guard let raw, !raw.isEmpty else { throw EndUserError.missingParameter }
        guard app.settings.userNamesEnabled else { throw EndUserError.userNamesDisabled }
        guard let name = Identifiers.normalizedUserName(raw) else { return false }
        return !(try await client.withConnection { try await UserStore.identifierTaken($0, appRef: app.ref, name: name, logger: logger) })
    }
}

extension EndUserFlows {
    var userNames: UserNames { UserNames(client: client, audit: userAudit, logger: logger) }

    public func setUserName(caller: AuthenticatedCaller, fields: Fields) async throws {
        try await userNames.set(caller: caller, fields: fields)
    }

    public func userNameAvailable(caller: AuthenticatedCaller, userName raw: String?) async throws -> Bool {
        try await userNames.available(caller: caller, userName: raw)
    }
}
