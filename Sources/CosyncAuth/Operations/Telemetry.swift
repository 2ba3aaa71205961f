import Foundation
import Metrics
import NIOConcurrencyHelpers
import PostgresNIO
import Tracing

/// The server's own metrics and spans, in one place. Metric objects come from the swift-metrics
/// factory the process bootstrapped (Prometheus, served on the metrics listener only); spans go to
/// the tracer the process bootstrapped (OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, otherwise a
/// no-op).
///
/// Every label value is one of a fixed set the server chooses. None is in a tenant's hands: no user,
/// handle or address, and no app id or webhook endpoint id (tenants create those without bound, and
/// each label value is a series Prometheus keeps). Per-tenant figures belong in the admin API (the
/// webhook attempt log, the audit log), not here.
public enum Telemetry {
    /// Outcomes of a password login: `success`, `second_factor`, `wrong_password`, `unknown_account`,
    /// `locked`, `not_active`. The app is not a label (see above).
    static func login(_ outcome: String, appId _: String) {
        Counter(label: "cosync_login_attempts_total", dimensions: [("outcome", outcome)]).increment()
    }

    /// A throttle subject just became locked (`login`, `handle`, `ip`, `2fa`…: the subject's kind,
    /// the fixed prefix before its first `:`; anything else counts as `other`).
    static func lockout(subject: String) {
        Counter(label: "cosync_lockouts_total", dimensions: [("kind", lockoutKind(subject))]).increment()
    }

    static func lockoutKind(_ subject: String) -> String {
        guard let mark = subject.firstIndex(of: ":") else { return "other" }
        let kind = subject[..<mark]
        guard (1...24).contains(kind.utf8.count),
            kind.utf8.allSatisfy({ (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2d })
        else { return "other" }
        return String(kind)
    }

    /// A webhook attempt that failed. One counter for the node: the endpoint is not a label (tenants
    /// create endpoints without bound); an endpoint's own failures are in its attempt log (admin API).
    static func webhookFailure() {
        Counter(label: "cosync_webhook_failures_total").increment()
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
