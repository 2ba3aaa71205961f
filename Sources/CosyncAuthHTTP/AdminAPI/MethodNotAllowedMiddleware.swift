import CosyncAuth
import Hummingbird

/// 405 with `Allow` and the admin error shape for a method that a documented path does not declare
/// (e.g. `PUT /admin/v1/apps`, `TRACE /healthz`). The paths and methods are those of the OpenAPI
/// document, which a test keeps equal to the router. Other paths (the end-user API) are untouched.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext

    /// A documented path template, split into segments (`nil` for a `{parameter}`), and its methods.
    struct Template: Sendable {
        let segments: [String?]
        var methods: [String]
    }

    let templates: [Template]
    /// First path segments of the documented paths: any other request skips the check at once.
    let firstSegments: Set<String>

    init(operations: [(method: String, path: String)]) {
        var byPath: [String: Template] = [:]
        var order: [String] = []
        for operation in operations {
            let method = operation.method.uppercased()
            if byPath[operation.path] == nil {
                let segments: [String?] = operation.path.split(separator: "/").map { segment in
                    segment.hasPrefix("{") && segment.hasSuffix("}") ? nil : String(segment)
                }
                byPath[operation.path] = Template(segments: segments, methods: [])
                order.append(operation.path)
            }
            if byPath[operation.path]?.methods.contains(method) == false { byPath[operation.path]?.methods.append(method) }
        }
        templates = order.compactMap { byPath[$0] }
        firstSegments = Set(templates.compactMap { $0.segments.first.flatMap { $0 } })
    }

    /// The methods documented for this path, or nil when no documented path matches it.
    func allowedMethods(path: String) -> [String]? {
        let segments = path.split(separator: "/")
        guard let first = segments.first, firstSegments.contains(String(first)) else { return nil }
        var methods: [String] = []
        var matched = false
        for template in templates where template.segments.count == segments.count {
            let fits = zip(template.segments, segments).allSatisfy { expected, actual in expected.map { $0 == actual } ?? true }
            guard fits else { continue }
            matched = true
            for method in template.methods where !methods.contains(method) { methods.append(method) }
        }
        return matched ? methods : nil
    }

    /// The router answers 404 for a method a path lacks, so the documented methods are looked up only
    /// after a 404: a request that found its route never pays for the match (issue 24). A route's own
    /// 404 (an unknown app on GET) keeps its answer, since its method is documented for its path.
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError where error.status == .notFound {
            if let refusal = refusal(request) { return refusal }
            throw error
        }
        if response.status == .notFound, let refusal = refusal(request) { return refusal }
        return response
    }

    /// 405 when the path is documented and the method is not one of its methods.
    func refusal(_ request: Request) -> Response? {
        guard let methods = allowedMethods(path: request.uri.path), !methods.contains(request.method.rawValue) else { return nil }
        let allow = Self.order(methods).joined(separator: ", ")
        return JSONBody.response(
            ["error": .object([
                "code": .string("method_not_allowed"),
                "message": .string("\(request.method.rawValue) is not allowed here; allowed: \(allow)"),
            ])],
            status: .methodNotAllowed, headers: [.allow: allow])
    }

    static func order(_ methods: [String]) -> [String] {
        let rank = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return methods.sorted { (rank.firstIndex(of: $0) ?? rank.count, $0) < (rank.firstIndex(of: $1) ?? rank.count, $1) }
    }
}
