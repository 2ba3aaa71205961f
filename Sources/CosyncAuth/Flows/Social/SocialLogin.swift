import Foundation
import Logging
import PostgresNIO

// `POST socialLogin` / `appleLogin` / `googleLogin`.

/// `POST socialLogin` (<doc:EndUserAPI> §5.10), also `appleLogin` / `googleLogin` (<doc:EndUserAPI> §5.25).
struct SocialLogin: Sendable {
    let client: PostgresClient
    let identities: SocialIdentities
    let audit: UserAudit
    let grant: TokenGrant
    let logger: Logger

    func run(app: App, fields: Fields, provider implied: SocialProvider?) async throws -> IssuedTokens {
        let token = try fields.require("token")
        let provider = try SocialIdentities.provider(fields, implied: implied)
        let audiences = try SocialIdentities.audiences(app, provider)
        try Gates.requireActive(app)
        let identity = try await identities.verify(token, provider, audiences: audiences)
        guard let match = try await client.withConnection({
            try await SocialAccounts.match(
                $0, appRef: app.ref, provider: provider, email: identity.email, subject: identity.subject, logger: logger)
        }) else {
            await audit.record(app: app, handle: identity.email ?? "", action: "socialLogin", status: "error", detail: ["reason": .string("no account")])
            throw EndUserError.accountDoesNotExist
        }
        let user = match.user
        // The verified e-mail names an account this provider account is not an identity of: no
        // account, unless it is the one link by e-mail an imported account may make (README "Linking rule").
        if !match.linked, try await !identities.linkByEmailOnce(app: app, user: user, provider: provider, identity: identity) {
            await audit.record(app: app, handle: identity.email ?? "", action: "socialLogin", status: "error", detail: ["reason": .string("not linked")])
            throw EndUserError.accountDoesNotExist
        }
        try Gates.requireActiveUser(user)
        let issued = try await grant.issueTokens(app: app, user: user, method: provider == .apple ? .apple : .google)
        try await client.withConnection { db in
            try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await audit.record(db, app: app, handle: user.handle, action: "socialLogin", detail: ["provider": .string(provider.rawValue)])
        }
        return issued
    }
}

extension EndUserFlows {
    public func socialLogin(app: App, fields: Fields, provider implied: SocialProvider? = nil) async throws -> IssuedTokens {
        try await SocialLogin(client: client, identities: socialIdentities, audit: userAudit, grant: grant, logger: logger)
            .run(app: app, fields: fields, provider: implied)
    }
}
