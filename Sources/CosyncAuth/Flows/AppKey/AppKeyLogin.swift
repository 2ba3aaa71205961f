import Foundation
import PostgresNIO

extension AppKeyFlows {
    /// The user a login or verify handle names (<doc:AppKeyAPI> K6): by handle (e-mail, phone, anonymous) or by
    /// user name, with the user checks of <doc:AppKeyAPI> K6.
    func loginUser(_ raw: String, app: App) async throws -> User {
        guard let handle = AppKeyHandle.parse(raw, userNames: true) else { throw AppKeyError.accountDoesNotExist }
        let user: User?
        switch handle {
        case .anonymous(let text):
            guard !text.isEmpty else { throw AppKeyError.invalidLoginCredentials.with("invalid anonymous handle") }
            user = try await client.withConnection { try await UserStore.user($0, appRef: app.ref, handle: text, exact: true, logger: logger) }
            guard user != nil else { throw AppKeyError.accountDoesNotExist }
        case .email(let text), .phone(let text):
            user = try await client.withConnection { try await UserStore.user($0, appRef: app.ref, handle: text, logger: logger) }
            guard user != nil else { throw AppKeyError.accountDoesNotExist }
        case .userName(let name):
            guard app.settings.userNamesEnabled else { throw AppKeyError.userNamesNotSupported }
            user = try await client.withConnection { try await PasskeyStore.user($0, appRef: app.ref, userName: name, logger: logger) }
            guard user != nil else { throw AppKeyError.userNameDoesNotExist }
        }
        guard let user else { throw AppKeyError.accountDoesNotExist }
        guard user.status == .active else { throw AppKeyError.accountSuspended }
        switch user.loginProvider {
        case "apple": throw AppKeyError.appleAccountExists
        case "google": throw AppKeyError.googleAccountExists
        default: return user
        }
    }

    /// K6 `POST login` and K10 `POST verify`: request options for the user's passkeys.
    public func login(app: App, fields: AppKeyFields, verify: Bool = false) async throws -> PasskeyRequestOptions {
        let user = try await loginUser(try fields.require("handle"), app: app)
        let rp = try relyingParty(app)
        let challenge = Self.newChallenge()
        let (profile, passkeys) = try await client.transaction(logger: logger) { db in
            let profile = try await PasskeyStore.profile(db, userId: user.id, logger: logger)
            let passkeys = try await PasskeyStore.list(db, appRef: app.ref, userId: user.id, logger: logger)
            let resetPending = profile?.requireAddPasskey ?? false
            guard resetPending || !passkeys.isEmpty else { throw AppKeyError.passkeyNotExist.with("this account has no passkey") }
            try await takeChallengeQuota(db, app: app, handle: user.handle, newAccount: false)
            try await ChallengeStore.insert(
                db, appRef: app.ref, challenge: challenge, purpose: verify ? .verify : .login, handle: user.handle, userId: user.id,
                lifetimeSeconds: app.settings.challengeLifetimeSeconds, logger: logger)
            return (profile, passkeys)
        }
        return PasskeyRequestOptions(
            rpId: rp.id, challenge: challenge, timeout: settings.advertisedTimeout, userVerification: app.settings.userVerification.rawValue,
            allowCredentials: passkeys.map(PasskeyDescriptor.init),
            user: Self.ceremonyUser(app: app, userId: user.id, handle: user.handle, displayName: profile?.displayName ?? user.handle),
            requireAddPasskey: profile?.requireAddPasskey ?? false)
    }

