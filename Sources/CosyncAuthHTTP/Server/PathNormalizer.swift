import CosyncAuth
import Hummingbird

/// Runs before routing (enduser-api.md §1.1): collapses runs of `/` (the SDKs send
/// `//api/appuser/setTwoFactor…`, and base URLs may end in `/`), ignores one trailing `/`, and matches
/// the `/api/appuser/<name>` segment case-insensitively. An unknown `/api/appuser/…` route gets 404
/// with `{"code":500,"message":"service not found"}`.
public struct PathNormalizingResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == ServerRequestContext {
    public typealias Context = ServerRequestContext
    let inner: Inner
    /// lower-cased endpoint name → the name as routed.
    let endUserNames: [String: String]

    public func respond(to request: Request, context: Context) async throws -> Response {
        let raw = request.head.path ?? "/"
        let (path, query) = Self.split(raw)
        var normalized = Self.collapse(path)
        let prefix = "/api/appuser/"
        if normalized.lowercased().hasPrefix(prefix) {
            let name = String(normalized.dropFirst(prefix.count))
            guard let canonical = endUserNames[name.lowercased()] else {
                return JSONBody.response(["code": .int(500), "message": .string("service not found")], status: .notFound)
            }
            normalized = prefix + canonical
        }
        guard normalized != path else { return try await inner.respond(to: request, context: context) }
        var head = request.head
        head.path = normalized + (query.map { "?" + $0 } ?? "")
        return try await inner.respond(to: Request(head: head, body: request.body), context: context)
    }

    static func split(_ raw: String) -> (String, String?) {
        guard let mark = raw.firstIndex(of: "?") else { return (raw, nil) }
        return (String(raw[..<mark]), String(raw[raw.index(after: mark)...]))
    }

    static func collapse(_ path: String) -> String {
        var out = ""
        var previousSlash = false
        for c in path {
            if c == "/" {
                if previousSlash { continue }
                previousSlash = true
            } else {
                previousSlash = false
            }
            out.append(c)
        }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out.isEmpty ? "/" : out
    }
}

public struct PathNormalizingBuilder: HTTPResponderBuilder {
    let router: Router<ServerRequestContext>
    let endUserNames: [String]

    public func buildResponder() -> PathNormalizingResponder<RouterResponder<ServerRequestContext>> {
        PathNormalizingResponder(
            inner: router.buildResponder(),
            endUserNames: Dictionary(endUserNames.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a }))
    }
}
