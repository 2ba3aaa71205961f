import Foundation
import PostgresNIO

// `POST loginAnonymous`.

extension EndUserFlows {
    /// `POST loginAnonymous` (<doc:EndUserAPI> §5.4): the handle must contain `ANON_`; it is matched exactly.
    public func loginAnonymous(app: App, fields: Fields) async throws -> IssuedTokens {
        guard let handle = fields["handle"], handle.contains("ANON_"), handle.unicodeScalars.count <= 254 else {
            throw EndUserError.invalidCredentials
        }
        guard app.settings.anonymousLoginEnabled else { throw EndUserError.anonymousLoginDisabled }
        try requireActive(app)
        let user: User = try await client.transaction(logger: logger) { db in
            if let existing = try await UserStore.user(db, appRef: app.ref, handle: handle, exact: true, forUpdate: true, logger: logger) {
                // Only an account that signs in anonymously with this handle: not a password or social
                // account whose handle happens to contain ANON_, nor one upgraded or detached since.
                guard try await IdentityStore.has(db, userId: existing.id, kind: .anonymous, subject: handle, logger: logger) else {
                    throw EndUserError.invalidCredentials
                }
                return existing
            }
            // Another user whose handle differs only in case owns the slot: not this one's account.
            if try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) != nil {
                throw EndUserError.invalidCredentials
            }
            guard try await takeAnonymousAccountQuota(db, app: app) else { throw EndUserError.rateLimited }
            let created = try await insertUser(db, app: app, handle: handle, passwordHash: nil, locale: Locales.defaultLocale, metadata: [:])
            try await audit(db, app: app, handle: handle, action: "loginAnonymous.create")
            return created
        }
        try requireActiveUser(user)
        let flows = self
        return try await issueTokens(app: app, user: user, method: .anonymous) { db in
            try await UserStore.touchLastLogin(db, userId: user.id, logger: flows.logger)
            try await flows.audit(db, app: app, handle: handle, action: "loginAnonymous")
        }
    }
}
