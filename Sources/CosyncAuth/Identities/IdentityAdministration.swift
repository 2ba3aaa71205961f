import Foundation
import Logging
import PostgresNIO

/// Admin operations on a user's identities: list, link a provider account, detach, and upgrade an
/// anonymous account to a permanent one (keeping its user id).
extension UserAdministration {
    public func identities(app: App, userId: String) async throws -> [Identity] {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        return try await client.withConnection { db in
            guard try await UserStore.find(db, appRef: app.ref, id: id, logger: logger) != nil else { throw AdminFailure.notFound("user") }
            return try await IdentityStore.list(db, appRef: app.ref, userId: id, logger: logger)
        }
    }

    public enum DetachResult: Sendable, Equatable { case detached, accountDeleted }

    /// Detaches one identity and ends exactly the sessions opened through it (`IdentityRemoval`). The
    /// last identity is refused (409 `last_identity`) unless `deleteAccount` is true: then the account
    /// is deleted with it. A detached provider account never links again by itself: only a signup with
    /// it or the admin link operation attaches it (README "Linking rule").
    public func detachIdentity(app: App, userId: String, identityId: String, deleteAccount: Bool, actor: String) async throws -> DetachResult {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        guard let identity = UUID(uuidString: identityId) else { throw AdminFailure.notFound("identity") }
        return try await client.transaction(logger: logger) { db in
            guard let user = try await UserStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("user")
            }
            let all = try await IdentityStore.list(db, appRef: app.ref, userId: user.id, logger: logger)
            guard let removed = all.first(where: { $0.id == identity }) else {
                throw AdminFailure.notFound("identity")
            }
            let detail: [String: JSONValue] = [
                "userId": .string(id.uuidString.lowercased()), "identityId": .string(identity.uuidString.lowercased()),
                "kind": .string(removed.kind.rawValue),
            ]
            if all.count == 1 {
                guard deleteAccount else {
                    throw AdminFailure.conflict(
                        code: "last_identity", message: "this is the user's last way to sign in; pass deleteAccount=true to delete the account")
                }
                _ = try await UserStore.delete(db, appRef: app.ref, id: user.id, logger: logger)
                try await Events.record(db, app: app, type: .identityDetached, user: user, data: ["kind": .string(removed.kind.rawValue)], logger: logger)
                try await Events.record(db, app: app, type: .userDeleted, user: user, data: ["actor": .string(actor)], logger: logger)
                try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: actor, action: "user.delete", detail: detail, logger: logger)
                return .accountDeleted
            }
            try await IdentityRemoval.remove(db, app: app, user: user, identityId: removed.id, kind: removed.kind, reason: "identity_detached", logger: logger)
            switch removed.kind {
            case .password: try await UserStore.clearPassword(db, id: user.id, logger: logger)
            case .apple, .google: try await UserStore.spendSocialEmailLink(db, userId: user.id, logger: logger)
            case .anonymous, .passkey, .custom, .oidc: break
            }
            try await Events.record(db, app: app, type: .identityDetached, user: user, data: ["kind": .string(removed.kind.rawValue)], logger: logger)
            try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: actor, action: "identity.detach", detail: detail, logger: logger)
            return .detached
        }
    }

    /// Links an Apple or Google account to a user who signs in with a password. **Rule:** the provider
    /// token must verify for the app, and the provider's verified e-mail must be the user's handle.
    /// After it, the legacy `socialLogin` with that provider account finds this user (no second account).
    ///
    /// When nobody ever proved the handle (no verified signup or invite code: signup without a code,
    /// an admin-made or imported account), whoever registered it may not be its owner: the password is
    /// removed and every session ends, so that an account pre-registered with someone else's address
    /// cannot keep a way in once the real owner links it. The owner can set a password again through
    /// forgotPassword.
    public func linkIdentity(app: App, userId: String, input: [String: JSONValue], actor: String) async throws -> Identity {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        let (provider, verified) = try await providerIdentity(app: app, input: input)
        do {
            return try await client.transaction(logger: logger) { db in
                let user = try await lockedUser(
                    db, app: app, id: id, holding: .password,
                    else: .conflict(code: "no_password_identity", message: "only a user who signs in with a password can link a provider account"))
                guard let email = verified.email, email == user.handle.lowercased() else {
                    throw AdminFailure.invalid(FieldError("idToken", "email_mismatch", "the provider's verified e-mail must be the user's handle"))
                }
                try await IdentityStore.insert(
                    db, appRef: app.ref, userId: user.id, kind: IdentityKind(provider), subject: verified.subject, email: email, logger: logger)
                try await UserStore.spendSocialEmailLink(db, userId: user.id, logger: logger)
                let handle = user.handle.lowercased()
                let signedUp = try await PendingStore.hasVerified(db, .signups, appRef: app.ref, handle: handle, logger: logger)
                let invited = try await PendingStore.hasVerified(db, .invites, appRef: app.ref, handle: handle, logger: logger)
                let proven = signedUp || invited
                if !proven {
                    // The sessions first: the password identity's would go with it by cascade, unreported.
                    let ended = try await UserWrites.revokeAll(db, appRef: app.ref, id: user.id, logger: logger) ?? []
                    try await IdentityStore.deleteKind(db, userId: user.id, kind: .password, logger: logger)
                    try await UserStore.clearPassword(db, id: user.id, logger: logger)
                    try await Events.sessionsRevoked(db, app: app, user: user, ended, reason: "unproven_handle_linked", logger: logger)
                }
                try await Events.record(db, app: app, type: .identityLinked, user: user, data: ["kind": .string(provider.rawValue)], logger: logger)
                try await AuditLog.record(
                    db, appRef: app.ref, appId: app.appId, actor: actor, action: "identity.link",
                    detail: ["userId": .string(id.uuidString.lowercased()), "kind": .string(provider.rawValue), "handleProven": .bool(proven)],
                    logger: logger)
                let all = try await IdentityStore.list(db, appRef: app.ref, userId: user.id, logger: logger)
                guard let linked = all.first(where: { $0.kind == IdentityKind(provider) }) else { throw StoreError.noRowReturned }
                return linked
            }
        } catch let error as PSQLError {
            throw Self.conflict(error) ?? error
        }
    }

    /// Makes an anonymous account permanent, keeping its user id (and so its sessions and data):
    /// `{"handle", "password"}` (the app's password policy applies) or `{"provider", "idToken"}` (the
    /// provider's verified e-mail becomes the handle). A handle or provider account that another user
    /// holds is refused with 409 and nothing changes.
    public func upgrade(app: App, userId: String, input: [String: JSONValue], actor: String) async throws -> User {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        let allowed: Set<String> = ["handle", "password", "provider", "idToken"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "is not accepted here"))
        }
        enum Way { case password(handle: String, hash: String), provider(SocialProvider, SocialIdentity) }
        let way: Way
        if input["provider"] != nil || input["idToken"] != nil {
            if input["handle"] != nil || input["password"] != nil {
                throw AdminFailure.invalid(FieldError("provider", "invalid_value", "give either handle and password, or provider and idToken"))
            }
            let (provider, verified) = try await providerIdentity(app: app, input: input)
            guard verified.email != nil else {
                throw AdminFailure.invalid(FieldError("idToken", "email_missing", "the provider token carries no verified e-mail for the handle"))
            }
            way = .provider(provider, verified)
        } else {
            guard let raw = input["handle"]?.stringValue else {
                throw AdminFailure.invalid(FieldError("handle", "required", "is required and must be a string"))
            }
            guard let handle = Identifiers.adminHandle(raw, email: true) else {
                throw AdminFailure.invalid(FieldError("handle", "invalid_value", "must be an e-mail address of 1-254 characters"))
            }
            guard let password = input["password"]?.stringValue else {
                throw AdminFailure.invalid(FieldError("password", "required", "is required and must be a string"))
            }
            try Self.checkPassword(password, settings: app.settings)
            way = .password(handle: handle, hash: try await hasher.hash(md5Hex: PasswordHasher.md5Hex(password), tenant: String(app.ref)))
        }
        do {
            return try await client.transaction(logger: logger) { db in
                let user = try await lockedUser(
                    db, app: app, id: id, holding: .anonymous,
                    else: .conflict(code: "not_anonymous", message: "only an anonymous account can be upgraded"))
                let anonymous = try await IdentityStore.list(db, appRef: app.ref, userId: user.id, logger: logger)
                    .first { $0.kind == .anonymous }
                let upgraded: User
                let kind: IdentityKind
                switch way {
                case .password(let handle, let hash):
                    upgraded = try await UserStore.upgrade(db, id: user.id, handle: handle, passwordHash: hash, loginProvider: "", logger: logger)
                    try await IdentityStore.insert(db, appRef: app.ref, userId: user.id, kind: .password, subject: handle, logger: logger)
                    kind = .password
                case .provider(let provider, let verified):
                    let handle = verified.email ?? ""
                    upgraded = try await UserStore.upgrade(
                        db, id: user.id, handle: handle, passwordHash: nil, loginProvider: provider.rawValue, logger: logger)
                    try await IdentityStore.insert(
                        db, appRef: app.ref, userId: user.id, kind: IdentityKind(provider), subject: verified.subject, email: handle, logger: logger)
                    kind = IdentityKind(provider)
                }
                // The account keeps its sessions: those of the anonymous handle now hang off the new
                // identity, so the handle's removal does not end them.
                if let anonymous {
                    try await SessionStore.rebind(db, userId: user.id, from: anonymous.id, toKind: kind, logger: logger)
                }
                try await IdentityStore.deleteKind(db, userId: user.id, kind: .anonymous, logger: logger)
                try await Events.record(db, app: app, type: .identityDetached, user: user, data: ["kind": .string("anonymous")], logger: logger)
                try await Events.record(db, app: app, type: .identityLinked, user: upgraded, data: ["kind": .string(kind.rawValue)], logger: logger)
                try await AuditLog.record(
                    db, appRef: app.ref, appId: app.appId, actor: actor, action: "user.upgrade",
                    detail: ["userId": .string(id.uuidString.lowercased()), "kind": .string(kind.rawValue), "handle": .string(upgraded.handle)],
                    logger: logger)
                return upgraded
            }
        } catch let error as PSQLError {
            throw Self.conflict(error) ?? error
        }
    }

    /// The user, locked for the transaction, when it holds an identity of `kind`; else `failure`.
    func lockedUser(_ db: PostgresConnection, app: App, id: UUID, holding kind: IdentityKind, else failure: AdminFailure) async throws -> User {
        guard let user = try await UserStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
            throw AdminFailure.notFound("user")
        }
        guard try await IdentityStore.has(db, userId: user.id, kind: kind, logger: logger) else { throw failure }
        return user
    }

    /// `{"provider": "apple"|"google", "idToken": "…"}` verified against the app's provider settings.
    func providerIdentity(app: App, input: [String: JSONValue]) async throws -> (SocialProvider, SocialIdentity) {
        if let unknown = input.keys.sorted().first(where: { !["provider", "idToken", "handle", "password"].contains($0) }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "is not accepted here"))
        }
        guard let name = input["provider"]?.stringValue, let provider = SocialProvider(rawValue: name) else {
            throw AdminFailure.invalid(FieldError("provider", "invalid_value", "must be apple or google"))
        }
        guard let token = input["idToken"]?.stringValue, !token.isEmpty, token.utf8.count <= 16_384 else {
            throw AdminFailure.invalid(FieldError("idToken", "required", "is required: the provider's identity token"))
        }
        let audiences = try SocialIdentities.audiences(app, provider, gate: false)
        guard !audiences.isEmpty, let social else {
            throw AdminFailure.invalid(FieldError("provider", "not_configured", "the app has no \(provider.rawValue) client id"))
        }
        guard let verified = await social.verify(token, provider: provider, audiences: audiences) else {
            throw AdminFailure.invalid(FieldError("idToken", "invalid_token", "the provider token does not verify for this app"))
        }
        return (provider, verified)
    }
}
