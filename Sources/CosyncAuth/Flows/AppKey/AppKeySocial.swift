import Foundation
import PostgresNIO

extension AppKeyFlows {
    /// The provider and verified identity of a social request (<doc:AppKeyAPI> §4.1): 403 / 602 / 415 / 416 / 613.
    func socialIdentity(app: App, fields: AppKeyFields) async throws -> (SocialProvider, SocialIdentity) {
        let token = try fields.require("token")
        guard let provider = SocialProvider(rawValue: try fields.require("provider")) else {
            throw AppKeyError.invalidData.with("provider must be apple or google")
        }
        let audiences: [String]
        do {
            audiences = try SocialIdentities.audiences(app, provider)
        } catch {
            throw AppKeyError(error)
        }
        guard let identity = await social.verify(token, provider: provider, audiences: audiences) else { throw AppKeyError.invalidToken }
        return (provider, identity)
    }

    /// K16 `POST socialSignup`.
    public func socialSignup(app: App, fields: AppKeyFields) async throws -> AppKeyUserResult {
        _ = try fields.require("token")
        _ = try fields.require("provider")
        let locale = try locale(fields["locale"], app: app)
        let names = try Self.names(fields, required: false)
        let (provider, identity) = try await socialIdentity(app: app, fields: fields)
        let given: String? = try fields["handle"].map { raw throws(AppKeyError) in
            guard case .email(let email)? = AppKeyHandle.parse(raw, userNames: false) else { throw AppKeyError.invalidHandleFormat }
            return email
        }
        let tokenEmail = identity.email?.lowercased()
        if let tokenEmail, let given, tokenEmail != given { throw AppKeyError.invalidToken.with("the handle is not the token's e-mail") }
        // The handle must be proven by the provider: a token without a verified e-mail (a bare `openid`
        // scope, an unverified address, Apple's later sign-ins) never lets the client name one, or anyone
        // could squat a victim's address as a "social" account. Such users sign in with socialLogin.
        guard let handle = tokenEmail else {
            throw given == nil
                ? AppKeyError.missingParameter.with("missing parameter: handle")
                : AppKeyError.invalidToken.with("the token carries no verified e-mail for the handle")
        }
        guard app.settings.signupEnabled else { throw AppKeyError.signupNotSupported }
        let display = names?.display ?? Identifiers.localPart(handle)
        let (user, access) = try await client.transaction(logger: logger) { db -> (User, String) in
            if let existing = try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) {
                throw existing.loginProvider.isEmpty ? AppKeyError.emailAccountExists : Self.accountExists(existing)
            }
            if try await IdentityStore.user(db, appRef: app.ref, kind: IdentityKind(provider), subject: identity.subject, logger: logger) != nil {
                throw AppKeyError.handleAlreadyRegistered
            }
            let user = try await insertUser(
                db, app: app, id: UUID(), handle: handle, locale: locale, provider: provider.rawValue,
                profile: AppKeyProfile(displayName: display, firstName: names?.first, lastName: names?.last, isAnonymous: false, requireAddPasskey: false))
            try await IdentityStore.insert(
                db, appRef: app.ref, userId: user.id, kind: IdentityKind(provider), subject: identity.subject, email: identity.email, logger: logger)
            let access = try await openSession(db, app: app, user: user, method: provider == .apple ? .apple : .google)
            try await audit(db, app: app, handle: handle, action: "socialSignup", detail: ["provider": .string(provider.rawValue)])
            return (user, access)
        }
        return try await userResult(app: app, user: user, accessToken: access)
    }

    /// The user of a verified social identity (<doc:AppKeyAPI> K17): the user it is an identity of (the
    /// e-mail links only under the linking rule of `EndUserFlows.linkByEmailOnce`).
    func socialUser(app: App, provider: SocialProvider, identity: SocialIdentity) async throws -> User {
        let match = try await client.withConnection {
            try await SocialAccounts.match(
                $0, appRef: app.ref, provider: provider, email: identity.email?.lowercased(), subject: identity.subject, logger: logger)
        }
        guard let match else { throw AppKeyError.accountDoesNotExist }
        // Not an identity of the user its e-mail names: no account, unless it is the one link by
        // e-mail an imported account may make (README "Linking rule").
        if !match.linked, try await !socialIdentities.linkByEmailOnce(app: app, user: match.user, provider: provider, identity: identity) {
            throw AppKeyError.accountDoesNotExist
        }
        guard match.user.status == .active else { throw AppKeyError.accountSuspended }
        return match.user
    }

    /// K17 `POST socialLogin`.
    public func socialLogin(app: App, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let (provider, identity) = try await socialIdentity(app: app, fields: fields)
        let user = try await socialUser(app: app, provider: provider, identity: identity)
        let access = try await client.transaction(logger: logger) { db in
            try await UserStore.touchLastLogin(db, userId: user.id, logger: logger)
            try await IdentityStore.touch(db, userId: user.id, kind: IdentityKind(provider), logger: logger)
            let access = try await openSession(db, app: app, user: user, method: provider == .apple ? .apple : .google)
            try await audit(db, app: app, handle: user.handle, action: "socialLogin", detail: ["provider": .string(provider.rawValue)])
            try await Events.record(db, app: app, type: .userLoginSucceeded, user: user, data: ["method": .string(provider.rawValue)], logger: logger)
            return access
        }
        return try await userResult(app: app, user: user, accessToken: access)
    }

    /// K18 `POST verifySocialAccount`: a fresh session for the owner of the social token. When an
    /// access token came too, it must be the same user's (else E405): `access` is that token, verified
    /// (`AppKeyResolver.presentedAccess`) and judged here, after the social token.
    public func verifySocialAccount(app: App, access: AppKeyPresentedAccess, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let (provider, identity) = try await socialIdentity(app: app, fields: fields)
        let user = try await socialUser(app: app, provider: provider, identity: identity)
        switch access {
        case .none: break
        case .invalid: throw AppKeyError.invalidAccessToken
        case .claims(let claims):
            guard claims.appId == app.appId, UUID(uuidString: claims.uid) == user.id else { throw AppKeyError.invalidAccessToken }
        }
        let session = try await client.transaction(logger: logger) { db in
            let access = try await openSession(db, app: app, user: user, method: provider == .apple ? .apple : .google)
            try await audit(db, app: app, handle: user.handle, action: "verifySocialAccount", detail: ["provider": .string(provider.rawValue)])
            return access
        }
        return try await userResult(app: app, user: user, accessToken: session)
    }
}
