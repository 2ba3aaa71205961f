import CosyncAuth
import Hummingbird
import Metrics

/// Runs before routing (<doc:EndUserAPI> §1.1): collapses runs of `/` (the SDKs send
/// `//api/appuser/setTwoFactor…`, and base URLs may end in `/`), ignores one trailing `/`, and matches
/// the `/api/appuser/<name>` segment case-insensitively. An unknown `/api/appuser/…` route gets 404
/// with `{"code":500,"message":"service not found"}`.
public struct PathNormalizingResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == ServerRequestContext {
    public typealias Context = ServerRequestContext
    let inner: Inner
    /// lower-cased endpoint name → the name as routed.
    let endUserNames: [String: String]
    /// Every request is answered within this (503 after it): a request caught by a database failure
    /// (a query on a connection that PostgreSQL dropped may never complete) must not hang its client.
    let timeout: Duration?
    /// A request still running when the database monitor declares PostgreSQL down is answered 503 at
    /// once rather than at the timeout.
    let state: ServerState?
    /// lower-cased AppKey endpoint name → the name as routed (<doc:AppKeyAPI> §1.1).
    var appKeyNames: [String: String] = [:]
    /// Resolves the product of a request's app, for the names both APIs share.
    var resolver: AppProductResolver? = nil
    /// `COSYNC_APPKEY_PREFIX`: AppKey routes also answer under `<prefix>/api/appuser/`.
    var appKeyPrefix: String? = nil

    /// Keeps the deadlines of the requests in flight (one clock for all of them).
    var watch: DeadlineWatch? = nil

    public func respond(to request: Request, context: Context) async throws -> Response {
        guard let timeout, let watch else { return try await route(request, context: context) }
        do {
            return try await watch.run(timeout) { [self] in try await route(request, context: context) }
        } catch is DatabaseWentAway {
            Counter(label: "cosync_requests_abandoned_total", dimensions: [("reason", "database_unavailable")]).increment()
            return AvailabilityMiddleware.databaseUnavailable()
        } catch is DeadlineExceeded {
            Counter(label: "cosync_requests_abandoned_total", dimensions: [("reason", "timeout")]).increment()
            context.logger.error("request timed out: answered 503; its handler may still finish", metadata: ["limit": "\(timeout)"])
            return JSONBody.response(
                ["code": .int(503), "message": .string("the request took too long; try again shortly")],
                status: .serviceUnavailable, headers: [.retryAfter: "2"])
        }
    }

    func route(_ request: Request, context: Context) async throws -> Response {
        var context = context
        let raw = request.head.path ?? "/"
        let (path, query) = Self.split(raw)
        var normalized = Self.collapse(path)
        let prefix = "/api/appuser/"
        if Self.hasPrefixIgnoringCase(normalized, "/_appkey/") || Self.hasPrefixIgnoringCase(normalized, "/_appkey") && normalized.utf8.count == 8 {
            return Self.serviceNotFound()  // the internal mount is reached only through the rewrite below
        }
        if let mount = appKeyPrefix, Self.hasPrefixIgnoringCase(normalized, mount + prefix) {
            let name = String(normalized.dropFirst(mount.count + prefix.count))
            guard let canonical = appKeyNames[name.lowercased()] else { return Self.serviceNotFound() }
            normalized = AppKeyRoutes.mount + canonical
        } else if Self.hasPrefixIgnoringCase(normalized, prefix) {
            let name = String(normalized.dropFirst(prefix.count)).lowercased()
            let cosync = endUserNames[name], appKey = appKeyNames[name]
            switch (cosync, appKey) {
            case (nil, nil):
                return Self.serviceNotFound()
            case (let cosync?, nil):
                normalized = prefix + cosync
            case (let cosync, let appKey?):
                let headers = request.headers
                let dispatch = await resolver?.product(
                    appToken: LegacyHeaders.value("app-token", in: headers), accessToken: LegacyHeaders.value("access-token", in: headers),
                    signupToken: LegacyHeaders.value("signup-token", in: headers))
                // Resolved once: the API's edge takes this app instead of resolving the token again.
                context.dispatchedApp = dispatch?.appFromToken
                switch (dispatch?.product, cosync) {
                case (.appKey?, _), (nil, nil): normalized = AppKeyRoutes.mount + appKey
                case (_, let cosync?): normalized = prefix + cosync
                case (.cosyncAuth?, nil):
                    // An AppKey-only endpoint asked by a CosyncAuth app.
                    return JSONBody.response(
                        ["code": .int(400), "message": .string("this app does not serve the AppKey API")], status: .badRequest)
                }
            }
        }
        guard normalized != path else { return try await inner.respond(to: request, context: context) }
        var head = request.head
        head.path = normalized + (query.map { "?" + $0 } ?? "")
        return try await inner.respond(to: Request(head: head, body: request.body), context: context)
    }

    static func serviceNotFound() -> Response {
        JSONBody.response(["code": .int(500), "message": .string("service not found")], status: .notFound)
    }

    static func split(_ raw: String) -> (String, String?) {
        guard let mark = raw.firstIndex(of: "?") else { return (raw, nil) }
        return (String(raw[..<mark]), String(raw[raw.index(after: mark)...]))
    }

    /// Whether `text` starts with `prefix`, ASCII letters compared without case (paths are ASCII up to
    /// the part compared; anything else simply does not match).
    static func hasPrefixIgnoringCase(_ text: String, _ prefix: String) -> Bool {
        var remaining = text.utf8.makeIterator()
        for expected in prefix.utf8 {
            guard let byte = remaining.next() else { return false }
            if byte == expected { continue }
            let folded = (0x41...0x5a).contains(byte) ? byte | 0x20 : byte
            let foldedExpected = (0x41...0x5a).contains(expected) ? expected | 0x20 : expected
            guard folded == foldedExpected else { return false }
        }
        return true
    }

    static func collapse(_ path: String) -> String {
        // The common case, checked on the bytes: no `//` and no trailing `/` (or just `/`).
        var lastWasSlash = false
        var clean = true
        for byte in path.utf8 {
            let slash = byte == 0x2f
            if slash && lastWasSlash { clean = false; break }
            lastWasSlash = slash
        }
        if clean && !(lastWasSlash && path.utf8.count > 1) && !path.isEmpty { return path }
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

/// Why a request was answered 503 before its handler finished: the database monitor found PostgreSQL down.
struct DatabaseWentAway: Error {}

public struct PathNormalizingBuilder: HTTPResponderBuilder {
    let router: Router<ServerRequestContext>
    let endUserNames: [String]
    var timeout: Duration? = nil
    var state: ServerState? = nil
    var appKeyNames: [String] = []
    var resolver: AppProductResolver? = nil
    var appKeyPrefix: String? = nil

    public func buildResponder() -> PathNormalizingResponder<RouterResponder<ServerRequestContext>> {
        PathNormalizingResponder(
            inner: router.buildResponder(),
            endUserNames: Dictionary(endUserNames.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a }), timeout: timeout, state: state,
            appKeyNames: Dictionary(appKeyNames.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a }), resolver: resolver,
            appKeyPrefix: appKeyPrefix, watch: timeout.map { _ in Self.watch(state: state) })
    }

    /// The clock of the request deadlines: a request still waiting when the database monitor declares
    /// PostgreSQL down is answered 503 at once rather than at the timeout.
    static func watch(state: ServerState?) -> DeadlineWatch {
        DeadlineWatch(abandonWhen: { state?.isDatabaseUp == false ? DatabaseWentAway() : nil })
    }
}
