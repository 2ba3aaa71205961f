import Foundation
import PostgresNIO

extension AppKeyFlows {
    /// K20 `POST addPasskey`: creation options for one more passkey of the signed-in user. Needs a
    /// fresh sign-in (E405) and room under the app's `passkeysPerUser` (E602).
    public func addPasskey(caller: AppKeyCaller) async throws -> PasskeyCreationOptions {
        let app = caller.app, user = caller.user
        try StepUp.require(.addPasskey, proofs: [caller.proof], app: app, else: AppKeyError.freshSignInRequired)
        let challenge = Self.newChallenge()
        let (profile, passkeys) = try await client.transaction(logger: logger) { db in
            let profile = try await PasskeyStore.profile(db, userId: user.id, logger: logger)
            let passkeys = try await PasskeyStore.list(db, appRef: app.ref, userId: user.id, logger: logger)
            guard passkeys.count < app.settings.passkeysPerUser else {
                throw AppKeyError.invalidData.with("this account already has \(app.settings.passkeysPerUser) passkeys, the most this app allows")
            }
            try await takeChallengeQuota(db, app: app, handle: user.handle, newAccount: false)
            try await ChallengeStore.insert(
                db, appRef: app.ref, challenge: challenge, purpose: .addPasskey, handle: user.handle, userId: user.id,
                sessionId: caller.sessionId, lifetimeSeconds: app.settings.challengeLifetimeSeconds, logger: logger)
            return (profile, passkeys)
        }
        return try creationOptions(
            app: app, challenge: challenge, userId: user.id, handle: user.handle, displayName: profile?.displayName ?? user.handle,
            exclude: caller.resetId == nil ? passkeys : [])
    }

    /// K21 `POST addPasskeyComplete`: verifies and stores the new passkey.
    public func addPasskeyComplete(caller: AppKeyCaller, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let app = caller.app, user = caller.user
        _ = try fields.require("id")
        _ = try fields.response()
        let (_, passkey) = try await register(app: app, fields: fields, purpose: .addPasskey) { [sessionId = caller.sessionId, userId = user.id] row in
            row.userId == userId && row.sessionId == sessionId
        }
        try await client.transaction(logger: logger) { db in
            // The user row's lock serialises additions: the cap holds under concurrency.
            guard try await UserStore.find(db, appRef: app.ref, id: user.id, forUpdate: true, logger: logger) != nil else {
                throw AppKeyError.invalidAccessToken
            }
            guard try await PasskeyStore.count(db, userId: user.id, logger: logger) < app.settings.passkeysPerUser else {
                throw AppKeyError.invalidData.with("this account already has \(app.settings.passkeysPerUser) passkeys, the most this app allows")
            }
            let profile = try await PasskeyStore.profile(db, userId: user.id, logger: logger)
            try await insertPasskey(db, app: app, user: user, passkey: passkey, displayName: profile?.displayName ?? user.handle)
            if let resetId = caller.resetId {
                // The reset token adds one passkey, once.
                guard try await PasskeyStore.useReset(db, id: resetId, logger: logger) else {
                    throw AppKeyError.invalidAccessToken.with("the reset token is unknown, used or expired")
                }
                try await Events.record(db, app: app, type: .passkeyReset, user: user, logger: logger)
            }
            if profile?.requireAddPasskey ?? false { try await PasskeyStore.setRequireAddPasskey(db, userId: user.id, false, logger: logger) }
            try await audit(db, app: app, handle: user.handle, action: "addPasskeyComplete", detail: ["reset": .bool(caller.resetId != nil)])
        }
        // After a reset the user signs in anew: no session keys (<doc:AppKeyAPI> K21).
        if caller.resetId != nil { return try await userResult(app: app, user: user, accessToken: nil, withJWT: false) }
        return try await userResult(app: app, user: user, accessToken: caller.accessToken)
    }

    /// The credential id of a `keyId` field (base64url or base64); malformed → E614.
    static func keyId(_ fields: AppKeyFields) throws(AppKeyError) -> [UInt8] {
        let text = try fields.require("keyId")
        guard text.utf8.count <= 2048, let bytes = Base64URL.decodeLenient(text), !bytes.isEmpty else { throw AppKeyError.passkeyNotExist }
        return Array(bytes)
    }

