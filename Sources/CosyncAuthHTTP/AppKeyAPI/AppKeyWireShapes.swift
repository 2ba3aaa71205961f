import CosyncAuth
import Foundation

// The JSON shapes of the AppKey API (<doc:AppKeyAPI> §2): how the AppKey flows' typed results go on
// the wire. The flows return typed values; only this module knows their JSON. JSONBody writes objects
// with sorted keys, so the order of the members here does not matter.

extension AppKeyUserResult {
    /// The user body (<doc:AppKeyAPI> §2.3, §2.4): `userName`, `lastLogin`, `firstName`, `lastName`
    /// only when set; the session keys (`access-token`, `jwt`) and verifyComplete's `valid` only when
    /// this answer carries them.
    func json() -> [String: JSONValue] {
        var object: [String: JSONValue] = [
            "appUserId": .string(AppKeyIds.wire(user.id)), "appId": .string(appId), "handle": .string(user.handle),
            "displayName": .string(displayName), "status": .string(user.status.rawValue), "loginProvider": .string(loginProvider),
            "authenticators": .array(passkeys.map { .object($0.appKeyJSON()) }), "locale": .string(user.locale),
            "isAnonymous": .bool(isAnonymous),
            "createdAt": .string(ISO8601.milliseconds(user.createdAt)), "updatedAt": .string(ISO8601.milliseconds(user.updatedAt)),
        ]
        if let name = user.userName { object["userName"] = .string(name) }
        if let last = user.lastLogin { object["lastLogin"] = .string(ISO8601.milliseconds(last)) }
        if let first = profile?.firstName { object["firstName"] = .string(first) }
        if let last = profile?.lastName { object["lastName"] = .string(last) }
        if let accessToken { object["access-token"] = .string(accessToken) }
        if let jwt { object["jwt"] = .string(jwt) }
        if let valid { object["valid"] = .bool(valid) }
        return object
    }
}

extension Passkey {
    /// An `AKPasskey` (<doc:AppKeyAPI> §2.2). Transports are one comma-separated string here.
    func appKeyJSON() -> [String: JSONValue] {
        [
            "id": .string(Base64URL.encode(credentialId)), "publicKey": .string(Base64URL.encode(publicKeyCOSE)),
            "counter": .int(Int(signCount)), "deviceType": .string(backupEligible ? "multiDevice" : "singleDevice"),
            "credentialBackedUp": .bool(backupState), "name": .string(name), "platform": .string(platform),
            "lastUsed": .string(ISO8601.milliseconds(lastUsedAt ?? createdAt)), "createdAt": .string(ISO8601.milliseconds(createdAt)),
            "updatedAt": .string(ISO8601.milliseconds(updatedAt)), "type": .string("public-key"),
            "transports": .string(transports.joined(separator: ",")), "algorithm": .int(algorithm),
            "attestationFormat": .string(format), "cloneSuspected": .bool(cloneSuspected),
        ]
    }
}

extension PasskeyDescriptor {
    /// A `PublicKeyCredentialDescriptor`; transports are an array here.
    func json() -> JSONValue {
        .object([
            "id": .string(Base64URL.encode(credentialId)), "type": .string("public-key"),
            "transports": .array(transports.map { .string($0) }),
        ])
    }
}

extension PasskeyUserEntity {
    /// The ceremony's `user`: its id is the AppKey user id (32 hex characters).
    func json() -> JSONValue {
        .object([
            "id": .string(AppKeyIds.wire(id)), "name": .string(name), "displayName": .string(displayName), "handle": .string(handle),
        ])
    }
}

extension PasskeyCreationOptions {
    /// AKSignupChallenge (<doc:AppKeyAPI> §2.5).
    func json() -> [String: JSONValue] {
        [
            "challenge": .string(challenge), "rp": .object(["name": .string(rpName), "id": .string(rpId)]),
            "user": user.json(),
            "pubKeyCredParams": .array(algorithms.map { .object(["alg": .int($0), "type": .string("public-key")]) }),
            "timeout": .int(timeout), "attestation": .string(attestation),
            "excludeCredentials": .array(excludeCredentials.map { $0.json() }),
            "authenticatorSelection": .object([
                "residentKey": .string(residentKey), "requireResidentKey": .bool(requireResidentKey),
                "userVerification": .string(userVerification),
            ]),
            "extensions": .object(["credProps": .bool(credProps)]),
        ]
    }
}

extension PasskeyRequestOptions {
    /// AKLoginChallenge (<doc:AppKeyAPI> §2.5). `requireAddPasskey` is present only when true: a
    /// client takes the reset branch whenever the key exists.
    func json() -> [String: JSONValue] {
        var object: [String: JSONValue] = [
            "rpId": .string(rpId), "challenge": .string(challenge), "timeout": .int(timeout),
            "userVerification": .string(userVerification), "allowCredentials": .array(allowCredentials.map { $0.json() }),
            "user": user.json(),
        ]
        if requireAddPasskey { object["requireAddPasskey"] = .bool(true) }
        return object
    }
}

extension AppKeyAppDescription {
    /// K1 `GET app` (<doc:AppKeyAPI> §2.1): the legacy keys the clients read, some of them fixed
    /// (`userId` empty; no Firebase, no SMS extension). `appToken` is empty unless the caller presented it.
    func json() -> [String: JSONValue] {
        let s = app.settings
        var object: [String: JSONValue] = [
            "appId": .string(app.appId), "displayAppId": .string(displayAppId), "name": .string(app.name),
            "userId": .string(""), "status": .string(app.status.legacyName),
            "handleType": .string(s.handleType.rawValue), "emailExtension": .bool(s.emailExtension),
            "appPublicKey": .string(publicKey ?? ""), "signup": .string(s.signupEnabled ? "open" : "invite"),
            "anonymousLoginEnabled": .bool(s.anonymousLoginEnabled), "userNamesEnabled": .bool(s.userNamesEnabled),
            "googleLoginEnabled": .bool(s.googleLoginEnabled), "appleLoginEnabled": .bool(s.appleLoginEnabled),
            "firebaseLoginEnabled": .bool(false), "userJWTExpiration": .int(s.userJWTExpiration),
            "locales": .array(s.locales.map { .string($0) }), "smsExtension": .bool(false),
            "createdAt": .string(ISO8601.milliseconds(app.createdAt)), "updatedAt": .string(ISO8601.milliseconds(app.updatedAt)),
            "appToken": .string(appToken ?? ""),
        ]
        if let googleClientId { object["googleClientId"] = .string(googleClientId) }
        if let appleBundleId { object["appleBundleId"] = .string(appleBundleId) }
        if !s.rpId.isEmpty { object["relyPartyId"] = .string(s.rpId) }
        return object
    }
}

extension AppKeyPendingSignup {
    /// K4 `signupConfirm`: the signup-token under both of its legacy names.
    func json() -> [String: JSONValue] {
        [
            "handle": .string(handle), "message": .string("A verification code was sent to \(handle)."), "signup-token": .string(signupToken),
            "signUpToken": .string(signupToken),
        ]
    }
}
