import CosyncAuth
import CosyncAuthHTTP
import Foundation
import HTTPTypes
import Testing

@Suite("OpenAPI document")
struct OpenAPITests {
    @Test("the document and the router list exactly the same routes")
    func documentMatchesRouter() async throws {
        let services = try await TestEnvironment.services()
        let router = buildRouter(services: services)
        let routes = Set(routeTable(router).map { "\($0.method) \($0.path)" }
            .filter { !$0.contains("/api/appuser/") }  // the end-user API has its own contract
            .filter { !OAuthProtocolRoutes.isProtocolRoute($0) }  // so has OAuth (<doc:OAuth>)
            .filter { !($0.split(separator: " ").last ?? "").hasPrefix("/portal") })  // the Portal's pages are HTML
        let documented = Set(openAPIOperations().map { "\($0.method) \($0.path)" })
        #expect(routes.subtracting(documented).isEmpty, "routes missing from the document: \(routes.subtracting(documented).sorted())")
        #expect(documented.subtracting(routes).isEmpty, "documented operations without a route: \(documented.subtracting(routes).sorted())")
        #expect(routes.count >= 25)
    }

    @Test("no request path matches two documented paths (a literal segment where another path has a parameter)")
    func unambiguousPaths() {
        let paths = Set(openAPIOperations().map(\.path)).sorted()
        func overlap(_ a: String, _ b: String) -> Bool {
            let x = a.split(separator: "/"), y = b.split(separator: "/")
            return x.count == y.count && zip(x, y).allSatisfy { $0 == $1 || $0.hasPrefix("{") || $1.hasPrefix("{") }
        }
        for (i, a) in paths.enumerated() {
            for b in paths[(i + 1)...] { #expect(!overlap(a, b), "\(a) and \(b) match the same requests") }
        }
        #expect(overlap("/u/{id}/x", "/u/revoke/x") && !overlap("/u/{id}", "/u/{id}/x"))
    }

    @Test("the document is served as OpenAPI 3.1 and every $ref resolves")
    func servedDocument() async throws {
        try await TestEnvironment.withAPI { api in
            let reply = try await api.call(.get, "/admin/v1/openapi.json", token: nil)
            #expect(reply.status == .ok)
            #expect(reply.object["openapi"] == .string("3.1.0"))
            let schemas = Set(reply.json["components"]?["schemas"]?.objectValue?.keys.map { $0 } ?? [])
            var refs: Set<String> = []
            func walk(_ value: JSONValue) {
                switch value {
                case .object(let o):
                    if let ref = o["$ref"]?.stringValue { refs.insert(String(ref.split(separator: "/").last ?? "")) }
                    o.values.forEach(walk)
                case .array(let a): a.forEach(walk)
                default: break
                }
            }
            walk(reply.json)
            #expect(!refs.isEmpty && refs.isSubset(of: schemas), "unresolved: \(refs.subtracting(schemas))")
            let paths = reply.json["paths"]?.objectValue ?? [:]
            #expect(Set(paths.keys) == Set(openAPIOperations().map(\.path)))
        }
    }
    @Test("every documented path answers an undeclared method with 405, an Allow header and the admin error shape")
    func undeclaredMethods() async throws {
        try await TestEnvironment.withLiveServer { api in
            let app = try await api.createApp("405 \(UUID().uuidString.prefix(8))")
            let appId = app.string("appId")
            var declared: [String: Set<String>] = [:]
            for operation in openAPIOperations() { declared[operation.path, default: []].insert(operation.method) }
            for (template, methods) in declared {
                let path = template.replacingOccurrences(of: "{appId}", with: appId)
                    .replacingOccurrences(of: "{userId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{id}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{sessionId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{identityId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{passkeyId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{webhookId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{clientId}", with: "cci_" + String(repeating: "A", count: 22))
                    .replacingOccurrences(of: "{keyId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{providerId}", with: UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{messageId}", with: "msg_" + UUID().uuidString.lowercased())
                    .replacingOccurrences(of: "{template}", with: "signUp").replacingOccurrences(of: "{locale}", with: "EN")
                for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "TRACE"] where !methods.contains(method) {
                    let reply = try await api.call(HTTPRequest.Method(method) ?? .get, path)
                    #expect(reply.status == .methodNotAllowed, "\(method) \(path): \(reply.status)")
                    let allow = Set((reply.headers[.allow] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                    #expect(allow == methods, "\(method) \(path): Allow \(reply.headers[.allow] ?? "-")")
                    #expect(reply.errorCode == "method_not_allowed", "\(method) \(path): \(reply.text)")
                }
            }
            // The end-user API keeps its own contract: no 405 there.
            let enduser = try await api.call(.get, "/api/appuser/login", token: nil)
            #expect(enduser.status != .methodNotAllowed)
        }
    }

    @Test("every authenticated operation declares 401 and 403, every operation with a path id 404, every body 400 and 422")
    func declaredStatuses() async throws {
        let paths = openAPIDocument()["paths"]?.objectValue ?? [:]
        var count = 0
        for (path, item) in paths {
            for (method, operation) in item.objectValue ?? [:] {
                count += 1
                let responses = Set(operation["responses"]?.objectValue?.keys.map { $0 } ?? [])
                let secured = operation["security"]?.arrayValue?.isEmpty == false
                if secured { #expect(responses.isSuperset(of: ["401", "403"]), "\(method) \(path): \(responses.sorted())") }
                if secured && path.contains("{") { #expect(responses.contains("404"), "\(method) \(path)") }
                if operation["requestBody"] != nil { #expect(responses.isSuperset(of: ["400", "422"]), "\(method) \(path)") }
                if secured, let body = operation["requestBody"]?["content"]?["application/json"]?["schema"]?["$ref"]?.stringValue {
                    let name = String(body.split(separator: "/").last ?? "")
                    let schema = openAPIDocument()["components"]?["schemas"]?[name]
                    #expect(schema?["additionalProperties"] == .bool(false), "\(name) must refuse unknown fields as the server does")
                }
            }
        }
        #expect(count == openAPIOperations().count)
    }

    @Test("the document's app input lists exactly the fields the server accepts")
    func appInputFields() {
        let properties = openAPIDocument()["components"]?["schemas"]?["AppInput"]?["properties"]?.objectValue ?? [:]
        #expect(Set(properties.keys) == Set(AppState.writableFields))
    }

    /// The document's pattern for an operation's `cursor` query parameter.
    static func cursorPattern(_ path: String) -> String {
        let parameters = openAPIDocument()["paths"]?[path]?["get"]?["parameters"]?.arrayValue ?? []
        return parameters.first { $0["name"] == .string("cursor") }?["schema"]?["pattern"]?.stringValue ?? ""
    }

    static func matches(_ text: String, _ pattern: String) -> Bool {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return false }
        return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    @Test("cursors: every nextCursor has the documented pattern, and any value of the pattern is a page")
    func cursorPatterns() async throws {
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Cursors \(UUID().uuidString.prefix(8))").string("appId")
            for name in ["ann", "bob", "cy"] {
                let r = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("\(name)+c@x.io"), "password": .string("pw")]))
                try #require(r.status == .created, "\(r.text)")
                let i = try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string("\(name)-inv@x.io")]))
                try #require(i.status == .created, "\(i.text)")
            }
            for list in ["users", "invites", "logs", "messages"] {
                let path = "/admin/v1/apps/{appId}/\(list)"
                let pattern = Self.cursorPattern(path)
                #expect(!pattern.isEmpty, "\(path) documents its cursor's form")
                var cursor: String? = nil
                var pages = 0
                repeat {
                    let reply = try await api.call(.get, "/admin/v1/apps/\(appId)/\(list)?limit=1" + (cursor.map { "&cursor=\($0)" } ?? ""))
                    try #require(reply.status == .ok, "\(list) \(cursor ?? "-"): \(reply.status) \(reply.text)")
                    cursor = reply.object["nextCursor"]?.stringValue
                    if let cursor { #expect(Self.matches(cursor, pattern), "\(list): issued \(cursor), documented \(pattern)") }
                    pages += 1
                } while cursor != nil && pages < 20
                #expect(pages >= 3, "\(list): \(pages) pages")
            }
            // Made-up values of the documented forms are positions, not errors.
            for (list, cursor) in [("users", "AAAA"), ("users", "_-_"), ("invites", "-5_00000000-0000-0000-0000-00000000000A"),
                                   ("signups", "123_0123abcd-0000-0000-0000-000000000000"), ("logs", "000000000000000001"), ("apps", "1")] {
                let path = list == "apps" ? "/admin/v1/apps" : "/admin/v1/apps/{appId}/\(list)"
                #expect(Self.matches(cursor, Self.cursorPattern(path)), "\(list) \(cursor)")
                let reply = try await api.call(.get, path.replacingOccurrences(of: "{appId}", with: appId) + "?cursor=\(cursor)")
                #expect(reply.status == .ok, "\(list) \(cursor): \(reply.status) \(reply.text)")
            }
        }
    }

