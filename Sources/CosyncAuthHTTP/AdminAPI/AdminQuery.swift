import Hummingbird

/// Query-string parameters of admin list routes.
struct AdminQuery {
    let request: Request

    func limit(default value: Int = 50, max: Int = 200) throws -> Int {
        guard let raw = request.uri.queryParameters["limit"] else { return value }
        guard let limit = Int(raw), (1...max).contains(limit) else {
            throw AdminError(status: .badRequest, code: "invalid_parameter", message: "limit must be a number from 1 to \(max)", field: "limit")
        }
        return limit
    }

    func string(_ name: String, maxLength: Int = 200) throws -> String? {
        guard let raw = request.uri.queryParameters[Substring(name)] else { return nil }
        let value = String(raw)
        // Code points, as the OpenAPI document's maxLength counts them.
        guard value.unicodeScalars.count <= maxLength else {
            throw AdminError(status: .badRequest, code: "invalid_parameter", message: "\(name) is too long", field: name)
        }
        guard !value.unicodeScalars.contains("\u{0}") else {
            throw AdminError(status: .badRequest, code: "invalid_parameter", message: "\(name) must not contain the NUL character", field: name)
        }
        return value.isEmpty ? nil : value
    }

    var cursor: String? { request.uri.queryParameters["cursor"].map(String.init).flatMap { $0.isEmpty ? nil : $0 } }
}

extension RequestContext {
    func appIdParameter() throws -> String { try pathParameter("appId", naming: "app") }

    /// A path parameter of the route; missing, the answer is 404 "<what> not found".
    func pathParameter(_ name: String, naming what: String) throws -> String {
        guard let value = parameters.get(name) else {
            throw AdminError(status: .notFound, code: "not_found", message: "\(what) not found")
        }
        return value
    }
}
