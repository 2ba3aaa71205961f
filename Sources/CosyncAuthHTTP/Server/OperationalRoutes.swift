import CosyncAuth
import Hummingbird
import Prometheus

/// `/healthz`, `/readyz`, `/metrics` and the public per-app JWKS.
struct OperationalRoutes {
    let services: CosyncServices
    let metrics: PrometheusCollectorRegistry?

    func register(on router: Router<ServerRequestContext>) {
        router.get("healthz") { _, _ in JSONBody.response(["status": .string("ok")]) }
        router.get("readyz") { _, _ in
            let readiness = await services.readiness()
            return JSONBody.response(
                ["status": .string(readiness.rawValue)], status: readiness == .ready ? .ok : .serviceUnavailable)
        }
        router.get("metrics") { _, _ in
            let text = metrics?.emitToString() ?? ""
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("apps/:appId/.well-known/jwks.json") { _, context in
            let appId = context.parameters.get("appId") ?? ""
            do {
                let keys = try await services.apps.jwks(appId: appId)
                return JSONBody.response(
                    ["keys": .array(keys.map { .object($0.mapValues { .string($0) }) })],
                    headers: [.cacheControl: "public, max-age=300"])
            } catch AdminFailure.notFound {
                return JSONBody.response(
                    ["error": .object(["code": .string("not_found"), "message": .string("app not found")])], status: .notFound)
            }
        }
    }
}