    /// K7 `POST loginComplete` and K11 `POST verifyComplete`: consumes the challenge, has the passkey
    /// method judge the assertion (`PasskeyMethod`), opens a session (`SessionGrant`).
    public func loginComplete(app: App, fields: AppKeyFields, verify: Bool = false) async throws -> AppKeyUserResult {
        let user = try await loginUser(try fields.require("handle"), app: app)
        let id = try fields.require("id")
        let response = try fields.response()
        guard let clientData = response["clientDataJSON"]?.stringValue, let authData = response["authenticatorData"]?.stringValue,
            let signature = response["signature"]?.stringValue
        else { throw AppKeyError.missingParameter.with("missing parameter: response.clientDataJSON / authenticatorData / signature") }
        let rp = try relyingParty(app)
        let purpose: ChallengePurpose = verify ? .verify : .login
        let (value, bytes) = try Self.challenge(ofClientData: clientData)
        guard let row = try await client.withConnection({ try await ChallengeStore.consume($0, appRef: app.ref, challenge: value, logger: logger) }),
            row.purpose == purpose, row.userId == user.id
        else { throw AppKeyError.invalidData.with("unknown or expired challenge") }
        let userHandle = response["userHandle"]?.stringValue
        let assertion = AssertionResponse(
            id: id, rawId: fields["rawId"], type: fields["type"], clientDataJSON: clientData, authenticatorData: authData, signature: signature,
            userHandle: userHandle)
        let credentialId: [UInt8]
        do throws(WebAuthnError) {
            credentialId = try WebAuthn.credentialId(of: assertion)
        } catch {
            throw AppKeyError.invalidPasskey.with("invalid passkey: \(error.message)")
        }
        enum Outcome { case ok(String?), failed(String), regressed }
        let passkeys = self.passkeys
        let outcome: Outcome = try await client.transaction(logger: logger) { db in
            // The user row first, then the passkey: the order an account deletion takes them in.
            guard try await UserStore.lockLive(db, appRef: app.ref, userId: user.id, tokenVersion: user.tokenVersion, logger: logger)
            else { throw AppKeyError.accountSuspended }
            let passkey: Passkey
            switch try await passkeys.verify(db, app: app, user: user, assertion: assertion, credentialId: credentialId, challenge: bytes, rp: rp) {
            case .unknownCredential: throw AppKeyError.passkeyNotExist.with("this passkey is not registered for this account")
            case .otherUser: throw AppKeyError.invalidPasskey.with("invalid passkey: the user handle names another user")
            case .failed(let message): return .failed(message)
            case .counterRegressed: return .regressed
            case .verified(let verified, proof: _, let cloneFlagged):
                passkey = verified
                if cloneFlagged {
                    try await Events.record(
                        db, app: app, type: .passkeyCloneSuspected, user: user,
                        data: ["credentialId": .string(Base64URL.encode(credentialId)), "policy": .string("flag")], logger: logger)
                    try await audit(db, app: app, handle: user.handle, action: "passkey.cloneSuspected", detail: ["policy": .string("flag")])
                }
            }
            if !verify { try await UserStore.touchLastLogin(db, userId: user.id, logger: logger) }
            let access = try await openSession(db, app: app, user: user, method: .passkey, identityId: passkey.identityId)
            try await audit(db, app: app, handle: user.handle, action: purpose.rawValue + "Complete")
            try await Events.record(
                db, app: app, type: .userLoginSucceeded, user: user, data: ["method": .string("passkey"), "verify": .bool(verify)], logger: logger)
            return .ok(access)
        }
        switch outcome {
        case .ok(let access):
            let fresh = try await client.withConnection { try await UserStore.find($0, appRef: app.ref, id: user.id, logger: logger) } ?? user
            return try await userResult(app: app, user: fresh, accessToken: access, valid: verify ? true : nil)
        case .failed(let message):
            try await client.transaction(logger: logger) { db in
                try await audit(db, app: app, handle: user.handle, action: purpose.rawValue + "Complete", status: "error", detail: ["reason": .string(message)])
                try await Events.record(db, app: app, type: .userLoginFailed, user: user, data: ["method": .string("passkey"), "reason": .string("invalidPasskey")], logger: logger)
            }
            throw AppKeyError.invalidPasskey.with("invalid passkey: \(message)")
        case .regressed:
            try await client.transaction(logger: logger) { db in
                try await audit(db, app: app, handle: user.handle, action: "passkey.cloneSuspected", status: "error", detail: ["policy": .string("refuse")])
                try await Events.record(
                    db, app: app, type: .passkeyCloneSuspected, user: user,
                    data: ["credentialId": .string(Base64URL.encode(credentialId)), "policy": .string("refuse")], logger: logger)
            }
            throw AppKeyError.invalidPasskey.with("invalid passkey: the signature counter did not increase (possible cloned authenticator)")
        }
    }
}
