import CosyncAuth
import Foundation
import PostgresNIO
import Testing

@Suite("Admin API: apps")
struct AdminAppTests {
    @Test("deleting an app while one of its users is being written: both finish, no deadlock")
    func deleteAppRacingUserWrite() async throws {
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Delete race \(UUID().uuidString.prefix(6))", settings: ["signupFlow": .string("none")])
            let appId = created.string("appId")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = "race\(Secrets.hexIdentifier().prefix(8))@example.com"
            #expect(try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))]).status == .ok)
            let userId = try #require(try await TestEnvironment.value("SELECT id FROM users WHERE handle = \(handle)", as: UUID.self))
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
            // A user write as the flows run it: the user row first, then (for its audit or event row's
            // foreign key) a key-share lock on the app row. Deleting the app row first and reaching
            // the user through the cascade closed a cycle with it (40P01).
            let write = try await TestEnvironment.holding(
                "UPDATE users SET updated_at = now() WHERE id = \(userId)", for: .milliseconds(1000),
                then: ["SELECT 1 FROM apps WHERE id = \(ref) FOR KEY SHARE"])
            let deleted = try await api.call(.delete, "/admin/v1/apps/\(appId)")
            try await write.value
            #expect(deleted.status == .noContent, "\(deleted.status) \(deleted.text)")
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM users WHERE id = \(userId)", as: Int.self) == 0)
        }
    }

    @Test("create returns the credentials once; GET returns the app without secrets")
    func createAndRead() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Create And Read")
            let appId = created.string("appId")
            #expect(appId.count == 32 && appId.allSatisfy { "0123456789abcdef".contains($0) })
            #expect(created.string("appSecret").hasPrefix("cas_"))
            #expect(!created.string("appToken").isEmpty)
            let pem = String(decoding: Data(base64Encoded: created.string("rawPublicKey")) ?? Data(), as: UTF8.self)
            #expect(pem.hasPrefix("-----BEGIN PUBLIC KEY-----\n") && pem.hasSuffix("-----END PUBLIC KEY-----"))
            #expect(created["signupFlow"] == .string("code"))
            #expect(created["locales"] == .array([.string("EN")]))
            #expect(created["passwordMinLength"] == .int(5))
            #expect(created["userJWTExpiration"] == .int(24))
            #expect(created["maxLoginAttempts"] == .int(10))

            let read = try await api.call(.get, "/admin/v1/apps/\(appId)")
            #expect(read.status == .ok)
            #expect(read.object.string("appToken") == created.string("appToken"))
            #expect(read.object.string("rawPublicKey") == created.string("rawPublicKey"))
            #expect(read.object["appSecret"] == nil)
            #expect(!read.text.contains(created.string("appSecret")))
            #expect(!read.text.contains("PRIVATE KEY"))
        }
    }

    @Test("PATCH changes settings; the change is visible to GET and to getApplication")
    func patchSettings() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Patch Me", settings: ["signupFlow": .string("none")])
            let appId = created.string("appId")
            let patched = try await api.call(
                .patch, "/admin/v1/apps/\(appId)",
                json: .object(["signupFlow": .string("code"), "locales": .array([.string("FR"), .string("EN")]),
                               "metaData": .array([.object(["path": .string("user.firstName"), "fieldName": .string("firstName"),
                                                            "required": .bool(true)])])]))
            #expect(patched.status == .ok, "\(patched.text)")
            #expect(patched.object["signupFlow"] == .string("code"))
            #expect(patched.object["locales"] == .array([.string("EN"), .string("FR")]), "EN is kept first")
            let read = try await api.call(.get, "/admin/v1/apps/\(appId)")
            #expect(read.object["signupFlow"] == .string("code"))
            let endUser = try await api.call(
                .get, "/api/appuser/getApplication", token: nil, headers: [.init("app-token")!: created.string("appToken")])
            #expect(endUser.status == .ok)
            #expect(endUser.object["signupFlow"] == .string("code"))
            #expect(endUser.object["userNamesEnabled"] == .bool(false))
        }
    }

    @Test("bad input gets a clear 4xx naming the field, and changes nothing", arguments: [
        ("{\"signupFlow\": ", 400, "malformed_json", nil),
        ("[1,2]", 400, "invalid_body", nil),
        ("{\"signupEnabled\": \"yes\"}", 422, "invalid_type", "signupEnabled"),
        ("{\"passwordMinLength\": \"5\"}", 422, "invalid_type", "passwordMinLength"),
        ("{\"colour\": \"blue\"}", 422, "unknown_field", "colour"),
        ("{\"name\": \"\(String(repeating: "x", count: 101))\"}", 422, "too_long", "name"),
        ("{\"locales\": [\"EN\", \"XX\"]}", 422, "invalid_value", "locales[1]"),
        ("{\"locales\": [\"en\"]}", 422, "invalid_value", "locales[0]"),
        ("{\"signupFlow\": \"sms\"}", 422, "invalid_value", "signupFlow"),
        ("{\"passwordMinLength\": -1}", 422, "out_of_range", "passwordMinLength"),
        ("{\"twoFactorVerification\": \"google\", \"passwordMinLength\": -1}", 422, "out_of_range", "passwordMinLength"),
        ("{\"metaData\": [{\"path\": \"sub\", \"fieldName\": \"x\"}]}", 422, "invalid_value", "metaData[0].path"),
        ("{\"metaData\": [{\"path\": \"a.b\", \"fieldName\": \"x\", \"colour\": 1}]}", 422, "unknown_field", "metaData[0].colour"),
        ("{\"TWILIOAccountSid\": \"nope\"}", 422, "invalid_value", "TWILIOAccountSid"),
    ] as [(String, Int, String, String?)])
    func badInput(body: String, status: Int, code: String, field: String?) async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Bad Input")
            let appId = created.string("appId")
            let before = try await api.call(.get, "/admin/v1/apps/\(appId)")
            let reply = try await api.call(.patch, "/admin/v1/apps/\(appId)", body: body)
            #expect(reply.status.code == status, "\(reply.text)")
            #expect(reply.errorCode == code)
            #expect(reply.errorField == field)
            let after = try await api.call(.get, "/admin/v1/apps/\(appId)")
            #expect(after.text == before.text, "a rejected patch must change nothing")
        }
    }

    @Test("create rejects bad input and creates nothing")
    func createRejects() async throws {
        try await TestEnvironment.withAPI { api in
            let name = "Rejected-\(Secrets.hexIdentifier())"
            for body in ["{}", "{\"name\": \"\(name)\", \"signupFlow\": \"x\"}", "{\"name\": 5}", "not json"] {
                let reply = try await api.call(.post, "/admin/v1/apps", body: body)
                #expect([400, 422].contains(reply.status.code), "\(body): \(reply.text)")
            }
            let list = try await api.call(.get, "/admin/v1/apps?query=\(name)")
            #expect(list.object["apps"] == .array([]))
        }
    }

    @Test("an app secret reaches only its own app")
    func appSecretScope() async throws {
        try await TestEnvironment.withAPI { api in
            let mine = try await api.createApp("Mine")
            let other = try await api.createApp("Other")
            let secret = mine.string("appSecret")
            #expect(try await api.call(.get, "/admin/v1/apps/\(mine.string("appId"))", token: secret).status == .ok)
            let patch = try await api.call(.patch, "/admin/v1/apps/\(mine.string("appId"))", token: secret, json: .object(["signupFlow": .string("link")]))
            #expect(patch.status == .ok)
            #expect(patch.object["signupFlow"] == .string("link"))
            #expect(try await api.call(.get, "/admin/v1/apps/\(other.string("appId"))", token: secret).status == .forbidden)
            #expect(try await api.call(.patch, "/admin/v1/apps/\(other.string("appId"))", token: secret, json: .object(["signupFlow": .string("none")])).status == .forbidden)
            #expect(try await api.call(.get, "/admin/v1/apps", token: secret).status == .forbidden)
            #expect(try await api.call(.post, "/admin/v1/apps", token: secret, json: .object(["name": .string("x")])).status == .forbidden)
            #expect(try await api.call(.get, "/admin/v1/apps/\(other.string("appId"))/users", token: secret).status == .forbidden)
            // Only the operator may change status.
            #expect(try await api.call(.patch, "/admin/v1/apps/\(mine.string("appId"))", token: secret, json: .object(["status": .string("active")])).status == .forbidden)
            #expect(try await api.call(.get, "/admin/v1/apps/\(mine.string("appId"))", token: nil).status == .unauthorized)
            #expect(try await api.call(.get, "/admin/v1/apps/\(mine.string("appId"))", token: "cas_unknown").status == .unauthorized)
            #expect(try await api.call(.get, "/admin/v1/apps", token: "wrong").status == .unauthorized)
        }
    }

    @Test("rotating the app token ends the old one (at once, or after a grace period)")
    func rotateToken() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Rotate Token")
            let appId = created.string("appId")
            let old = created.string("appToken")
            func getApplication(_ token: String) async throws -> API.Reply {
                try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: [.init("app-token")!: token])
            }
            #expect(try await getApplication(old).status == .ok)
            let rotated = try await api.call(.post, "/admin/v1/apps/\(appId)/app-token/rotate")
            #expect(rotated.status == .ok)
            let new = rotated.object.string("appToken")
            #expect(new != old)
            let refused = try await getApplication(old)
            #expect(refused.status == .badRequest)
            #expect(refused.text == #"{"code":400,"message":"invalid app token"}"#)
            #expect(try await getApplication(new).status == .ok)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)").object.string("appToken") == new)

            let graced = try await api.call(.post, "/admin/v1/apps/\(appId)/app-token/rotate", json: .object(["gracePeriodSeconds": .int(3600)]))
            #expect(graced.object["previousTokenExpiresAt"]?.stringValue != nil)
            #expect(try await getApplication(new).status == .ok, "old token still works during its grace period")
            #expect(try await getApplication(graced.object.string("appToken")).status == .ok)
            #expect(try await api.call(.post, "/admin/v1/apps/\(appId)/app-token/rotate", json: .object(["gracePeriodSeconds": .int(-1)])).status.code == 422)
        }
    }

    @Test("rotating the app secret ends the old one")
    func rotateSecret() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Rotate Secret")
            let appId = created.string("appId")
            let rotated = try await api.call(.post, "/admin/v1/apps/\(appId)/app-secret/rotate", token: created.string("appSecret"))
            #expect(rotated.status == .ok)
            let new = rotated.object.string("appSecret")
            #expect(new.hasPrefix("cas_") && new != created.string("appSecret"))
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)", token: created.string("appSecret")).status == .unauthorized)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)", token: new).status == .ok)
        }
    }

    @Test("key rotation: new signing key, the old public key stays in the JWKS until retired")
    func rotateKeys() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Rotate Keys")
            let appId = created.string("appId")
            let jwks1 = try await api.call(.get, "/apps/\(appId)/.well-known/jwks.json", token: nil)
            #expect(jwks1.status == .ok)
            let keys1 = jwks1.object["keys"]?.arrayValue ?? []
            #expect(keys1.count == 1)
            #expect(keys1.first?["kty"] == .string("RSA") && keys1.first?["alg"] == .string("RS256"))
            #expect(keys1.first?["e"] == .string("AQAB"))

            let rotated = try await api.call(.post, "/admin/v1/apps/\(appId)/keys/rotate")
            #expect(rotated.status == .ok, "\(rotated.text)")
            #expect(rotated.object.string("rawPublicKey") != created.string("rawPublicKey"))
            let keys2 = try await api.call(.get, "/apps/\(appId)/.well-known/jwks.json", token: nil).object["keys"]?.arrayValue ?? []
            #expect(keys2.count == 2)
            let kids2 = Set(keys2.compactMap { $0["kid"]?.stringValue })
            let kids1 = Set(keys1.compactMap { $0["kid"]?.stringValue })
            #expect(kids2.isSuperset(of: kids1))

            // Retiring at once drops the old keys from the JWKS.
            _ = try await api.call(.post, "/admin/v1/apps/\(appId)/keys/rotate", json: .object(["retireAfterHours": .int(0)]))
            let keys3 = try await api.call(.get, "/apps/\(appId)/.well-known/jwks.json", token: nil).object["keys"]?.arrayValue ?? []
            #expect(keys3.count == 1)
            #expect(try await api.call(.get, "/apps/\(Secrets.hexIdentifier())/.well-known/jwks.json", token: nil).status == .notFound)
        }
    }

    @Test("listing is newest first and keyset-paginated")
    func listPagination() async throws {
        try await TestEnvironment.withAPI { api in
            let prefix = "Page-\(Secrets.hexIdentifier().prefix(8))"
            var ids: [String] = []
            for i in 0..<5 { ids.append(try await api.createApp("\(prefix)-\(i)").string("appId")) }
            var seen: [String] = []
            var cursor: String? = nil
            var pages = 0
            repeat {
                let path = "/admin/v1/apps?query=\(prefix)&limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await api.call(.get, path)
                #expect(page.status == .ok)
                seen += (page.object["apps"]?.arrayValue ?? []).compactMap { $0["appId"]?.stringValue }
                cursor = page.object["nextCursor"]?.stringValue
                pages += 1
            } while cursor != nil && pages < 10
            #expect(seen == ids.reversed())
            #expect(pages == 3)
            #expect(try await api.call(.get, "/admin/v1/apps?cursor=garbage").status == .badRequest)
            #expect(try await api.call(.get, "/admin/v1/apps?limit=0").status == .badRequest)
        }
    }

    @Test("deleting an app removes everything it owns")
    func deleteCascades() async throws {
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Delete Me")
            let appId = created.string("appId")
            let user = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("a@b.co"), "password": .string("secret")]))
            #expect(user.status == .created)
            let services = try await TestEnvironment.services()
            let ref = try await services.apps.row(appId: appId).ref
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)").status == .noContent)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)").status == .notFound)
            #expect(try await api.call(.delete, "/admin/v1/apps/\(appId)").status == .notFound)
            for table in ["app_tokens", "app_keys", "users", "audit_log"] {
                let rows = try await services.client.query("SELECT count(*) FROM \(unescaped: table) WHERE app_ref = \(ref)", logger: services.logger)
                for try await count in rows.decode(Int.self) { #expect(count == 0, "\(table) still has rows") }
            }
            let tokenWorks = try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: [.init("app-token")!: created.string("appToken")])
            #expect(tokenWorks.status == .badRequest)
        }
    }

    @Test("secrets never leave the server and are encrypted in the database")
    func secretsAtRest() async throws {
        try await TestEnvironment.withAPI { api in
            let sid = "AC" + String(repeating: "0123456789abcdef", count: 2)
            let twilioToken = "tok" + Secrets.hexIdentifier()
            let sendgrid = "SG.secret-" + Secrets.hexIdentifier()
            let created = try await api.createApp("Secrets", settings: ["TWILIOAccountSid": .string(sid), "TWILIOToken": .string(twilioToken)])
            let appId = created.string("appId")
            let patched = try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["emailExtensionAPIKey": .string(sendgrid)]))
            #expect(patched.status == .ok)
            for reply in [patched, try await api.call(.get, "/admin/v1/apps/\(appId)"), try await api.call(.get, "/admin/v1/apps?query=Secrets")] {
                #expect(!reply.text.contains(twilioToken) && !reply.text.contains(sendgrid) && !reply.text.contains(sid))
                #expect(!reply.text.contains(created.string("appSecret")))
            }
            let presence = try await api.call(.get, "/admin/v1/apps/\(appId)").object["credentials"]
            #expect(presence?["TWILIOToken"] == .bool(true) && presence?["emailExtensionAPIKey"] == .bool(true))
            #expect(presence?["TWILIOPhoneNumber"] == .bool(false))
            let getApplication = try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: [.init("app-token")!: created.string("appToken")])
            #expect(!getApplication.text.contains(sendgrid) && !getApplication.text.contains("emailExtensionAPIKey"))

            // The raw rows: no plaintext private key, credential, app secret or app token.
            let services = try await TestEnvironment.services()
            let rows = try await services.client.query(
                """
                SELECT a::text, k::text, t::text FROM apps a JOIN app_keys k ON k.app_ref = a.id JOIN app_tokens t ON t.app_ref = a.id
                WHERE a.app_id = \(appId)
                """, logger: services.logger)
            var checked = 0
            for try await (app, key, token) in rows.decode((String, String, String).self) {
                let raw = app + key + token
                for secret in [twilioToken, sendgrid, sid, created.string("appSecret"), created.string("appToken"), "PRIVATE KEY"] {
                    #expect(!raw.contains(secret), "raw row holds a secret in plaintext")
                    #expect(!raw.contains(Hex.encode(Data(secret.utf8))), "raw bytea holds a secret in plaintext")
                }
                checked += 1
            }
            #expect(checked == 1)
            // Clearing a credential with null.
            let cleared = try await api.call(.patch, "/admin/v1/apps/\(appId)", json: .object(["TWILIOToken": .null]))
            #expect(cleared.object["credentials"]?["TWILIOToken"] == .bool(false))
        }
    }

    @Test("health, readiness and the public getApplication shape")
    func operational() async throws {
        try await TestEnvironment.withAPI { api in
            #expect(try await api.call(.get, "/healthz", token: nil).status == .ok)
            let ready = try await api.call(.get, "/readyz", token: nil)
            #expect(ready.status == .ok && ready.object["status"] == .string("ready"))
            // Metrics have a listener of their own (MetricsListenerTests): not on the public router.
            #expect(try await api.call(.get, "/metrics", token: nil).status == .notFound)
            let noToken = try await api.call(.get, "/api/appuser/getApplication", token: nil)
            #expect(noToken.text == #"{"code":602,"message":"invalid data"}"#)
            let badToken = try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: [.init("app-token")!: "nope"])
            #expect(badToken.status == .badRequest && badToken.object["code"] == .int(400))
        }
    }
}
