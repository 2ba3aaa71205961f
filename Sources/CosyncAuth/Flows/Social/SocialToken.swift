import Foundation
import Logging
import PostgresNIO

// What social login and signup share: the provider, its audiences, and the token check.

/// The provider accounts of end users, as a small type the social steps declare: which provider a request
/// names, the app's audiences, the token check, and the linking rule. The AppKey flows, the admin API and
/// deleteAccount reach it through the `EndUserFlows` forwarders below.
struct SocialIdentities: Sendable {
    let client: PostgresClient
    let social: SocialTokenVerifier
    let audit: UserAudit
    let logger: Logger

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

    func verify(_ token: String, _ provider: SocialProvider, audiences: [String]) async throws -> SocialIdentity {
        guard let identity = await social.verify(token, provider: provider, audiences: audiences) else {
            throw EndUserError.invalidSocialToken
        }
        return identity
    }

    /// The linking rule (README "Linking rule"): a provider account signs in only as the user it is an
    /// identity of. The one exception keeps migrated apps working: an imported CosyncJWT account created
    /// with this provider, whose provider subject was never recorded, links to the first verified
    /// provider account with its e-mail, once (`UserStore.takeSocialEmailLink`). True when `identity`
    /// is (now) an identity of `user`; false otherwise, and nothing changed.
    func linkByEmailOnce(app: App, user: User, provider: SocialProvider, identity: SocialIdentity) async throws -> Bool {
        do {
            return try await client.transaction(logger: logger) { db in
                // The user row first: the order an account deletion takes; deleted since the match, it is no account.
                guard try await UserStore.lockExisting(db, appRef: app.ref, userId: user.id, logger: logger) != nil else { return false }
                // A concurrent login of the same provider account made the link first.
                if try await IdentityStore.user(db, appRef: app.ref, kind: IdentityKind(provider), subject: identity.subject, logger: logger)?.id == user.id {
                    return true
                }
                guard try await UserStore.takeSocialEmailLink(db, appRef: app.ref, userId: user.id, provider: provider, logger: logger) else {
                    return false
                }
                try await IdentityStore.insert(
                    db, appRef: app.ref, userId: user.id, kind: IdentityKind(provider), subject: identity.subject, email: identity.email,
                    logger: logger)
                try await audit.record(db, app: app, handle: user.handle, action: "identity.link", detail: ["kind": .string(provider.rawValue), "by": .string("email")])
                try await Events.record(db, app: app, type: .identityLinked, user: user, data: ["kind": .string(provider.rawValue)], logger: logger)
                return true
            }
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            // The provider account is another user's identity now.
            return false
        }
    }

    /// deleteAccount's token mode (<doc:EndUserAPI> §5.24): the token must verify and name one of the user's own provider
    /// accounts (an identity of the user). Answers the proof it makes, dated by the token's `iat`
    /// (none: the distant past), for `StepUp` to judge its freshness; nil when it proves nothing.
    func verifyOwnSocialToken(app: App, user: User, token: String) async throws -> AuthProof? {
        let identities = try await client.withConnection { try await IdentityStore.list($0, appRef: app.ref, userId: user.id, logger: logger) }
        let providers = SocialProvider.allCases.filter { p in identities.contains { $0.kind == IdentityKind(p) } }
        guard !providers.isEmpty else { throw EndUserError.invalidData }
        for provider in providers {
            let audiences = try Self.audiences(app, provider, gate: false)
            guard let identity = await social.verify(token, provider: provider, audiences: audiences) else { continue }
            guard identities.contains(where: { $0.kind == IdentityKind(provider) && $0.subject == identity.subject }) else { return nil }
            return .presented(provider == .apple ? .apple : .google, at: identity.issuedAt ?? .distantPast)
        }
        return nil
    }
}

extension EndUserFlows {
    var socialIdentities: SocialIdentities {
        SocialIdentities(client: client, social: social, audit: userAudit, logger: logger)
    }
}
