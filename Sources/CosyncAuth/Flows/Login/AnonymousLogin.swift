import Foundation
import Logging
import PostgresNIO

// `POST loginAnonymous`.

/// `POST loginAnonymous` (<doc:EndUserAPI> §5.4): the handle must contain `ANON_`; it is matched exactly.
struct AnonymousLogin: Sendable {
    let client: PostgresClient
    let accounts: Accounts
    let grant: TokenGrant
    let audit: UserAudit
    let logger: Logger

    func run(app: App, fields: Fields) async throws -> IssuedTokens {
        guard let handle = fields["handle"], handle.contains("ANON_"), handle.unicodeScalars.count <= 254 else {
            throw EndUserError.invalidCredentials
        }
        guard app.settings.anonymousLoginEnabled else { throw EndUserError.anonymousLoginDisabled }
        try Gates.requireActive(app)
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
            guard try await accounts.takeAnonymousAccountQuota(db, app: app) else { throw EndUserError.rateLimited }
            let created = try await accounts.insertUser(db, app: app, handle: handle, passwordHash: nil, locale: Locales.defaultLocale, metadata: [:])
            try await audit.record(db, app: app, handle: handle, action: "loginAnonymous.create")
            return created
        }
        try Gates.requireActiveUser(user)
        return try await grant.issueTokens(app: app, user: user, method: .anonymous) { db in
            try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await audit.record(db, app: app, handle: handle, action: "loginAnonymous")
        }
    }
}

extension EndUserFlows {
    public func loginAnonymous(app: App, fields: Fields) async throws -> IssuedTokens {
        try await AnonymousLogin(client: client, accounts: accounts, grant: grant, audit: userAudit, logger: logger).run(app: app, fields: fields)
    }
}
