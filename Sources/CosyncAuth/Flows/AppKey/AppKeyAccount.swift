import Foundation
import PostgresNIO

extension AppKeyFlows {
    /// K1 `GET app`: the app's public settings (<doc:AppKeyAPI> §2.1). Answers for a migrated app too: the app
    /// is resolved with the status gates off. `appToken` is the app token the caller presented, if any.
    public func getApp(app: App, appToken: String?) async throws -> AppKeyAppDescription {
        guard app.status != .suspended else { throw AppKeyError.appSuspended }
        let view = try await apps.view(appId: app.appId)
        let first: (String) -> String? = { list in list.split(separator: ",").first.map { String($0) } }
        return AppKeyAppDescription(
            app: app, displayAppId: Self.displayAppId(app), publicKey: view.rawPublicKey, appToken: appToken,
            googleClientId: first(app.settings.googleClientId), appleBundleId: first(app.settings.appleBundleId))
    }

    /// K2 `GET user`.
    public func getUser(caller: AppKeyCaller) async throws -> AppKeyUserResult {
        try await userResult(app: caller.app, user: caller.user, accessToken: caller.accessToken)
    }

    /// K12 `POST setLocale`.
    public func setLocale(caller: AppKeyCaller, fields: AppKeyFields) async throws {
        let locale = try locale(try fields.require("locale"), app: caller.app)
        try await client.transaction(logger: logger) { db in
            try await accounts.lockCaller(db, app: caller.app, userId: caller.user.id)  // its errors map to AppKey's 405 and 404
            try await UserStore.setLocale(db, userId: caller.user.id, locale: locale, logger: logger)
        }
    }

    /// A user name K13 would accept: `^[a-z][a-z0-9]*$`, at most 32 characters.
    static func userName(_ raw: String) -> String? {
        guard let name = Identifiers.normalizedUserName(raw), name.count <= 32 else { return nil }
        return name
    }

    /// K13 `POST setUsername` / `setUserName`: set once.
    public func setUserName(caller: AppKeyCaller, fields: AppKeyFields) async throws {
        let raw = try fields.require("userName")
        guard caller.app.settings.userNamesEnabled else { throw AppKeyError.userNamesNotSupported }
        guard let name = Self.userName(raw) else { throw AppKeyError.invalidData.with("invalid user name") }
        guard caller.user.userName == nil else { throw AppKeyError.invalidData.with("the user name is already set") }
        try await client.transaction(logger: logger) { db in
            if try await UserStore.user(db, appRef: caller.app.ref, handle: name, logger: logger) != nil {
                throw AppKeyError.invalidData.with("invalid user name")
            }
            if try await PasskeyStore.user(db, appRef: caller.app.ref, userName: name, logger: logger) != nil { throw AppKeyError.userNameInUse }
            do {
                guard try await UserStore.setUserName(db, userId: caller.user.id, userName: name, logger: logger) else {
                    throw AppKeyError.invalidData.with("the user name is already set")
                }
            } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
                throw AppKeyError.userNameInUse
            }
            try await audit(db, app: caller.app, handle: caller.user.handle, action: "setUserName")
        }
    }

    /// K14 `GET userNameAvailable`.
    public func userNameAvailable(caller: AppKeyCaller, userName: String?) async throws -> Bool {
        guard caller.app.settings.userNamesEnabled else { throw AppKeyError.userNamesNotSupported }
        guard let raw = userName?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { throw AppKeyError.missingParameter }
        guard let name = Self.userName(raw) else { return false }
        return try await client.withConnection { db in
            let byName = try await PasskeyStore.user(db, appRef: caller.app.ref, userName: name, logger: logger)
            let byHandle = try await UserStore.user(db, appRef: caller.app.ref, handle: name, logger: logger)
            return byName == nil && byHandle == nil
        }
    }

    /// K19 `POST updateProfile`: `displayName`, or `firstName` + `lastName`.
    public func updateProfile(caller: AppKeyCaller, fields: AppKeyFields) async throws {
        guard let names = try Self.names(fields, required: false) else { throw AppKeyError.missingParameter.with("missing parameter: displayName") }
        try await client.transaction(logger: logger) { db in
            // The user row first: a deletion running meanwhile either waits or has already happened.
            guard try await UserStore.lockLive(db, appRef: caller.app.ref, userId: caller.user.id, tokenVersion: caller.user.tokenVersion, logger: logger)
            else { throw AppKeyError.invalidAccessToken }
            try await PasskeyStore.setNames(
                db, appRef: caller.app.ref, userId: caller.user.id, displayName: names.display, firstName: names.first, lastName: names.last,
                logger: logger)
            try await UserStore.touchUpdatedAt(db, userId: caller.user.id, logger: logger)
            try await audit(db, app: caller.app, handle: caller.user.handle, action: "updateProfile")
            try await Events.record(db, app: caller.app, type: .userUpdated, user: caller.user, logger: logger)
        }
    }

    /// K15 `POST deleteAccount`: with a fresh token, the user and everything it owns go.
    public func deleteAccount(caller: AppKeyCaller) async throws {
        try StepUp.require(.deleteAccount, proofs: [caller.proof], app: caller.app, else: AppKeyError.freshSignInRequired)
        try await client.transaction(logger: logger) { db in
            try await ChallengeStore.deleteAll(db, userId: caller.user.id, logger: logger)
            guard try await UserStore.delete(db, appRef: caller.app.ref, id: caller.user.id, logger: logger) != nil else {
                throw AppKeyError.invalidAccessToken
            }
            try await audit(db, app: caller.app, handle: caller.user.handle, action: "deleteAccount")
            try await Events.record(db, app: caller.app, type: .userDeleted, user: caller.user, logger: logger)
        }
    }
}
