import Foundation
import PostgresNIO

// `POST setLocale`.

extension EndUserFlows {
    /// `POST setLocale` (<doc:EndUserAPI> §5.20): EN always, else one of the app's locales (upper-cased first).
    public func setLocale(caller: AuthenticatedCaller, fields: Fields) async throws {
        let (app, user) = (caller.app, caller.user)
        let locale = try fields.require("locale").trimmingCharacters(in: .whitespaces).uppercased()
        try requireActive(app)
        try requireActiveUser(user)
        guard locale == Locales.defaultLocale || app.settings.locales.contains(locale) else { throw EndUserError.invalidData }
        try await client.transaction(logger: logger) { db in
            try await lockCaller(db, app: app, userId: user.id)
            try await UserStore.setLocale(db, userId: user.id, locale: locale, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "setLocale", detail: ["locale": .string(locale)])
            try await Events.record(db, app: app, type: .userUpdated, user: user, data: ["fields": .array([.string("locale")])], logger: logger)
        }
    }
}
