import Foundation
import Logging
import PostgresNIO

/// Admin operations on the passkeys of one user (AppKey apps): list them, remove one.
extension UserAdministration {
    public func passkeys(app: App, userId: String) async throws -> [Passkey] {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        return try await client.withConnection { db in
            guard try await UserStore.find(db, appRef: app.ref, id: id, logger: logger) != nil else { throw AdminFailure.notFound("user") }
            return try await PasskeyStore.list(db, appRef: app.ref, userId: id, logger: logger)
        }
    }

    /// Removes a passkey; the user's last way to sign in is refused (409 `last_identity`): delete
    /// the user instead.
    public func removePasskey(app: App, userId: String, passkeyId: String, actor: String) async throws {
        guard let id = UUID(uuidString: userId) else { throw AdminFailure.notFound("user") }
        guard let passkeyUUID = UUID(uuidString: passkeyId) else { throw AdminFailure.notFound("passkey") }
        try await client.transaction(logger: logger) { db in
            guard let user = try await UserStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("user")
            }
            guard let passkey = try await PasskeyStore.list(db, appRef: app.ref, userId: id, logger: logger).first(where: { $0.id == passkeyUUID })
            else { throw AdminFailure.notFound("passkey") }
            guard try await PasskeyStore.signInMethods(db, userId: id, logger: logger) > 1 else {
                throw AdminFailure.conflict(
                    code: "last_identity", message: "this passkey is the user's last way to sign in; delete the user instead")
            }
            try await IdentityRemoval.remove(db, app: app, user: user, identityId: passkey.identityId, kind: .passkey, reason: "passkey_removed", logger: logger)
            let credential = Base64URL.encode(passkey.credentialId)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "passkey.delete",
                detail: ["userId": .string(id.uuidString.lowercased()), "credentialId": .string(credential)], logger: logger)
            try await Events.record(
                db, app: app, type: .passkeyRemoved, user: user, data: ["credentialId": .string(credential), "actor": .string(actor)], logger: logger)
        }
    }
}

extension Passkey {
    /// What the admin API shows of a passkey (the public key as base64url of its COSE form).
    public func adminJSON() -> [String: JSONValue] {
        [
            "passkeyId": .string(id.uuidString.lowercased()), "credentialId": .string(Base64URL.encode(credentialId)),
            "publicKey": .string(Base64URL.encode(publicKeyCOSE)), "algorithm": .int(algorithm), "signCount": .int(Int(signCount)),
            "name": .string(name), "platform": .string(platform), "attestationFormat": .string(format),
            "attestationVerified": .bool(attestationVerified), "transports": .array(transports.map { .string($0) }),
            "backupEligible": .bool(backupEligible), "backupState": .bool(backupState), "userVerified": .bool(uvInitialized),
            "cloneSuspected": .bool(cloneSuspected), "createdAt": .string(ISO8601.milliseconds(createdAt)),
            "updatedAt": .string(ISO8601.milliseconds(updatedAt)), "lastUsedAt": lastUsedAt.map { .string(ISO8601.milliseconds($0)) } ?? .null,
        ]
    }
}
