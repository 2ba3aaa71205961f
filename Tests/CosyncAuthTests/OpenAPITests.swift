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
            .filter { !$0.contains("/api/appuser/") })  // the end-user API has its own contract
        let documented = Set(openAPIOperations().map { "\($0.method) \($0.path)" })
        #expect(routes.subtracting(documented).isEmpty, "routes missing from the document: \(routes.subtracting(documented).sorted())")
        #expect(documented.subtracting(routes).isEmpty, "documented operations without a route: \(documented.subtracting(routes).sorted())")
        #expect(routes.count >= 25)
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
}
