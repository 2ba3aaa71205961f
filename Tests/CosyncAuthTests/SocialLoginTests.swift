import CosyncAuth
import Foundation
import Testing

@Suite("End-user API: Apple and Google login")
struct SocialLoginTests {
    static let bundleId = "com.example.shipped"
    static let googleClient = "123-abc.apps.googleusercontent.com"

    static func unique(_ name: String) -> String { "\(name)\(Secrets.hexIdentifier().prefix(8))@example.com" }

    func makeApp(_ api: API, _ settings: [String: JSONValue] = [:]) async throws -> (SDK, [String: JSONValue]) {
        var all: [String: JSONValue] = [
            "signupFlow": .string("code"), "appleLoginEnabled": .bool(true), "appleBundleId": .string("com.example.web, \(Self.bundleId)"),
            "googleLoginEnabled": .bool(true), "googleClientId": .string("999-web.apps.googleusercontent.com,\(Self.googleClient)"),
        ]
        all.merge(settings) { $1 }
        let created = try await api.createApp("Social \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))", settings: all)
        return (SDK(api: api, appToken: created.string("appToken")), created)
    }

    /// An ID token of `provider` signed with its current key (or `key`/`kid` for forgeries).
    func idToken(
        _ provider: SocialProvider, email: String?, sub: String, aud: String? = nil, iss: String? = nil, expiresIn: Int = 600,
        iat: Int? = Int(Date().timeIntervalSince1970), key: FakeIdentityProviders.Key? = nil, kid: String? = nil,
        emailVerified: Bool? = true
    ) async throws -> String {
        let idp = try await TestEnvironment.identityProviders.value
        let signingKey = try #require(key == nil ? await idp.current(provider) : key)
        let now = Int(Date().timeIntervalSince1970)
        let claims = TestIDToken(
            iss: iss ?? (provider == .apple ? TestIDToken.appleIssuer : TestIDToken.googleIssuer),
            aud: aud ?? (provider == .apple ? Self.bundleId : Self.googleClient), exp: now + expiresIn, iat: iat, sub: sub, email: email,
            email_verified: emailVerified)
        return try await TestIDToken.sign(claims, pem: signingKey.pem, kid: kid ?? signingKey.kid)
    }

    func code(_ reply: API.Reply) -> Int? { reply.status == .badRequest ? reply.object["code"]?.intValue : nil }

