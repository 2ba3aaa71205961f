import CosyncAuth
import Hummingbird

/// `/healthz`, `/readyz` and the public per-app JWKS. (`/metrics` is served by the metrics listener
/// only, never on the public port: `buildMetricsApplication`.)
struct OperationalRoutes {
    let services: CosyncServices

    func register(on router: Router<ServerRequestContext>) {
        let healthy = JSONBody.Fixed(.object(["status": .string("ok")]))
        router.get("healthz") { _, _ in healthy.response() }
        router.get("readyz") { _, _ in
            let readiness = await services.readiness()
            return JSONBody.response(
                ["status": .string(readiness.rawValue)], status: readiness == .ready ? .ok : .serviceUnavailable)
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
            } catch where DatabaseAvailability.isUnavailable(error) {
                return AvailabilityMiddleware.databaseUnavailable()
            }
        }
    }
}
