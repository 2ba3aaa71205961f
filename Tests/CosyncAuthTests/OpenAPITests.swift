import CosyncAuth
import CosyncAuthHTTP
import Foundation
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
}