    /// K22 `POST updatePasskey`: renames a passkey (1–64 characters).
    public func updatePasskey(caller: AppKeyCaller, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let app = caller.app, user = caller.user
        let credentialId = try Self.keyId(fields)
        let name = try fields.require("keyName")
        guard (1...64).contains(name.unicodeScalars.count), !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw AppKeyError.invalidData.with("keyName must be 1-64 characters")
        }
        try await client.transaction(logger: logger) { db in
            guard try await PasskeyStore.rename(db, appRef: app.ref, userId: user.id, credentialId: credentialId, name: name, logger: logger) else {
                throw AppKeyError.passkeyNotExist
            }
            try await audit(db, app: app, handle: user.handle, action: "updatePasskey")
            try await Events.record(
                db, app: app, type: .passkeyRenamed, user: user, data: ["credentialId": .string(Base64URL.encode(credentialId))], logger: logger)
        }
        return try await userResult(app: app, user: user, accessToken: caller.accessToken)
    }

    /// K23 `POST removePasskey`: removes a passkey, never the user's last way to sign in (E602).
    public func removePasskey(caller: AppKeyCaller, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let app = caller.app, user = caller.user
        let credentialId = try Self.keyId(fields)
        try StepUp.require(.removePasskey, proofs: [caller.proof], app: app, else: AppKeyError.freshSignInRequired)
        try await removePasskey(app: app, user: user, credentialId: credentialId, actor: "user")
        return try await userResult(app: app, user: user, accessToken: caller.accessToken)
    }

    /// Removes a passkey of a user unless it is the user's last way to sign in (the user row is
    /// locked, so two removals cannot both pass the count).
    public func removePasskey(app: App, user: User, credentialId: [UInt8], actor: String) async throws {
        try await client.transaction(logger: logger) { db in
            guard let locked = try await UserStore.find(db, appRef: app.ref, id: user.id, forUpdate: true, logger: logger),
                let passkey = try await PasskeyStore.find(db, appRef: app.ref, userId: user.id, credentialId: credentialId, logger: logger)
            else { throw AppKeyError.passkeyNotExist }
            guard try await PasskeyStore.signInMethods(db, userId: user.id, logger: logger) > 1 else {
                throw AppKeyError.invalidData.with("this is the account's last way to sign in; add another passkey first")
            }
            try await IdentityRemoval.remove(db, app: app, user: locked, identityId: passkey.identityId, kind: .passkey, reason: "passkey_removed", logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "appkey.removePasskey",
                detail: ["handle": .string(user.handle), "credentialId": .string(Base64URL.encode(credentialId))], logger: logger)
            try await Events.record(
                db, app: app, type: .passkeyRemoved, user: user, data: ["credentialId": .string(Base64URL.encode(credentialId))], logger: logger)
        }
    }

    /// Admin "reset passkey" (<doc:AppKeyAPI> §5.4): removes the user's passkeys, ends its sessions, marks the account
    /// as waiting for a new passkey and sends it a reset token (24 h, single use) that may add one.
    /// Returns the reset's expiry and how many passkeys were removed.
    public func resetPasskeys(app: App, userId: String, actor: String, lifetimeSeconds: Int = 24 * 3600) async throws -> (Date, Int) {
        guard app.product == .appKey else {
            throw AdminFailure.conflict(code: "not_appkey", message: "passkeys are reset in AppKey apps only")
        }
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        let resetId = UUID()
        let now = Int(Date().timeIntervalSince1970)
        let removed = try await client.transaction(logger: logger) { db -> Int in
            guard let user = try await UserStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("user")
            }
            let token = try await apps.serverKeys.sign(ResetPasskeyClaims(
                handle: user.handle, appId: app.appId, scope: "resetPasskey", iat: now, exp: now + lifetimeSeconds,
                uid: user.id.uuidString.lowercased(), jti: resetId.uuidString.lowercased()))
            // The sessions first: a passkey's sessions would otherwise go with it by cascade, unreported.
            let ended = try await SessionStore.deleteAll(db, userId: id, logger: logger)
            let removed = try await IdentityStore.deletePasskeys(db, userId: id, logger: logger)
            try await PasskeyStore.openReset(db, appRef: app.ref, userId: id, resetId: resetId, lifetimeSeconds: lifetimeSeconds, logger: logger)
            try await Events.sessionsRevoked(db, app: app, user: user, ended, reason: "passkey_reset", logger: logger)
            if user.handle.hasPrefix("+") {
                try await outbox.sms(
                    db, app: app, locale: user.locale, to: user.handle, values: ["CODE": token, "HANDLE": user.handle],
                    perNumberPerHour: smsPerNumberPerHour, logger: logger)
            } else if Identifiers.hasAt(user.handle) {
                try await outbox.email(
                    db, app: app, template: "resetPasskey", locale: user.locale, to: user.handle, values: ["HANDLE": user.handle, "CODE": token],
                    logger: logger)
            }
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "passkey.reset",
                detail: ["userId": .string(id.uuidString.lowercased()), "passkeysRemoved": .int(removed)], logger: logger)
            try await Events.record(db, app: app, type: .passkeyResetRequested, user: user, data: ["actor": .string(actor)], logger: logger)
            return removed
        }
        return (Date().addingTimeInterval(Double(lifetimeSeconds)), removed)
    }
}
