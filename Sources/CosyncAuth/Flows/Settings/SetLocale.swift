import Foundation
import Logging
import PostgresNIO

// `POST setLocale`.

/// `POST setLocale` (<doc:EndUserAPI> §5.20): EN always, else one of the app's locales (upper-cased first).
struct SetLocale: Sendable {
    let client: PostgresClient
    let accounts: Accounts
    let audit: UserAudit
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let locale = try fields.require("locale").trimmingCharacters(in: .whitespaces).uppercased()
        try Gates.requireActive(app)
        try Gates.requireActiveUser(user)
        guard locale == Locales.defaultLocale || app.settings.locales.contains(locale) else { throw EndUserError.invalidData }
        try await client.transaction(logger: logger) { db in
            try await accounts.lockCaller(db, app: app, userId: user.id)
            try await UserStore.setLocale(db, userId: user.id, locale: locale, logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "setLocale", detail: ["locale": .string(locale)])
            try await Events.record(db, app: app, type: .userUpdated, user: user, data: ["fields": .array([.string("locale")])], logger: logger)
        }
    }
}

extension EndUserFlows {
    public func setLocale(caller: AuthenticatedCaller, fields: Fields) async throws {
        try await SetLocale(client: client, accounts: accounts, audit: userAudit, logger: logger).run(caller: caller, fields: fields)
    }
}
