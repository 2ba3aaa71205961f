import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// Hardening issue 20, item 9: the metrics are not public. They are served on a listener of their own
/// (loopback by default), the public port answers 404 for `/metrics`, and no label value is chosen by
/// a tenant (webhook endpoint ids, app ids), so tenants cannot grow the series without bound.
///
/// The tests read the metrics from the process's registry (`MetricsRegistry.process`, bootstrapped
/// into swift-metrics on first use, as `cosyncauth serve` does).
@Suite("Metrics: a listener of their own, no label in a tenant's hands")
struct MetricsListenerTests {
    @Test("the public port answers 404 for /metrics, whatever the method or spelling")
    func publicPortHasNoMetrics() async throws {
        _ = MetricsRegistry.process
        try await TestEnvironment.withLiveServer { api in
            #expect(try await api.call(.get, "/healthz", token: nil).status == .ok)
            for path in ["/metrics", "/metrics/", "//metrics", "/Metrics"] {
                let reply = try await api.call(.get, path, token: nil)
                #expect(reply.status == .notFound, "GET \(path): \(reply.status)")
                #expect(!reply.text.contains("# TYPE") && !reply.text.contains("hb_requests"), "GET \(path) shows metrics")
            }
            let post = try await api.call(.post, "/metrics", token: nil, body: "{}")
            #expect(post.status == .notFound, "POST /metrics: \(post.status) \(post.text)")
        }
        // Nor the OpenAPI document of the public port.
        #expect(!openAPIOperations().contains { $0.path == "/metrics" })
    }

    @Test("the metrics listener serves /metrics (the process's metrics) and 404 for everything else")
    func listenerServesMetrics() async throws {
        let registry = MetricsRegistry.process
        // A request on the public port, so that its route shows in the metrics.
        try await TestEnvironment.withLiveServer { api in
            let ready = try await api.call(.get, "/readyz", token: nil)
            #expect(ready.status == .ok)
        }
        let app = buildMetricsApplication(registry: registry, host: "127.0.0.1", port: 0, logger: Logger(label: "metrics-test"))
        try await app.test(.live) { client in
            let api = API(client: client)
            let metrics = try await api.call(.get, "/metrics", token: nil)
            #expect(metrics.status == .ok)
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
            #expect(metrics.text.contains("# TYPE hb_requests counter"), "\(metrics.text.prefix(400))")
            #expect(metrics.text.contains(#"http_route="/readyz""#))
            for path in ["/healthz", "/readyz", "/admin/v1/openapi.json", "/api/appuser/getApplication", "/"] {
                #expect(try await api.call(.get, path, token: nil).status == .notFound, "GET \(path) on the metrics listener")
            }
        }
    }

    /// Every label value in a Prometheus text exposition.
    static func labelValues(_ text: String) -> [String] {
        let pattern = #/[a-zA-Z_][a-zA-Z0-9_]*="((?:[^"\\]|\\.)*)"/#
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.flatMap { line in
            line.matches(of: pattern).map { String($0.output.1) }
        }
    }

    @Test("after failed deliveries to several webhook endpoints, no label value holds an endpoint id, an app id or any UUID")
    func noTenantChosenLabels() async throws {
        let registry = MetricsRegistry.process
        try await TestEnvironment.withAPI { api in
            let created = try await api.createApp("Metrics labels")
            let appId = created.string("appId")
            // Three endpoints on a port where nothing listens: every attempt fails (connection refused).
            var endpoints: [String] = []
            for n in 0..<3 {
                let reply = try await api.call(.post, "/admin/v1/apps/\(appId)/webhooks", json: .object([
                    "url": .string("http://127.0.0.1:1/hook\(n)"), "eventTypes": .array([.string("user.created")]),
                ]))
                try #require(reply.status == .created, "\(reply.status) \(reply.text)")
                endpoints.append(reply.object.string("webhookId"))
            }
            let user = try await api.call(.post, "/admin/v1/apps/\(appId)/users", json: .object([
                "handle": .string("labels\(Secrets.hexIdentifier().prefix(8))@example.com"), "password": .string("Pw-12345"),
            ]))
            try #require(user.status == .created, "\(user.text)")
            let ids = endpoints.compactMap { UUID(uuidString: $0) }
            try #require(ids.count == 3)
            // The failure counter moves before the attempt is marked: once each delivery shows a failure,
            // each endpoint has been counted.
            var failed = 0
            for _ in 0..<400 {
                failed = try await TestEnvironment.value(
                    "SELECT count(DISTINCT endpoint_id)::int FROM webhook_deliveries WHERE endpoint_id = ANY(\(ids)) AND last_error IS NOT NULL",
                    as: Int.self) ?? 0
                if failed == 3 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            try #require(failed == 3, "deliveries failed for \(failed) of 3 endpoints")

            let text = registry.text()
            #expect(text.contains("cosync_webhook_failures_total"), "the aggregate failure counter is kept")
            let lower = text.lowercased()
            for id in endpoints + [appId] {
                #expect(!lower.contains(id.lowercased()), "the metrics name \(id)")
            }
            let uuid = #/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/#
            let offending = Self.labelValues(text).filter { $0.contains(uuid) }
            #expect(offending.isEmpty, "label values holding ids: \(offending.prefix(5))")
        }
    }
}
