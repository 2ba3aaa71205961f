import CosyncAuth
import Foundation
import HTTPTypes
import Testing

/// Hostile input at the edge of the end-user API (what Tests/system/fuzz/enduser.py found): a NUL in a field
/// name or value, bodies over the 1 MiB limit, handles longer than any account's. Each must get a
/// clean 4xx answer, never `{"code":500,"message":"internal server error"}`.
@Suite("Hardening: end-user edge")
struct HardeningEdgeTests {
    static let invalidData = #"{"code":602,"message":"invalid data"}"#

    /// An app (flow none, user names on) with one signed-up user: (sdk, access token, handle).
    func makeUser(_ api: API) async throws -> (SDK, String, String) {
        let created = try await api.createApp(
            "Edge \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))",
            settings: [
                "signupFlow": .string("none"), "userNamesEnabled": .bool(true),
                "metaData": .array([.object(["path": .string("user.name"), "fieldName": .string("name"), "canEdit": .bool(true)])]),
            ])
        let sdk = SDK(api: api, appToken: created.string("appToken"))
        let handle = "edge+\(Secrets.hexIdentifier().prefix(8))@example.com"
        let signup = try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("Secret1!"))])
        try #require(signup.status == .ok, "signup: \(signup.text)")
        return (sdk, signup.object.string("access-token"), handle)
    }

    func postJSON(_ sdk: SDK, _ path: String, _ body: String, appToken: String? = nil, accessToken: String? = nil) async throws -> API.Reply {
        var headers: HTTPFields = [:]
        if let appToken { headers[HTTPField.Name("app-token")!] = appToken }
        if let accessToken { headers[HTTPField.Name("access-token")!] = accessToken }
        return try await sdk.api.call(.post, path, token: nil, body: body, headers: headers, contentType: "application/json")
    }

    @Test("a NUL in a form value (raw or %00) is refused with 400 E602, not a database error")
    func nulInFormValue() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, accessToken, handle) = try await makeUser(api)
            for value in ["a\u{0}b@example.com", "a%00b@example.com", SDK.handle(handle) + "%00"] {
                let login = try await sdk.post("/api/appuser/login", [("handle", value), ("password", SDK.md5("Secret1!"))])
                #expect(login.status == .badRequest && login.text == Self.invalidData, "login \(value): \(login.status) \(login.text)")
                let signup = try await sdk.post("/api/appuser/signup", [("handle", value), ("password", SDK.md5("Secret1!"))])
                #expect(signup.status == .badRequest && signup.text == Self.invalidData, "signup \(value): \(signup.text)")
            }
            let locale = try await sdk.post("/api/appuser/setLocale", [("locale", "E\u{0}N")], accessToken: accessToken)
            #expect(locale.status == .badRequest && locale.text == Self.invalidData, "\(locale.text)")
            // A NUL in a field name too.
            let key = try await sdk.post("/api/appuser/login", [("handle\u{0}", "x"), ("handle", SDK.handle(handle)), ("password", SDK.md5("Secret1!"))])
            #expect(key.text == Self.invalidData, "\(key.text)")
            // The account is untouched: a normal login still works.
            let again = try await sdk.login(handle, "Secret1!")
            #expect(again.status == .ok && again.object["access-token"] != nil, "\(again.text)")
        }
    }

    @Test("a NUL in a JSON value or a JSON key is refused with 400 E602")
    func nulInJSON() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, accessToken, handle) = try await makeUser(api)
            let password = SDK.md5("Secret1!")
            let value = try await postJSON(
                sdk, "/api/appuser/login", #"{"handle":"\#(handle)\u0000","password":"\#(password)"}"#, appToken: sdk.appToken)
            #expect(value.status == .badRequest && value.text == Self.invalidData, "\(value.status) \(value.text)")
            let key = try await postJSON(
                sdk, "/api/appuser/login", #"{"handle":"\#(handle)","password":"\#(password)","x\u0000":"1"}"#, appToken: sdk.appToken)
            #expect(key.status == .badRequest && key.text == Self.invalidData, "\(key.status) \(key.text)")
            let nested = try await postJSON(
                sdk, "/api/appuser/setUserMetadata", #"{"metaData":{"user":{"name":"a\u0000"}}}"#, accessToken: accessToken)
            #expect(nested.status == .badRequest && nested.text == Self.invalidData, "\(nested.status) \(nested.text)")
            // metaData is JSON inside a field: an escaped NUL in it is refused too (jsonb cannot hold it),
            // E602 from setUserMetadata and E604 from signup, as for any metaData that does not parse.
            let escaped = try await sdk.post("/api/appuser/setUserMetadata", [("metaData", #"{"user":{"name":"a\u0000"}}"#)], accessToken: accessToken)
            #expect(escaped.status == .badRequest && escaped.text == Self.invalidData, "\(escaped.text)")
            let signup = try await sdk.post("/api/appuser/signup", [
                ("handle", "n\(Secrets.hexIdentifier().prefix(6))@example.com"), ("password", password), ("metaData", #"{"user":{"name":"\u0000"}}"#),
            ])
            #expect(signup.status == .badRequest && signup.object["code"] == .int(604), "\(signup.text)")
            // The same bodies without the NUL are accepted (the rule is about the NUL, not JSON).
            let clean = try await postJSON(sdk, "/api/appuser/login", #"{"handle":"\#(handle)","password":"\#(password)"}"#, appToken: sdk.appToken)
            #expect(clean.status == .ok, "\(clean.text)")
            let metadata = try await postJSON(sdk, "/api/appuser/setUserMetadata", #"{"metaData":{"user":{"name":"Ann"}}}"#, accessToken: accessToken)
            #expect(metadata.status == .ok && metadata.text == "true", "\(metadata.text)")
        }
    }

    @Test("the credential is still checked first (§2.2): NUL with a bad app-token is E400, with a bad access-token E405")
    func nulAfterCredential() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _, _) = try await makeUser(api)
            let forged = SDK(api: api, appToken: "not-an-app-token")
            let app = try await forged.post("/api/appuser/login", [("handle", "a\u{0}@example.com"), ("password", SDK.md5("x"))])
            #expect(app.status == .badRequest && app.object["code"] == .int(400), "\(app.text)")
            let user = try await sdk.post("/api/appuser/setLocale", [("locale", "\u{0}")], accessToken: "a.b.c")
            #expect(user.status == .badRequest && user.object["code"] == .int(405), "\(user.text)")
        }
    }

    @Test("a NUL in the query of userNameAvailable or of the e-mailed completeSignup link is E602")
    func nulInQuery() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, accessToken, _) = try await makeUser(api)
            let name = try await sdk.get("/api/appuser/userNameAvailable?userName=ab%00c", accessToken: accessToken)
            #expect(name.status == .badRequest && name.text == Self.invalidData, "\(name.status) \(name.text)")
            let link = try await api.call(
                .get, "/api/appuser/completeSignup?appToken=\(sdk.appToken)&handle=a%00@example.com&code=123456", token: nil)
            #expect(link.status == .badRequest && link.text.contains("code 602"), "\(link.status) \(link.text)")
        }
    }

    @Test("a body over 1 MiB is 413 with a legacy error body; a handle longer than any account's is E600")
    func oversizedInput() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (sdk, _, _) = try await makeUser(api)
            let huge = try await sdk.post("/api/appuser/login", [("handle", String(repeating: "a", count: 1_048_577)), ("password", "x")])
            #expect(huge.status == .contentTooLarge && huge.object["code"] == .int(602), "\(huge.status) \(huge.text.prefix(200))")
            let long = try await sdk.post("/api/appuser/login", [("handle", String(repeating: "h", count: 10_000) + "@x.com"), ("password", SDK.md5("x"))])
            #expect(long.status == .badRequest && long.object["code"] == .int(600), "\(long.status) \(long.text)")
        }
    }
}