    @Test("a rule of the app's stored settings is a documented 409, not a 422; a template without subject takes the built-in one")
    func storedStateRules() async throws {
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("State \(UUID().uuidString.prefix(8))", settings: [
                "passwordFilter": .bool(true), "passwordMinLength": .int(10), "metaDataInvite": .array([
                    .object(["path": .string("team"), "fieldName": .string("team"), "required": .bool(true)]),
                ]),
            ]).string("appId")
            let locale = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object([
                "handle": .string("l@x.io"), "password": .string("long enough pw"), "locale": .string("fr"),
            ]))
            #expect(locale.status == .conflict && locale.errorField == "locale", "\(locale.status) \(locale.text)")
            let malformed = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object([
                "handle": .string("l@x.io"), "password": .string("long enough pw"), "locale": .string("fra"),
            ]))
            #expect(malformed.status == .unprocessableContent && malformed.errorField == "locale", "\(malformed.status) \(malformed.text)")
            let policy = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object(["handle": .string("p@x.io"), "password": .string("short")]))
            #expect(policy.status == .conflict && policy.errorCode == "password_policy", "\(policy.status) \(policy.text)")
            let invite = try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object(["handle": .string("i@x.io"), "metaData": .object([:])]))
            #expect(invite.status == .conflict && invite.errorField == "metaData", "\(invite.status) \(invite.text)")
            let inviteLocale = try await api.call(.post, "/admin/v1/apps/\(appId)/invites", json: .object([
                "handle": .string("i@x.io"), "locale": .string("DE"), "metaData": .object(["team": .string("a")]),
            ]))
            #expect(inviteLocale.status == .conflict && inviteLocale.errorField == "locale", "\(inviteLocale.status) \(inviteLocale.text)")
            for status in ["409", "422"] {
                for path in ["/admin/v1/apps/{appId}/users", "/admin/v1/apps/{appId}/invites"] {
                    #expect(openAPIDocument()["paths"]?[path]?["post"]?["responses"]?[status] != nil, "\(path) documents \(status)")
                }
            }
            let template = try await api.call(.put, "/admin/v1/apps/\(appId)/email-templates/signUp/EN", json: .object(["html": .string("<p>%CODE%</p>")]))
            #expect(template.status == .ok && template.object["subject"] == .string(EmailTemplate.builtIn("signUp")?.subject ?? "?"), "\(template.text)")
            let sms = try await api.call(.put, "/admin/v1/apps/\(appId)/email-templates/sms/EN", json: .object(["html": .string("%CODE%")]))
            #expect(sms.status == .ok && sms.object["subject"] == .string(""), "\(sms.text)")
        }
    }

    @Test("links lead from each list of a user's sessions, identities and passkeys to the item's own route")
    func itemLinks() {
        let paths = openAPIDocument()["paths"]?.objectValue ?? [:]
        for (kind, id) in [("sessions", "sessionId"), ("identities", "identityId"), ("passkeys", "passkeyId")] {
            let list = paths["/admin/v1/apps/{appId}/users/{userId}/\(kind)"]?["get"]?["responses"]?["200"]?["links"]?.objectValue ?? [:]
            let target = "delete_admin_v1_apps_by_appId_users_by_userId_\(kind)_by_\(id)"
            #expect(list[target]?["parameters"]?[id] == .string("$response.body#/\(kind)/0/\(id)"), "\(kind): \(list.keys.sorted())")
        }
        let attempts = paths["/admin/v1/apps/{appId}/webhooks/{webhookId}/attempts"]?["get"]?["responses"]?["200"]?["links"]?.objectValue ?? [:]
        #expect(attempts.values.contains { $0["parameters"]?["messageId"] == .string("$response.body#/attempts/0/messageId") })
    }
}