    @Test("socialSignup then socialLogin for Apple and Google (and the alias paths); the JWT verifies with rawPublicKey")
    func signupThenLogin() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, app) = try await makeApp(api, [
                "metaData": .array([.object(["path": .string("user.name"), "fieldName": .string("name"), "required": .bool(true)])])
            ])
            for provider in SocialProvider.allCases {
                let email = Self.unique(provider.rawValue)
                let sub = "sub-\(provider.rawValue)-\(Secrets.hexIdentifier().prefix(10))"
                let token = try await idToken(provider, email: email, sub: sub)
                // The handle arrives with `+` unescaped (a space); §1.3 repairs it.
                let handleOnWire = email.replacingOccurrences(of: "+", with: " ")
                let signup = try await sdk.post("/api/appuser/socialSignup", [
                    ("token", token), ("provider", provider.rawValue), ("handle", handleOnWire), ("metaData", #"{"user":{"name":"Ann"}}"#),
                    ("locale", "en"),
                ])
                #expect(Set(signup.object.keys) == ["jwt", "access-token"], "\(signup.text)")
                #expect(SDKJWTCheck.isValid(jwt: signup.object.string("jwt"), rawPublicKey: app.string("rawPublicKey")))
                let user = try await sdk.get("/api/appuser/getUser", accessToken: signup.object.string("access-token")).object
                #expect(user["handle"] == .string(email) && user["loginProvider"] == .string(provider.rawValue))

                let login = try await sdk.post("/api/appuser/socialLogin", [("token", try await idToken(provider, email: email, sub: sub)), ("provider", provider.rawValue)])
                #expect(Set(login.object.keys) == ["jwt", "access-token"], "\(login.text)")
                #expect(SDKJWTCheck.payload(login.object.string("jwt"))["sub"] == .string(email))
                // Apple may leave the e-mail out on later logins: the provider account id finds the user.
                let noEmail = try await sdk.post("/api/appuser/\(provider.rawValue)Login", [("token", try await idToken(provider, email: nil, sub: sub))])
                #expect(Set(noEmail.object.keys) == ["jwt", "access-token"], "alias path: \(noEmail.text)")
            }
            // The CJS 1.1.21 alias for signup.
            let email = Self.unique("alias")
            let alias = try await sdk.post("/api/appuser/googleSignup", [
                ("token", try await idToken(.google, email: email, sub: "g-\(Secrets.hexIdentifier())")), ("handle", email),
                ("metaData", #"{"user":{"name":"Al"}}"#),
            ])
            #expect(Set(alias.object.keys) == ["jwt", "access-token"], "\(alias.text)")
            let logs = try await api.call(.get, "/admin/v1/apps/\(app.string("appId"))/logs?limit=200").object["logs"]?.arrayValue ?? []
            let logged = Set(logs.compactMap { $0["action"]?.stringValue })
            #expect(logged.isSuperset(of: ["socialSignup", "socialLogin"]))
        }
    }

    @Test("every social error: 403, 602, 415, 416, 603, 604, 610, 611, 612, 613 (expired, forged, wrong audience, issuer, e-mail); an unlinked provider account is 603 whatever its e-mail")
    func errors() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let sub = "s-\(Secrets.hexIdentifier().prefix(10))"
            let email = Self.unique("err")
            let good = try await idToken(.apple, email: email, sub: sub)

            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("provider", "apple")])) == 403)
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", good)])) == 403)
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", good), ("provider", "facebook")])) == 602)
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", good), ("provider", "apple")])) == 403)
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", good), ("provider", "apple")])) == 603)

            // Token checks (613).
            let idp = try await TestEnvironment.identityProviders.value
            let appleKey = try #require(await idp.current(.apple))
            let stranger = try FakeIdentityProviders.makeKey()
            let forged = try await idToken(.apple, email: email, sub: sub, key: stranger, kid: appleKey.kid)
            let expired = try await idToken(.apple, email: email, sub: sub, expiresIn: -3600)
            let wrongAudience = try await idToken(.apple, email: email, sub: sub, aud: "com.attacker.app")
            let wrongIssuer = try await idToken(.apple, email: email, sub: sub, iss: "https://evil.example")
            let googleKeyForApple = try await idToken(.google, email: email, sub: sub, aud: Self.bundleId, iss: TestIDToken.appleIssuer)
            let noIat = try await idToken(.google, email: email, sub: sub, iat: nil)
            for token in [forged, expired, wrongAudience, wrongIssuer, googleKeyForApple, "garbage", "a.b.c"] {
                #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", token), ("provider", "apple"), ("handle", email)])) == 613)
            }
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", noIat), ("provider", "google"), ("handle", email)])) == 613)
            // The token's e-mail must be the handle.
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", good), ("provider", "apple"), ("handle", Self.unique("other"))])) == 613)
            // Bad locale / metadata JSON → 602.
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", good), ("provider", "apple"), ("handle", email), ("locale", "XX")])) == 602)
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", good), ("provider", "apple"), ("handle", email), ("metaData", "{oops")])) == 602)

            // A rotated provider key (unknown kid) is fetched and accepted.
            let rotated = try await idp.rotate(.apple)
            #expect(rotated.kid != appleKey.kid)
            let signup = try await sdk.post("/api/appuser/socialSignup", [("token", try await idToken(.apple, email: email, sub: sub)), ("provider", "apple"), ("handle", email)])
            #expect(Set(signup.object.keys) == ["jwt", "access-token"], "\(signup.text)")

            // Same provider and e-mail but another provider account: no account (the linking rule), not this user.
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", try await idToken(.apple, email: email, sub: "intruder")), ("provider", "apple")])) == 603)
            // An e-mail the provider did not verify names no account.
            let unverified = Self.unique("unv")
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [
                ("token", try await idToken(.google, email: unverified, sub: "u1", emailVerified: false)), ("provider", "google"), ("handle", unverified),
            ])) == 613)

            // Account-exists codes come from socialSignup; socialLogin of a provider account linked to
            // nobody is 603 whatever its e-mail names (the client then calls socialSignup).
            let googleSameEmail = try await idToken(.google, email: email, sub: "g-\(sub)")
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", googleSameEmail), ("provider", "google")])) == 603)
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", googleSameEmail), ("provider", "google"), ("handle", email)])) == 611)
            let passwordUser = Self.unique("pw")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(passwordUser)), ("password", SDK.md5("pw"))]).status == .ok)
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", try await idToken(.google, email: passwordUser, sub: "x1")), ("provider", "google")])) == 603)
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", try await idToken(.apple, email: passwordUser, sub: "x2")), ("provider", "apple"), ("handle", passwordUser)])) == 610)
            let googleUser = Self.unique("gu")
            #expect(try await sdk.post("/api/appuser/socialSignup", [("token", try await idToken(.google, email: googleUser, sub: "gu1")), ("provider", "google"), ("handle", googleUser)]).status == .ok)
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", try await idToken(.apple, email: googleUser, sub: "ap1")), ("provider", "apple")])) == 603)
            #expect(code(try await sdk.post("/api/appuser/socialSignup", [("token", try await idToken(.apple, email: googleUser, sub: "ap1")), ("provider", "apple"), ("handle", googleUser)])) == 612)

            // Provider switches (415/416) and required metadata (604).
            let (off, _) = try await makeApp(api, ["appleLoginEnabled": .bool(false), "googleClientId": .string("")])
            #expect(code(try await off.post("/api/appuser/socialLogin", [("token", good), ("provider", "apple")])) == 415)
            #expect(code(try await off.post("/api/appuser/socialSignup", [("token", good), ("provider", "google"), ("handle", email)])) == 416)
            let (strict, _) = try await makeApp(api, [
                "metaData": .array([.object(["path": .string("name"), "fieldName": .string("name"), "required": .bool(true)])])
            ])
            #expect(code(try await strict.post("/api/appuser/socialSignup", [("token", good), ("provider", "apple"), ("handle", email)])) == 604)
        }
    }

    @Test("deleteAccount with a provider token: only the user's own provider account deletes it")
    func deleteWithToken() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _) = try await makeApp(api)
            let email = Self.unique("del")
            let sub = "d-\(Secrets.hexIdentifier().prefix(10))"
            let signup = try await sdk.post("/api/appuser/socialSignup", [("token", try await idToken(.google, email: email, sub: sub)), ("provider", "google"), ("handle", email)])
            let access = signup.object.string("access-token")
            #expect(code(try await sdk.post("/api/appuser/deleteAccount", [("token", try await idToken(.google, email: email, sub: "someone-else"))], accessToken: access)) == 613)
            #expect(code(try await sdk.post("/api/appuser/deleteAccount", [("token", try await idToken(.google, email: email, sub: sub, aud: "other.client"))], accessToken: access)) == 613)
            // Fresh authentication: a provider token issued longer ago than the app's freshAuthMinutes (5) is refused.
            let stale = Int(Date().timeIntervalSince1970) - 6 * 60
            #expect(code(try await sdk.post("/api/appuser/deleteAccount", [("token", try await idToken(.google, email: email, sub: sub, iat: stale))], accessToken: access)) == 613)
            #expect(try await sdk.post("/api/appuser/deleteAccount", [("token", try await idToken(.google, email: email, sub: sub))], accessToken: access).text == "true")
            #expect(code(try await sdk.post("/api/appuser/socialLogin", [("token", try await idToken(.google, email: email, sub: sub)), ("provider", "google")])) == 603)
            // A password account cannot use token mode (602).
            let pw = Self.unique("pwd")
            let (plain, _) = try await makeApp(api, ["signupFlow": .string("none")])
            let pwAccess = try await plain.post("/api/appuser/signup", [("handle", SDK.handle(pw)), ("password", SDK.md5("pw"))]).object.string("access-token")
            #expect(code(try await plain.post("/api/appuser/deleteAccount", [("token", try await idToken(.google, email: pw, sub: "z"))], accessToken: pwAccess)) == 602)
        }
    }
}
