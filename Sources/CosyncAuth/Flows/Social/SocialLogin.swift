import Foundation
import PostgresNIO

// `POST socialLogin` / `appleLogin` / `googleLogin`.

extension EndUserFlows {
    /// `POST socialLogin` (<doc:EndUserAPI> §5.10), also `appleLogin` / `googleLogin` (<doc:EndUserAPI> §5.25).
    public func socialLogin(app: App, fields: Fields, provider implied: SocialProvider? = nil) async throws -> IssuedTokens {
        let token = try fields.require("token")
        let provider = try Self.provider(fields, implied: implied)
        let audiences = try Self.audiences(app, provider)
        try requireActive(app)
        let identity = try await verifySocial(token, provider, audiences: audiences)
        guard let match = try await client.withConnection({
            try await UserStore.socialMatch(
                $0, appRef: app.ref, provider: provider, email: identity.email, subject: identity.subject, logger: logger)
        }) else {
            await audit(app: app, handle: identity.email ?? "", action: "socialLogin", status: "error", detail: ["reason": .string("no account")])
            throw EndUserError.accountDoesNotExist
        }
        let user = match.user
        if !match.linked {
            // The verified e-mail names an account that this provider account is not an identity of.
            let sameProvider = try await client.withConnection {
                try await IdentityStore.has($0, userId: user.id, kind: IdentityKind(provider), logger: logger)
            }
            // The same provider with another provider account: not this user's token.
            if sameProvider { throw EndUserError.invalidSocialToken }
            // Another way to sign in (610–612), unless the account was created with this provider and
            // has no provider account on record (an import without it): the verified e-mail links it.
            guard user.loginProvider == provider.rawValue else { throw Self.accountExists(user) }
            do {
                try await client.transaction(logger: logger) { db in
                    // The user row first: deleted since the match, it is no account (not a 500 on the
                    // identity's foreign key).
                    guard try await UserStore.lockExisting(db, appRef: app.ref, userId: user.id, logger: logger) != nil else {
                        throw EndUserError.accountDoesNotExist
                    }
                    try await IdentityStore.insert(
                        db, appRef: app.ref, userId: user.id, kind: IdentityKind(provider), subject: identity.subject, email: identity.email,
                        logger: logger)
                    try await audit(db, app: app, handle: user.handle, action: "identity.link", detail: ["kind": .string(provider.rawValue)])
                    try await Events.record(db, app: app, type: .identityLinked, user: user, data: ["kind": .string(provider.rawValue)], logger: logger)
                }
            } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
                // A concurrent login linked it first (same account: go on), or the provider account or
                // this kind is another identity's now: not this user's token.
                let now = try await client.withConnection {
                    try await UserStore.socialMatch(
                        $0, appRef: app.ref, provider: provider, email: identity.email, subject: identity.subject, logger: logger)
                }
                guard let now, now.linked, now.user.id == user.id else { throw EndUserError.invalidSocialToken }
            }
        }
        try requireActiveUser(user)
        let issued = try await issueTokens(app: app, user: user, method: provider == .apple ? .apple : .google)
        try await client.withConnection { db in
            try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await audit(db, app: app, handle: user.handle, action: "socialLogin", detail: ["provider": .string(provider.rawValue)])
        }
        return issued
    }
}
