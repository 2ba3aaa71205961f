import CosyncAuth
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Tracing

/// The first step of a graceful shutdown (SIGTERM/SIGINT). Registered after the application in the
/// process's service group, it is the first service told to stop: `/readyz` turns 503 `draining` at
/// once, the server keeps serving for `delay` (so load balancers and Kubernetes endpoints stop sending
/// new requests), and only then does the HTTP server stop accepting, finish its in-flight requests
/// and stop the delivery workers.
public struct DrainGate: Service {
    let state: ServerState
    let delay: Duration
    let logger: Logger

    public init(state: ServerState, delay: Duration, logger: Logger) {
        self.state = state
        self.delay = delay
        self.logger = logger
    }

    public func run() async throws {
        try await gracefulShutdown()
        state.startDraining()
        logger.notice("shutting down: /readyz answers 503; serving for the drain delay", metadata: ["delay": "\(delay)"])
        try? await Task.sleep(for: delay)
        logger.notice("drain delay over: closing the listener and finishing in-flight requests")
    }
}

/// While the database monitor finds PostgreSQL unreachable, API requests answer 503 at once, with
/// `Retry-After`, instead of waiting for a pool that cannot connect. Liveness, readiness and the
/// OpenAPI document are still served (the metrics have a listener of their own). (Legacy SDKs treat
/// every non-200 as an error.)
struct AvailabilityMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let state: ServerState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if !state.isDatabaseUp, Self.needsDatabase(request.uri.path) { return Self.databaseUnavailable() }
        return try await next(request, context)
    }

    /// 503 `{"code":503,…}` with `Retry-After`: also the answer to a request that was waiting when the
    /// database went away (`PathNormalizingResponder`).
    static func databaseUnavailable() -> Response {
        JSONBody.response(
            ["code": .int(503), "message": .string("database unavailable; try again shortly")],
            status: .serviceUnavailable, headers: [.retryAfter: "2"])
    }

    static func needsDatabase(_ path: String) -> Bool {
        !["/healthz", "/readyz", "/admin/v1/openapi.json"].contains(path)
    }
}

/// The access log (`request` lines at info): method, route pattern (never the raw URI, whose query
/// may hold a code), status, duration, and the app id when the request proved it (a route's `appId`
/// parameter, or the app/access token of a request that succeeded). With `LOG_FORMAT=json` the request
/// id that Hummingbird attaches (`hb.request.id`) appears as `request_id`. `COSYNC_ACCESS_LOG` chooses
/// the requests: `errors` (the default: status 400 and above, and requests slower than 1 s), `all`, or
/// `off` (then this middleware is not added at all).
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    /// Log every request (`all`), or only failures and slow ones (`errors`).
    var everyRequest = false
    static let slow: Duration = .seconds(1)

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            let status = Int(response.status.code)
            if everyRequest || status >= 400 || ContinuousClock.now - started > Self.slow {
                log(request, context: context, status: status, started: started)
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            log(request, context: context, status: Int(status), started: started)
            throw error
        }
    }

    func log(_ request: Request, context: Context, status: Int, started: ContinuousClock.Instant) {
        guard context.logger.logLevel <= .info else { return }
        let tenths = (ContinuousClock.now - started).nanoseconds / 100_000
        var metadata: Logger.Metadata = [
            "method": .string(request.method.rawValue),
            "route": .string(context.endpointPath ?? "(no route)"),
            "status": .stringConvertible(status),
            "duration_ms": .string("\(tenths / 10).\(tenths % 10)"),
        ]
        let route = context.endpointPath ?? ""
        let proven = status == 200 && route.hasPrefix("/api/appuser/") ? Self.provenAppId(request.headers) : nil
        if let appId = (status < 400 ? context.parameters.get("appId") : nil) ?? proven,
            Self.isPlainId(appId)
        {
            metadata["app_id"] = .string(appId)
        }
        context.logger.info("request", metadata: metadata)
    }

    /// The `appId` claim of the request's app-token or access-token. Read only after the request
    /// succeeded: the server matched that exact token, so the claim is the app's own id.
    static func provenAppId(_ headers: HTTPFields) -> String? {
        for name in ["app-token", "access-token"] {
            guard let token = headers.first(where: { $0.name.canonicalName == name })?.value,
                let payload = token.split(separator: ".", omittingEmptySubsequences: false).dropFirst().first, payload.count < 4096,
                let appId = Base64URL.jwtPart(token, 1)?["appId"]?.stringValue
            else { continue }
            return appId
        }
        return nil
    }

    static func isPlainId(_ text: String) -> Bool {
        text.utf8.count <= 64 && !text.isEmpty
            && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d || $0 == 0x5f }
    }
}

/// A span per end-user or admin call (`flow <name>`), inside the request span of
/// Hummingbird's TracingMiddleware; the flows add `SQL …` and `bcrypt …` spans beneath it. Without
/// a tracer (`enabled` false) it only passes the request on.
struct FlowSpanMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let prefix: String
    var enabled = true

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard enabled else { return try await next(request, context) }
        let route = context.endpointPath ?? request.uri.path
        let name = prefix.isEmpty ? route.split(separator: "/").last.map(String.init) ?? route : "\(prefix)\(request.method.rawValue) \(route)"
        return try await withSpan("flow \(name)", ofKind: .internal) { span in
            span.attributes["cosync.route"] = route
            return try await next(request, context)
        }
    }
}
