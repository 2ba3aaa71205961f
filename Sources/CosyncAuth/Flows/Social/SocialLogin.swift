import Foundation
import PostgresNIO

extension EndUserFlows {
    /// The provider named by the body (`apple` | `google`, else `invalidData`) or implied by an alias path.
    static func provider(_ fields: Fields, implied: SocialProvider?) throws(EndUserError) -> SocialProvider {
        if let implied { return implied }
        guard let provider = SocialProvider(rawValue: try fields.require("provider")) else { throw .invalidData }
        return provider
    }

    /// The app's audiences for a provider, or the 415/416 gate when the provider is off or unset.
    static func audiences(_ app: App, _ provider: SocialProvider, gate: Bool = true) throws(EndUserError) -> [String] {
        let s = app.settings
        let (enabled, list, refusal): (Bool, String, EndUserError) = switch provider {
        case .apple: (s.appleLoginEnabled, s.appleBundleId, .appleLoginDisabled)
        case .google: (s.googleLoginEnabled, s.googleClientId, .googleLoginDisabled)
        }
        let audiences = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if gate && (!enabled || audiences.isEmpty) { throw refusal }
        return audiences
    }

    /// The account-exists code for an existing user of another provider (610–612).
    static func accountExists(_ user: User) -> EndUserError {
        switch user.loginProvider {
        case "google": .googleAccountExists
        case "apple": .appleAccountExists
        default: .emailAccountExists
        }
    }

    func verifySocial(_ token: String, _ provider: SocialProvider, audiences: [String]) async throws -> SocialIdentity {
        guard let identity = await social.verify(token, provider: provider, audiences: audiences) else {
            throw EndUserError.invalidSocialToken
        }
        return identity
    }

    /// `POST socialLogin` (<doc:EndUserAPI> §5.10), also `appleLogin` / `googleLogin` (<doc:EndUserAPI> §5.25).
    public func socialLogin(app: App, fields: Fields, provider implied: SocialProvider? = nil) async throws -> IssuedTokens {
        let token = try fields.require("token")
        let provider = try Self.provider(fields, implied: implied)
        let audiences = try Self.audiences(app, provider)
        try requireActive(app)
        let identity = try await verifySocial(token, provider, audiences: audiences)
        guard let match = try await client.withConnection({
            try await SecondFactorStore.socialMatch(
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
                    try await SecondFactorStore.socialMatch(
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

    /// `POST socialSignup` (<doc:EndUserAPI> §5.11), also `appleSignup` / `googleSignup` (<doc:EndUserAPI> §5.25). Like legacy it does
    /// not check `signupEnabled`.
    public func socialSignup(app: App, fields: Fields, provider implied: SocialProvider? = nil) async throws -> IssuedTokens {
        let token = try fields.require("token")
        let provider = try Self.provider(fields, implied: implied)
        let handle = Input.handle(try fields.require("handle"))
        let audiences = try Self.audiences(app, provider)
        try requireActive(app)
        if let existing = try await client.withConnection({
            try await UserStore.user($0, appRef: app.ref, handle: handle, logger: logger)
        }) {
            throw Self.accountExists(existing)
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
        let identity = try await verifySocial(token, provider, audiences: audiences)
        guard let email = identity.email, email == handle else { throw EndUserError.invalidSocialToken }
        let user: User
        do {
            user = try await client.transaction(logger: logger) { db in
                let user = try await SecondFactorStore.insertSocialUser(
                    db, appRef: app.ref, handle: handle, provider: provider.rawValue, subject: identity.subject, locale: locale,
                    metadata: metadata, logger: logger)
                try await outbox.email(db, app: app, template: "signUpSuccess", locale: locale, to: handle, values: ["HANDLE": handle], logger: logger)
                try await audit(db, app: app, handle: handle, action: "socialSignup", detail: ["provider": .string(provider.rawValue)])
                return user
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            // A concurrent signup took the handle, or this provider account already has a user.
            let existing = try await client.withConnection {
                try await SecondFactorStore.socialMatch(
                    $0, appRef: app.ref, provider: provider, email: handle, subject: identity.subject, logger: logger)
            }
            throw existing.map { Self.accountExists($0.user) } ?? EndUserError.handleAlreadyRegistered
        }
        return try await issueTokens(app: app, user: user, method: provider == .apple ? .apple : .google, jwtFailure: .invalidData)
    }

    /// deleteAccount's token mode (<doc:EndUserAPI> §5.24): the token must be one of the user's own provider accounts
    /// (an identity of the user), and fresh: issued within the app's `freshAuthMinutes`, since deleting
    /// the account is a destructive step that needs a recent sign-in.
    func verifyOwnSocialToken(app: App, user: User, token: String) async throws -> Bool {
        let identities = try await client.withConnection { try await IdentityStore.list($0, appRef: app.ref, userId: user.id, logger: logger) }
        let providers = SocialProvider.allCases.filter { p in identities.contains { $0.kind == p.rawValue } }
        guard !providers.isEmpty else { throw EndUserError.invalidData }
        for provider in providers {
            let audiences = try Self.audiences(app, provider, gate: false)
            guard let identity = await social.verify(token, provider: provider, audiences: audiences) else { continue }
            let fresh = identity.issuedAt.map { Date().timeIntervalSince($0) <= Double(app.settings.freshAuthMinutes) * 60 } ?? false
            return fresh && identities.contains { $0.kind == provider.rawValue && $0.subject == identity.subject }
        }
        return false
    }
}
