import Foundation
import PostgresNIO

extension EndUserFlows {
    /// `GET getUser` (<doc:EndUserAPI> §5.15): the fields the SDK reads, dates with milliseconds.
    public func getUser(caller: AuthenticatedCaller) async throws -> [String: JSONValue] {
        let (app, user) = (caller.app, caller.user)
        try requireActive(app)
        try requireActiveUser(user)
        var object: [String: JSONValue] = [
            "handle": .string(user.handle), "loginProvider": .string(user.loginProvider), "locale": .string(user.locale),
            "twoFactorPhoneVerification": .bool(user.twoFactorPhone), "twoFactorGoogleVerification": .bool(user.twoFactorGoogle),
            "appId": .string(app.appId), "phoneVerified": .bool(user.phoneVerified), "metaData": .object(user.metaData),
            "status": .string(user.status), "createdAt": .string(ISO8601.milliseconds(user.createdAt)),
            "updatedAt": .string(ISO8601.milliseconds(user.updatedAt)),
        ]
        if let userName = user.userName { object["userName"] = .string(userName) }
        if let phone = user.phone { object["phone"] = .string(phone) }
        if let lastLogin = user.lastLogin { object["lastLogin"] = .string(ISO8601.milliseconds(lastLogin)) }
        return object
    }

    /// `POST setUserMetadata` (<doc:EndUserAPI> §5.23, recommended rules of <doc:EndUserAPI> §9.4).
    /// The contract checks `metaData` before the token, so the caller is resolved only after it.
    public func setUserMetadata(caller resolve: () async throws -> AuthenticatedCaller, fields: Fields) async throws {
        guard let parsed = Metadata.parse(fields["metaData"]), let input = parsed else { throw EndUserError.invalidData }
        let caller = try await resolve()
        let (app, user) = (caller.app, caller.user)
        try requireActive(app)
        try requireActiveUser(user)
        guard !app.settings.metaData.isEmpty else { throw EndUserError.invalidData }
        let updated = try Metadata.update(user.metaData, with: input, fields: app.settings.metaData)
        try await client.transaction(logger: logger) { db in
            try await UserStore.setMetadata(db, userId: user.id, metadata: updated, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "setUserMetadata")
            try await Events.record(db, app: app, type: .userUpdated, user: user, data: ["fields": .array([.string("metaData")])], logger: logger)
        }
    }

    /// `POST setUserName` (<doc:EndUserAPI> §5.21): once per user; `^[a-z][a-z0-9]*$`; unique per app and distinct from
    /// every handle (a clash, even under concurrency, is `userNameInUse`).
    public func setUserName(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let raw = try fields.require("userName")
        guard app.settings.userNamesEnabled else { throw EndUserError.userNamesDisabled }
        try requireActive(app)
        try requireActiveUser(user)
        guard user.userName == nil || user.userName == "" else { throw EndUserError.invalidData }
        guard let name = Identifiers.normalizedUserName(raw) else { throw EndUserError.invalidData }
        do {
            let failure: EndUserError? = try await client.transaction(logger: logger) { db in
                if try await UserStore.identifierTaken(db, appRef: app.ref, name: name, logger: logger) { return .userNameInUse }
                guard try await UserStore.setUserName(db, userId: user.id, userName: name, logger: logger) else { return .invalidData }
                try await audit(db, app: app, handle: user.handle, action: "setUserName", detail: ["userName": .string(name)])
                return nil
            }
            if let failure { throw failure }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw EndUserError.userNameInUse
        }
    }

    /// `GET userNameAvailable` (<doc:EndUserAPI> §5.22): false also for names setUserName would reject.
    public func userNameAvailable(caller: AuthenticatedCaller, userName raw: String?) async throws -> Bool {
        let app = caller.app
        guard let raw, !raw.isEmpty else { throw EndUserError.missingParameter }
        guard app.settings.userNamesEnabled else { throw EndUserError.userNamesDisabled }
        guard let name = Identifiers.normalizedUserName(raw) else { return false }
        return !(try await client.withConnection { try await UserStore.identifierTaken($0, appRef: app.ref, name: name, logger: logger) })
    }

    /// `POST setLocale` (<doc:EndUserAPI> §5.20): EN always, else one of the app's locales (upper-cased first).
    public func setLocale(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let locale = try fields.require("locale").trimmingCharacters(in: .whitespaces).uppercased()
        try requireActive(app)
        try requireActiveUser(user)
        guard locale == Locales.defaultLocale || app.settings.locales.contains(locale) else { throw EndUserError.invalidData }
        try await client.transaction(logger: logger) { db in
            try await UserStore.setLocale(db, userId: user.id, locale: locale, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "setLocale", detail: ["locale": .string(locale)])
            try await Events.record(db, app: app, type: .userUpdated, user: user, data: ["fields": .array([.string("locale")])], logger: logger)
        }
    }

    /// `POST deleteAccount` (<doc:EndUserAPI> §5.24): password mode, or token mode for social accounts (the provider
    /// token must verify and name the user's own provider account). Deleting the user also deletes its reset codes (cascade) and
    /// so revokes its access tokens (the user no longer exists).
    /// The password mode is checked under the same reserved limit as a login of that account.
    public func deleteAccount(caller: AuthenticatedCaller, fields: Fields, clientAddress: String? = nil) async throws {
        let (app, user) = (caller.app, caller.user)
        let handleField = fields["handle"], password = fields["password"], socialToken = fields["token"]
        guard handleField != nil || password != nil || socialToken != nil else { throw EndUserError.missingParameter }
        if let handleField, let password {
            let handle = Input.handle(handleField)
            if handle.contains("@") && handle != user.handle.lowercased() { throw EndUserError.invalidCredentials }
            if !handle.contains("@") && !app.settings.userNamesEnabled { throw EndUserError.userNamesDisabled }
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
            _ = try await UserStore.delete(db, appRef: app.ref, id: user.id, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "deleteAccount")
            try await Events.record(db, app: app, type: .userDeleted, user: user, logger: logger)
        }
    }
}
