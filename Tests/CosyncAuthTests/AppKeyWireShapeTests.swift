import CosyncAuth
import Foundation
import HTTPTypes
import Testing

/// The AppKey wire contract (<doc:AppKeyAPI> §2), answer by answer: one whole session through the live
/// server, and for every answer the exact set of keys, the JSON kind of every value, and the values
/// that are deterministic. Written against the flows that built their JSON in the core, kept when the
/// JSON moved to the HTTP module: the bytes on the wire must not change.
@Suite("AppKey wire shapes: every answer's keys, value kinds and fixed values", .serialized)
struct AppKeyWireShapeTests {
    typealias K = AppKeyClient

    // MARK: the matcher

    /// Leaves of an expected tree that stand for any value of one kind; any other leaf is a value.
    static let S: JSONValue = .string("<string>")
    static let I: JSONValue = .string("<int>")
    static let B: JSONValue = .string("<bool>")
    /// A string in the wire's date format: `2024-01-15T10:00:00.000Z`.
    static let D: JSONValue = .string("<date>")

    static func isDate(_ text: String) -> Bool {
        text.wholeMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z/) != nil
    }

    /// Where `actual` differs from `expected`: objects must have exactly the expected keys, arrays the
    /// expected length, markers the kind, other leaves the value (an int is not a double or a bool).
    static func mismatches(_ actual: JSONValue, _ expected: JSONValue, at path: String = "$") -> [String] {
        switch (expected, actual) {
        case (S, .string): return []
        case (I, .int): return []
        case (B, .bool): return []
        case (D, .string(let text)): return isDate(text) ? [] : ["\(path): \(text) is not a wire date"]
        case (S, _), (I, _), (B, _), (D, _): return ["\(path): \(expected.stringValue ?? "") expected, got \(actual)"]
        case (.object(let want), .object(let got)):
            var out: [String] = []
            for key in Set(want.keys).symmetricDifference(got.keys).sorted() {
                out.append(want[key] == nil ? "\(path).\(key): unexpected key" : "\(path).\(key): missing")
            }
            for (key, value) in want.sorted(by: { $0.key < $1.key }) {
                if let member = got[key] { out += mismatches(member, value, at: "\(path).\(key)") }
            }
            return out
        case (.array(let want), .array(let got)):
            guard want.count == got.count else { return ["\(path): \(want.count) elements expected, got \(got.count)"] }
            return zip(got, want).enumerated().flatMap { index, pair in mismatches(pair.0, pair.1, at: "\(path)[\(index)]") }
        default:
            return expected == actual ? [] : ["\(path): \(expected) expected, got \(actual)"]
        }
    }

    /// A 200 whose body is exactly `expected` (per `mismatches`), as the server's JSON encoder writes it
    /// (sorted keys, unescaped slashes). Returns the body.
    @discardableResult
    static func expectAnswer(_ step: String, _ reply: API.Reply, _ expected: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) throws
        -> [String: JSONValue]
    {
        try #require(reply.status == .ok, "\(step): \(reply.status) \(reply.text)", sourceLocation: sourceLocation)
        #expect(reply.headers[.contentType] == "application/json; charset=utf-8", "\(step)", sourceLocation: sourceLocation)
        let canonical = String(decoding: try JSONCoding.encode(reply.json), as: UTF8.self)
        #expect(reply.text == canonical, "\(step): not the canonical encoding: \(reply.text)", sourceLocation: sourceLocation)
        let found = mismatches(reply.json, expected)
        #expect(found.isEmpty, "\(step): \(found.joined(separator: "; ")) in \(reply.text)", sourceLocation: sourceLocation)
        return reply.object
    }

    // MARK: the expected shapes

    /// An `AKPasskey` (§2.2) of a software authenticator, registered without transports or attachment.
    static func passkey(_ device: SoftwareAuthenticator, name: JSONValue = S, algorithm: Int = -7) -> JSONValue {
        .object([
            "id": .string(WebAuthn.encodeBase64URL(device.credentialId)), "publicKey": S, "counter": I,
            "deviceType": .string(device.backupEligible ? "multiDevice" : "singleDevice"), "credentialBackedUp": .bool(device.backedUp),
            "name": name, "platform": .string("unknown"), "lastUsed": D, "createdAt": D, "updatedAt": D, "type": .string("public-key"),
            "transports": .string("internal,hybrid"), "algorithm": .int(algorithm), "attestationFormat": .string("none"),
            "cloneSuspected": .bool(false),
        ])
    }

    /// A credential descriptor of `excludeCredentials` / `allowCredentials`.
    static func descriptor(_ device: SoftwareAuthenticator) -> JSONValue {
        .object([
            "id": .string(WebAuthn.encodeBase64URL(device.credentialId)), "type": .string("public-key"),
            "transports": .array([.string("internal"), .string("hybrid")]),
        ])
    }

    /// The user body (§2.3, §2.4). `extra`: the keys present only sometimes (`access-token`, `jwt`,
    /// `lastLogin`, `userName`, `firstName`, `lastName`, `valid`). Every account of this session has
    /// `lastLogin`: an account is signed in when it is made.
    static func user(
        appId: String, handle: String, displayName: String, passkeys: [JSONValue], locale: String = "EN", provider: String = "handle",
        anonymous: Bool = false, appUserId: JSONValue = S, extra: [String: JSONValue] = [:]
    ) -> JSONValue {
        var object: [String: JSONValue] = [
            "appUserId": appUserId, "appId": .string(appId), "handle": .string(handle), "displayName": .string(displayName),
            "status": .string("active"), "loginProvider": .string(provider), "authenticators": .array(passkeys), "locale": .string(locale),
            "isAnonymous": .bool(anonymous), "createdAt": D, "updatedAt": D,
        ]
        object.merge(extra) { $1 }
        return .object(object)
    }

    static func displayAppId(name: String, appId: String) -> String {
        let slug = name.lowercased().filter { $0.isLetter || $0.isNumber }
        return "\(slug)-\(appId.prefix(8))"
    }

    /// Creation options (§2.5 AKSignupChallenge).
    static func creationOptions(userId: JSONValue, handle: String, displayName: String, displayAppId: String, exclude: [JSONValue]) -> JSONValue {
        .object([
            "challenge": S, "rp": .object(["name": .string("Example"), "id": .string(K.rpId)]),
            "user": .object([
                "id": userId, "name": .string("\(handle)(\(displayAppId))"), "displayName": .string(displayName), "handle": .string(handle),
            ]),
            "pubKeyCredParams": .array([-7, -257, -8].map { .object(["alg": .int($0), "type": .string("public-key")]) }),
            "timeout": .int(60_000), "attestation": .string("none"), "excludeCredentials": .array(exclude),
            "authenticatorSelection": .object([
                "residentKey": .string("preferred"), "requireResidentKey": .bool(false), "userVerification": .string("required"),
            ]),
            "extensions": .object(["credProps": .bool(true)]),
        ])
    }

    /// Request options (§2.5 AKLoginChallenge).
    static func requestOptions(
        userId: String, handle: String, displayName: String, displayAppId: String, allow: [JSONValue], requireAddPasskey: Bool = false
    ) -> JSONValue {
        var object: [String: JSONValue] = [
            "rpId": .string(K.rpId), "challenge": S, "timeout": .int(60_000), "userVerification": .string("required"),
            "allowCredentials": .array(allow),
            "user": .object([
                "id": .string(userId), "name": .string("\(handle)(\(displayAppId))"), "displayName": .string(displayName),
                "handle": .string(handle),
            ]),
        ]
        if requireAddPasskey { object["requireAddPasskey"] = .bool(true) }
        return .object(object)
    }

    // MARK: the session

    @Test("a whole AppKey session: every answer's keys, kinds and deterministic values")
    func session() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (client, created) = try await K.makeApp(api, [
                "appleLoginEnabled": .bool(true), "appleBundleId": .string(SocialLoginTests.bundleId),
                "googleLoginEnabled": .bool(true), "googleClientId": .string(SocialLoginTests.googleClient),
            ])
            let appId = created.string("appId"), appName = created.string("name")
            let shownId = Self.displayAppId(name: appName, appId: appId)

            // K1 GET app, by app token and by access token (no app token then).
            func appBody(appToken: String) -> JSONValue {
                .object([
                    "appId": .string(appId), "displayAppId": .string(shownId), "name": .string(appName), "userId": .string(""),
                    "status": .string("active"), "handleType": .string("email"), "emailExtension": .bool(false),
                    "appPublicKey": .string(created.string("rawPublicKey")), "signup": .string("open"),
                    "anonymousLoginEnabled": .bool(true), "userNamesEnabled": .bool(true), "googleLoginEnabled": .bool(true),
                    "appleLoginEnabled": .bool(true), "firebaseLoginEnabled": .bool(false), "userJWTExpiration": .int(24),
                    "locales": .array([.string("EN"), .string("FR")]), "smsExtension": .bool(false), "createdAt": Self.D, "updatedAt": Self.D,
                    "appToken": .string(appToken), "googleClientId": .string(SocialLoginTests.googleClient),
                    "appleBundleId": .string(SocialLoginTests.bundleId), "relyPartyId": .string(K.rpId),
                ])
            }
            try Self.expectAnswer("GET app", try await client.get("app"), appBody(appToken: client.appToken))

            // K3–K5 signup.
            let handle = K.uniqueEmail()
            var device = SoftwareAuthenticator(kind: .es256, rpId: K.rpId, origin: K.origin)
            let signupReply = try await client.post("signup", .json, [("handle", .string(handle)), ("displayName", .string("Ann"))])
            let signup = try Self.expectAnswer(
                "signup", signupReply,
                Self.creationOptions(userId: Self.S, handle: handle, displayName: "Ann", displayAppId: shownId, exclude: []))
            let userId = try #require(signup["user"]?["id"]?.stringValue)
            #expect(AppKeyIds.uuid(userId) != nil, "user.id is 32 hex characters: \(userId)")
            let registration = device.register(challenge: try K.challenge(signupReply))
            let confirm = try Self.expectAnswer(
                "signupConfirm", try await client.post("signupConfirm", .json, K.registration(handle: handle, registration, .json)),
                .object([
                    "handle": .string(handle), "message": .string("A verification code was sent to \(handle)."), "signup-token": Self.S,
                    "signUpToken": Self.S,
                ]))
            let signupToken = confirm.string("signup-token")
            #expect(confirm["signUpToken"] == .string(signupToken))
            let code = try await K.lastCode(to: handle)
            let appUserId = JSONValue.string(userId)
            let first = Self.passkey(device, name: .string("Ann-unknown"))
            let complete = try Self.expectAnswer(
                "signupComplete", try await client.post("signupComplete", .json, [("code", .string(code))], .signup(signupToken)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: [first], appUserId: appUserId,
                          extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D]))
            let token = complete.string("access-token")
            #expect(SDKJWTCheck.isValid(jwt: complete.string("jwt"), rawPublicKey: created.string("rawPublicKey")))

            // K1 by access token: no app token shown.
            try Self.expectAnswer("GET app by access token", try await client.get("app", .access(token)), appBody(appToken: ""))

            // K2 GET user.
            try Self.expectAnswer(
                "GET user", try await client.get("user", .access(token)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: [first], appUserId: appUserId,
                          extra: ["access-token": .string(token), "jwt": Self.S, "lastLogin": Self.D]))

            // K6, K7 login.
            let loginOptions = try await client.post("login", .json, [("handle", .string(handle))])
            try Self.expectAnswer(
                "login", loginOptions,
                Self.requestOptions(userId: userId, handle: handle, displayName: "Ann", displayAppId: shownId, allow: [Self.descriptor(device)]))
            let assertion = device.assert(challenge: try K.challenge(loginOptions), userHandle: nil)
            let login = try Self.expectAnswer(
                "loginComplete", try await client.post("loginComplete", .json, K.assertion(handle: handle, assertion, .json)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: [first], appUserId: appUserId,
                          extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D]))
            #expect(login["access-token"] != .string(token))

            // K10, K11 verify.
            let verifyOptions = try await client.post("verify", .json, [("handle", .string(handle))], .access(token))
            try Self.expectAnswer(
                "verify", verifyOptions,
                Self.requestOptions(userId: userId, handle: handle, displayName: "Ann", displayAppId: shownId, allow: [Self.descriptor(device)]))
            let verifyAssertion = device.assert(challenge: try K.challenge(verifyOptions), userHandle: nil)
            try Self.expectAnswer(
                "verifyComplete", try await client.post("verifyComplete", .json, K.assertion(handle: handle, verifyAssertion, .json), .access(token)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: [first], appUserId: appUserId,
                          extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D, "valid": .bool(true)]))

            // K20–K23 passkeys.
            let second = SoftwareAuthenticator(kind: .rs256, rpId: K.rpId, origin: K.origin)
            let addOptions = try await client.post("addPasskey", .json, [], .access(token))
            try Self.expectAnswer(
                "addPasskey", addOptions,
                Self.creationOptions(userId: appUserId, handle: handle, displayName: "Ann", displayAppId: shownId, exclude: [Self.descriptor(device)]))
            let both = [first, Self.passkey(second, name: .string("Ann-unknown"), algorithm: -257)]
            try Self.expectAnswer(
                "addPasskeyComplete",
                try await client.post("addPasskeyComplete", .json, K.registration(handle: nil, second.register(challenge: try K.challenge(addOptions)), .json), .access(token)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: both, appUserId: appUserId,
                          extra: ["access-token": .string(token), "jwt": Self.S, "lastLogin": Self.D]))
            let secondId = WebAuthn.encodeBase64URL(second.credentialId)
            let renamed = [first, Self.passkey(second, name: .string("Work laptop"), algorithm: -257)]
            try Self.expectAnswer(
                "updatePasskey",
                try await client.post("updatePasskey", .json, [("keyId", .string(secondId)), ("keyName", .string("Work laptop"))], .access(token)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: renamed, appUserId: appUserId,
                          extra: ["access-token": .string(token), "jwt": Self.S, "lastLogin": Self.D]))
            try Self.expectAnswer(
                "removePasskey", try await client.post("removePasskey", .json, [("keyId", .string(secondId))], .access(token)),
                Self.user(appId: appId, handle: handle, displayName: "Ann", passkeys: [first], appUserId: appUserId,
                          extra: ["access-token": .string(token), "jwt": Self.S, "lastLogin": Self.D]))

            // K12–K14, K19: the answers without a user body.
            for (name, fields) in [("updateProfile", [("firstName", "Ann"), ("lastName", "Lee")]), ("setLocale", [("locale", "fr")])] {
                let reply = try await client.post(name, .json, fields.map { ($0.0, .string($0.1)) }, .access(token))
                #expect(reply.status == .ok && reply.text == "true", "\(name): \(reply.status) \(reply.text)")
            }
            let userName = "ann\(Secrets.hexIdentifier().prefix(6).filter(\.isNumber))"
            try Self.expectAnswer(
                "userNameAvailable", try await client.get("userNameAvailable", .access(token), query: "?userName=\(userName)"),
                .object(["available": .bool(true)]))
            let named = try await client.post("setUserName", .json, [("userName", .string(userName))], .access(token))
            #expect(named.status == .ok && named.text == "true", "setUserName: \(named.text)")
            try Self.expectAnswer(
                "GET user after the profile", try await client.get("user", .access(token)),
                Self.user(appId: appId, handle: handle, displayName: "Ann Lee", passkeys: [first], locale: "FR", appUserId: appUserId,
                          extra: ["access-token": .string(token), "jwt": Self.S, "lastLogin": Self.D, "userName": .string(userName),
                                  "firstName": .string("Ann"), "lastName": .string("Lee")]))

            // K8, K9 anonymous.
            let anonymous = "ANON_" + UUID().uuidString
            let anonDevice = SoftwareAuthenticator(kind: .es256, rpId: K.rpId, origin: K.origin)
            let anonOptions = try await client.post("loginAnonymous", .json, [("handle", .string(anonymous))])
            let anonOptionsBody = try Self.expectAnswer(
                "loginAnonymous", anonOptions,
                Self.creationOptions(userId: Self.S, handle: anonymous, displayName: anonymous, displayAppId: shownId, exclude: []))
            try Self.expectAnswer(
                "loginAnonymousComplete",
                try await client.post(
                    "loginAnonymousComplete", .json, K.registration(handle: anonymous, anonDevice.register(challenge: try K.challenge(anonOptions)), .json)),
                Self.user(appId: appId, handle: anonymous, displayName: anonymous, passkeys: [Self.passkey(anonDevice, name: .string("anonymous-unknown"))],
                          anonymous: true, appUserId: anonOptionsBody["user"]?["id"] ?? Self.S, extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D]))

            // §5.4 passkey reset: login asks for a passkey; the reset token adds one, with no session keys.
            let resetHandle = K.uniqueEmail("reset")
            let resetUser = try await client.signUp(resetHandle, SoftwareAuthenticator(kind: .es256, rpId: K.rpId, origin: K.origin), .json)
            let resetUserId = resetUser.string("appUserId")
            let uuid = try #require(AppKeyIds.uuid(resetUserId)).uuidString.lowercased()
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/users/\(uuid)/passkey-reset").status == .ok)
            try Self.expectAnswer(
                "login after a reset", try await client.post("login", .json, [("handle", .string(resetHandle))]),
                Self.requestOptions(userId: resetUserId, handle: resetHandle, displayName: "Ann", displayAppId: shownId, allow: [], requireAddPasskey: true))
            let mails = try await TestEnvironment.sendGrid.value.waitForMails(to: resetHandle, count: 2)
            let resetToken = try #require(
                (mails.last?.text ?? "").split(whereSeparator: \.isWhitespace).map(String.init).first { $0.split(separator: ".").count == 3 })
            let newDevice = SoftwareAuthenticator(kind: .es256, rpId: K.rpId, origin: K.origin)
            let resetOptions = try await client.post("addPasskey", .json, [], .access(resetToken))
            try Self.expectAnswer(
                "addPasskey by reset token", resetOptions,
                Self.creationOptions(userId: .string(resetUserId), handle: resetHandle, displayName: "Ann", displayAppId: shownId, exclude: []))
            try Self.expectAnswer(
                "addPasskeyComplete by reset token",
                try await client.post(
                    "addPasskeyComplete", .json, K.registration(handle: nil, newDevice.register(challenge: try K.challenge(resetOptions)), .json),
                    .access(resetToken)),
                Self.user(appId: appId, handle: resetHandle, displayName: "Ann", passkeys: [Self.passkey(newDevice, name: .string("Ann-unknown"))],
                          appUserId: .string(resetUserId), extra: ["lastLogin": Self.D]))

            // K16–K18 social.
            let helper = SocialLoginTests()
            let email = SocialLoginTests.unique("google")
            let idToken = try await helper.idToken(.google, email: email, sub: "sub-\(Secrets.hexIdentifier().prefix(10))")
            let social: [(String, JSONValue)] = [("token", .string(idToken)), ("provider", .string("google"))]
            let socialUser = try Self.expectAnswer(
                "socialSignup", try await client.post("socialSignup", .json, social + [("handle", .string(email)), ("displayName", .string("Sam"))]),
                Self.user(appId: appId, handle: email, displayName: "Sam", passkeys: [], provider: "google", extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D]))
            #expect(SDKJWTCheck.payload(socialUser.string("jwt"))["loginProvider"] == .string("google"))
            let socialLogin = try Self.expectAnswer(
                "socialLogin", try await client.post("socialLogin", .json, social),
                Self.user(appId: appId, handle: email, displayName: "Sam", passkeys: [], provider: "google", appUserId: socialUser["appUserId"] ?? Self.S,
                          extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D]))
            try Self.expectAnswer(
                "verifySocialAccount", try await client.post("verifySocialAccount", .json, social, .access(socialLogin.string("access-token"))),
                Self.user(appId: appId, handle: email, displayName: "Sam", passkeys: [], provider: "google", appUserId: socialUser["appUserId"] ?? Self.S,
                          extra: ["access-token": Self.S, "jwt": Self.S, "lastLogin": Self.D]))

            // An error body (§1.6).
            let unknown = try await client.post("login", .json, [("handle", .string(K.uniqueEmail("nobody")))])
            #expect(unknown.status == .badRequest && Self.mismatches(unknown.json, .object(["code": .int(603), "message": Self.S])).isEmpty, "\(unknown.text)")
        }
    }
}
