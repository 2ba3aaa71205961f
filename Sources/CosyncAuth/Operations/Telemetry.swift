import Foundation
import Metrics
import NIOConcurrencyHelpers
import PostgresNIO
import Tracing

/// The server's own metrics and spans, in one place. Metric objects come from the swift-metrics
/// factory the process bootstrapped (Prometheus on `/metrics`); spans go to the tracer the process
/// bootstrapped (OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, otherwise a no-op).
///
/// Labels never carry a user, a handle or an address. An app label is added only when
/// `COSYNC_METRICS_PER_APP` is set (its cardinality is the number of tenants).
public enum Telemetry {
    static let perApp: Bool = {
        let value = ProcessInfo.processInfo.environment["COSYNC_METRICS_PER_APP"]?.lowercased() ?? ""
        return ["1", "true", "yes", "on"].contains(value)
    }()

    static func dimensions(_ base: [(String, String)], appId: String?) -> [(String, String)] {
        guard perApp, let appId else { return base }
        return base + [("app", appId)]
    }

    /// Outcomes of a password login: `success`, `second_factor`, `wrong_password`, `unknown_account`,
    /// `locked`, `not_active`.
    static func login(_ outcome: String, appId: String) {
        Counter(label: "cosync_login_attempts_total", dimensions: dimensions([("outcome", outcome)], appId: appId)).increment()
    }

    /// A throttle subject just became locked (`login`, `handle`, `ip`, `2fa`…: the subject's kind).
    static func lockout(subject: String) {
        let kind = subject.split(separator: ":", maxSplits: 1).first.map(String.init) ?? "other"
        Counter(label: "cosync_lockouts_total", dimensions: [("kind", kind)]).increment()
    }

    /// A delivery that failed (`final` when the message will not be retried).
    static func deliveryFailure(channel: String, final: Bool) {
        Counter(label: "cosync_outbox_delivery_failures_total", dimensions: [("channel", channel), ("final", final ? "true" : "false")])
            .increment()
    }

    // MARK: password hashing (the KDF pool)

    static let kdfQueue = KDFQueueGauge()

    /// Runs a bcrypt job with its queue metrics (jobs waiting or running, time waited for a thread)
    /// and a span (`bcrypt hash` / `bcrypt verify`).
    static func kdf<T: Sendable>(_ operation: String, _ body: @Sendable @escaping (_ queued: ContinuousClock.Instant) async throws -> T) async throws -> T {
        try await withSpan("bcrypt \(operation)", ofKind: .internal) { _ in
            kdfQueue.change(by: 1)
            defer { kdfQueue.change(by: -1) }
            return try await body(ContinuousClock.now)
        }
    }

    static func kdfStarted(queuedAt: ContinuousClock.Instant) {
        Timer(label: "cosync_kdf_wait_seconds", preferredDisplayUnit: .seconds).recordNanoseconds((ContinuousClock.now - queuedAt).nanoseconds)
    }

    // MARK: SQL spans

    /// One database step of a flow, as a client span `SQL <operation>` (`db.system` = postgresql).
    public static func sql<T>(
        _ operation: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async throws -> T {
        try await withSpan("SQL \(operation)", ofKind: .client, isolation: isolation) { span in
            span.attributes["db.system"] = "postgresql"
            span.attributes["db.operation"] = operation
            return try await body()
        }
    }
}

/// The number of bcrypt jobs waiting for or running on the KDF pool (`cosync_kdf_queue_depth`).
final class KDFQueueGauge: Sendable {
    private let depth = NIOLockedValueBox(0)
    private let gauge = Gauge(label: "cosync_kdf_queue_depth")

    func change(by delta: Int) {
        let now = depth.withLockedValue { value -> Int in
            value += delta
            return value
        }
        gauge.record(now)
    }
}
