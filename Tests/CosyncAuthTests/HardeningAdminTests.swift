import CosyncAuth
import CosyncAuthHTTP
import Foundation
import HTTPTypes
import Testing

/// Hostile input on the admin API (what Tests/system/fuzz/admin.sh checks with schemathesis): a NUL in a
/// JSON body or a query parameter is refused before any SQL, and an undeclared method is a 405.
@Suite("Admin API hardening")
struct HardeningAdminTests {
    @Test("a NUL in an admin JSON value or key is refused with 422 naming the field, and nothing is stored")
    func nulInJSONBody() async throws {
        try await TestEnvironment.withAPI { api in
            let app = try await api.createApp("NUL \(UUID().uuidString.prefix(8))")
            let appId = app.string("appId")
            let cases: [(String, String, String, String)] = [
                ("POST", "/admin/v1/apps", #"{"name":"a\u0000b"}"#, "name"),
                ("PATCH", "/admin/v1/apps/\(appId)", #"{"appData":{"k":["x","y\u0000"]}}"#, "appData.k[1]"),
                ("PATCH", "/admin/v1/apps/\(appId)", #"{"appData":{"a\u0000b":1}}"#, "appData.a\\u0000b"),
                ("POST", "/admin/v1/apps/\(appId)/users", #"{"handle":"nul@example.com","password":"secret\u0000x"}"#, "password"),
                ("POST", "/admin/v1/apps/\(appId)/users", #"{"handle":"nul2@example.com","password":"secret1","metaData":{"n":"\u0000"}}"#, "metaData.n"),
                ("POST", "/admin/v1/apps/\(appId)/invites", #"{"handle":"inv\u0000@example.com"}"#, "handle"),
                ("PUT", "/admin/v1/apps/\(appId)/email-templates/signUp/EN", #"{"subject":"s","html":"<p>\u0000</p>"}"#, "html"),
            ]
            for (method, path, body, field) in cases {
                let reply = try await api.call(HTTPRequest.Method(method) ?? .post, path, body: body)
                #expect(reply.status == .unprocessableContent, "\(method) \(path): \(reply.status) \(reply.text)")
                #expect(reply.errorCode == "invalid_character", "\(method) \(path): \(reply.text)")
                #expect(reply.errorField == field, "\(method) \(path): \(reply.text)")
            }
            let users = try await api.call(.get, "/admin/v1/apps/\(appId)/users")
            #expect(users.json["users"]?.arrayValue?.isEmpty == true, "\(users.text)")
            let view = try await api.call(.get, "/admin/v1/apps/\(appId)")
            #expect(view.json["appData"] == .object([:]))
        }
    }

    @Test("a NUL in a query parameter of a list route is a 400 invalid_parameter, not a database error")
    func nulInQuery() async throws {
        try await TestEnvironment.withAPI { api in
            let app = try await api.createApp("NUL query \(UUID().uuidString.prefix(8))")
            let appId = app.string("appId")
            for path in ["/admin/v1/apps?query=a%00b", "/admin/v1/apps/\(appId)/users?query=%00",
                         "/admin/v1/apps/\(appId)/messages?to=x%00@example.com"] {
                let reply = try await api.call(.get, path)
                #expect(reply.status == .badRequest, "\(path): \(reply.status) \(reply.text)")
                #expect(reply.errorCode == "invalid_parameter", "\(path): \(reply.text)")
            }
        }
    }

    @Test("length limits count code points, as the OpenAPI document's maxLength does")
    func lengthsInCodePoints() async throws {
        try await TestEnvironment.withAPI { api in
            // 100 "e" + U+0301 pairs: 100 characters but 200 code points.
            let combining = String(repeating: "e\u{301}", count: 100)
            let reply = try await api.call(.post, "/admin/v1/apps", json: .object(["name": .string(combining)]))
            #expect(reply.status == .unprocessableContent, "\(reply.text)")
            #expect(reply.errorField == "name")
            let padded = " " + String(repeating: "n", count: 100)
            let second = try await api.call(.post, "/admin/v1/apps", json: .object(["name": .string(padded)]))
            #expect(second.status == .unprocessableContent, "\(second.text)")

            // A handle of 200 characters but 400 code points passes a character count and then fails
            // the column's CHECK (254 code points): refused up front on every path, never a 500.
            let created = try await api.createApp("Combining \(UUID().uuidString.prefix(8))", settings: ["signupFlow": .string("none"), "anonymousLoginEnabled": .bool(true)])
            let appId = created.string("appId")
            let handle = String(repeating: "e\u{301}", count: 200) + "@example.com"
            let admin = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string(handle), "password": .string("pw")]))
            #expect(admin.status == .unprocessableContent && admin.errorField == "handle", "\(admin.status) \(admin.text)")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let signup = try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))])
            #expect(signup.status == .badRequest && signup.object["code"]?.intValue == 602, "\(signup.status) \(signup.text)")
            // Within 254 code points it is still a handle.
            let longest = String(repeating: "e\u{301}", count: 121) + "@x.io"
            #expect(longest.unicodeScalars.count == 247)
            #expect(try await sdk.post("/api/appuser/signup", [("handle", longest), ("password", SDK.md5("pw"))]).status == .ok)
            // One letter carrying many marks is one character: an anonymous handle of 306 code points
            // failed the column's CHECK, a login handle of 20,006 overflowed the throttle key's index.
            let marks = String(repeating: "\u{301}", count: 300)
            let anonymous = try await sdk.post("/api/appuser/loginAnonymous", [("handle", "ANON_e" + marks)])
            #expect(anonymous.status == .badRequest && anonymous.object["code"]?.intValue == 600, "\(anonymous.status) \(anonymous.text)")
            // Random marks, so that PostgreSQL cannot compress the key under its index's 8 kB.
            var scalars = String.UnicodeScalarView()
            for _ in 0..<20_000 { scalars.append(Unicode.Scalar(UInt32.random(in: 0x300...0x36F)) ?? "\u{301}") }
            let heavy = "a" + String(scalars) + "@x.io"
            let login = try await sdk.post("/api/appuser/login", [("handle", heavy), ("password", SDK.md5("pw"))])
            #expect(login.status == .badRequest && login.object["code"]?.intValue == 600, "\(login.status) \(login.text)")
        }
    }
}
