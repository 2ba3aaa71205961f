import Foundation
import Logging
import PostgresNIO

// `POST socialSignup` / `appleSignup` / `googleSignup`.

/// `POST socialSignup` (<doc:EndUserAPI> §5.11), also `appleSignup` / `googleSignup` (<doc:EndUserAPI> §5.25). Like legacy it does
/// not check `signupEnabled`.
struct SocialSignup: Sendable {
    let client: PostgresClient
    let identities: SocialIdentities
    let outbox: Outbox
    let audit: UserAudit
    let grant: TokenGrant
    let logger: Logger

    func run(app: App, fields: Fields, provider implied: SocialProvider?) async throws -> IssuedTokens {
        let token = try fields.require("token")
        let provider = try SocialIdentities.provider(fields, implied: implied)
        let handle = Identifiers.handle(try fields.require("handle"))
        let audiences = try SocialIdentities.audiences(app, provider)
        try Gates.requireActive(app)
        if let existing = try await client.withConnection({
            try await UserStore.user($0, appRef: app.ref, handle: handle, logger: logger)
        }) {
            throw SocialIdentities.accountExists(existing)
        }
        guard Identifiers.normalizedHandle(handle) != nil else { throw EndUserError.invalidData }
        let locale = (fields["locale"] ?? Locales.defaultLocale).uppercased()
        guard app.settings.locales.isEmpty || app.settings.locales.contains(locale) else { throw EndUserError.invalidData }
        guard let parsed = Metadata.parse(fields["metaData"]) else { throw EndUserError.invalidData }
        let input = parsed ?? [:]
        for field in app.settings.metaData {
            if let value = Metadata.value(at: field.pathComponents, in: input), value != .null, value.stringValue == nil {
                throw EndUserError.invalidData
            }
        }
        let metadata: [String: JSONValue]? = app.settings.metaData.isEmpty ? nil : try Metadata.filter(input, fields: app.settings.metaData)
        let identity = try await identities.verify(token, provider, audiences: audiences)
        guard let email = identity.email, email == handle else { throw EndUserError.invalidSocialToken }
        let user: User
        do {
            user = try await client.transaction(logger: logger) { db in
                let user = try await UserStore.insertSocialUser(
                    db, appRef: app.ref, handle: handle, provider: provider.rawValue, locale: locale, metadata: metadata, logger: logger)
                try await IdentityStore.insert(
                    db, appRef: app.ref, userId: user.id, kind: IdentityKind(provider), subject: identity.subject, email: handle, logger: logger)
                try await outbox.email(db, app: app, template: "signUpSuccess", locale: locale, to: handle, values: ["HANDLE": handle], logger: logger)
                try await audit.record(db, app: app, handle: handle, action: "socialSignup", detail: ["provider": .string(provider.rawValue)])
                return user
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            // A concurrent signup took the handle, or this provider account already has a user.
            let existing = try await client.withConnection {
                try await SocialAccounts.match(
                    $0, appRef: app.ref, provider: provider, email: handle, subject: identity.subject, logger: logger)
            }
            throw existing.map { SocialIdentities.accountExists($0.user) } ?? EndUserError.handleAlreadyRegistered
        }
        return try await grant.issueTokens(app: app, user: user, method: provider == .apple ? .apple : .google, jwtFailure: .invalidData)
    }
}

extension EndUserFlows {
    public func socialSignup(app: App, fields: Fields, provider implied: SocialProvider? = nil) async throws -> IssuedTokens {
        try await SocialSignup(client: client, identities: socialIdentities, outbox: outbox, audit: userAudit, grant: grant, logger: logger)
            .run(app: app, fields: fields, provider: implied)
    }
}
