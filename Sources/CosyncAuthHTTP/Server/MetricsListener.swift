import CosyncAuth
import Hummingbird
import Logging
import Metrics
import Prometheus

/// The process's Prometheus registry. The first use bootstraps swift-metrics with it (swift-metrics
/// allows one bootstrap per process), so every counter, gauge and timer made afterwards lands here,
/// with only the labels of `FixedLabelsFactory.allowedLabels`.
public final class MetricsRegistry: Sendable {
    let registry: PrometheusCollectorRegistry

    private init() {
        registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(FixedLabelsFactory(inner: PrometheusMetricsFactory(registry: registry)))
    }

    /// The one registry of this process (bootstrapped on first use).
    public static let process = MetricsRegistry()

    /// Every metric in the Prometheus text format (0.0.4).
    public func text() -> String { registry.emitToString() }
}

/// The metrics factory of the process: Prometheus, keeping only the labels whose values the server
/// chooses from a fixed set. Any other label (an app id, a webhook endpoint id, anything a tenant
/// creates without bound) is dropped before Prometheus sees it, so a call site that adds one by
/// mistake adds to the aggregate series instead of one series per tenant. (A metric must then use
/// the same allowed labels everywhere, as it must in Prometheus anyway.)
struct FixedLabelsFactory: MetricsFactory {
    let inner: PrometheusMetricsFactory

    /// Ours (`Telemetry`, the pool and outbox gauges, the request bound) and Hummingbird's
    /// MetricsMiddleware (route patterns, never raw paths; methods; statuses).
    static let allowedLabels: Set<String> = [
        "outcome", "kind", "channel", "final", "reason", "state",
        "http.route", "http.request.method", "http.response.status_code", "error.type",
    ]

    static func fixed(_ dimensions: [(String, String)]) -> [(String, String)] {
        dimensions.filter { allowedLabels.contains($0.0) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        inner.makeCounter(label: label, dimensions: Self.fixed(dimensions))
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        inner.makeFloatingPointCounter(label: label, dimensions: Self.fixed(dimensions))
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        inner.makeMeter(label: label, dimensions: Self.fixed(dimensions))
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        inner.makeRecorder(label: label, dimensions: Self.fixed(dimensions), aggregate: aggregate)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        inner.makeTimer(label: label, dimensions: Self.fixed(dimensions))
    }

    func destroyCounter(_ handler: any CounterHandler) { inner.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { inner.destroyFloatingPointCounter(handler) }
    func destroyMeter(_ handler: any MeterHandler) { inner.destroyMeter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { inner.destroyRecorder(handler) }
    func destroyTimer(_ handler: any TimerHandler) { inner.destroyTimer(handler) }
}

/// The metrics listener: `GET /metrics` and nothing else (every other path is 404), on an address of
/// its own (`COSYNC_METRICS_HOST` / `COSYNC_METRICS_PORT`, loopback by default). The public listener
/// does not serve `/metrics`: what the metrics tell (traffic per route, outbox and webhook backlogs,
/// lockouts) is for the operator, not for the internet.
public func buildMetricsApplication(registry: MetricsRegistry, host: String, port: Int, logger: Logger) -> some ApplicationProtocol {
    let router = Router()
    router.get("metrics") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: registry.text())))
    }
    return Application(
        router: router,
        server: .http1(configuration: .init(idleTimeout: .seconds(60))),
        configuration: .init(address: .hostname(host, port: port), serverName: "CosyncAuth"),
        logger: logger)
}
