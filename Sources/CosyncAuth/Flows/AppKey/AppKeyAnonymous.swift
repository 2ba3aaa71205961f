import Foundation
import PostgresNIO

extension AppKeyFlows {
    /// The `ANON_` handle of K8/K9, exactly as sent; a malformed one → E600.
    static func anonymousHandle(_ raw: String) throws(AppKeyError) -> String {
        guard case .anonymous(let text)? = AppKeyHandle.parse(raw, userNames: false), !text.isEmpty else {
            throw AppKeyError.invalidLoginCredentials.with("invalid anonymous handle")
        }
        return text
    }

    /// K8 `POST loginAnonymous`: creation options for a new anonymous account.
    public func loginAnonymous(app: App, fields: AppKeyFields) async throws -> PasskeyCreationOptions {
        let raw = try fields.require("handle")
        guard app.settings.anonymousLoginEnabled else { throw AppKeyError.anonymousNotSupported }
        let handle = try Self.anonymousHandle(raw)
        let locale = try locale(fields["locale"], app: app)
        let userId = UUID()
        let challenge = Self.newChallenge()
        let options = try creationOptions(app: app, challenge: challenge, userId: userId, handle: handle, displayName: handle, exclude: [])
        try await client.transaction(logger: logger) { db in
            // An existing anonymous account re-enters through login/loginComplete: a registration here
            // would let whoever learns its handle add a passkey to it.
            if try await UserStore.user(db, appRef: app.ref, handle: handle, exact: true, logger: logger) != nil {
                throw AppKeyError.handleAlreadyRegistered
            }
            try await takeChallengeQuota(db, app: app, handle: handle, newAccount: true)
            try await ChallengeStore.insert(
                db, appRef: app.ref, challenge: challenge, purpose: .anonymous, handle: handle, userId: userId, displayName: handle,
                locale: locale, lifetimeSeconds: app.settings.challengeLifetimeSeconds, logger: logger)
        }
        return options
    }

    /// K9 `POST loginAnonymousComplete`: verifies the passkey and creates the anonymous account.
    public func loginAnonymousComplete(app: App, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let raw = try fields.require("handle")
        _ = try fields.require("id")
        _ = try fields.response()
        guard app.settings.anonymousLoginEnabled else { throw AppKeyError.anonymousNotSupported }
        let handle = try Self.anonymousHandle(raw)
        let (row, passkey) = try await register(app: app, fields: fields, purpose: .anonymous) { $0.handle == handle }
        guard let userId = row.userId else { throw AppKeyError.invalidData }
        let (user, access) = try await client.transaction(logger: logger) { db -> (User, String) in
            if try await UserStore.user(db, appRef: app.ref, handle: handle, exact: true, logger: logger) != nil {
                throw AppKeyError.handleAlreadyRegistered
            }
            guard try await accounts.takeAnonymousAccountQuota(db, app: app) else { throw AppKeyError.rateLimited }
            let user = try await insertUser(
                db, app: app, id: userId, handle: handle, locale: row.locale ?? Locales.defaultLocale, provider: "",
                profile: AppKeyProfile(displayName: handle, firstName: nil, lastName: nil, isAnonymous: true, requireAddPasskey: false))
            let passkeyIdentity = try await insertPasskey(db, app: app, user: user, passkey: passkey, displayName: "anonymous")
            let access = try await openSession(db, app: app, user: user, method: .passkey, identityId: passkeyIdentity)
            try await audit(db, app: app, handle: handle, action: "loginAnonymousComplete")
            return (user, access)
        }
        return try await userResult(app: app, user: user, accessToken: access)
    }
}
