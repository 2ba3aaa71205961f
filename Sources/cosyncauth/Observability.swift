import CosyncAuth
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Process-wide logging: human-readable lines by default, one JSON object per line with
/// `LOG_FORMAT=json`. Bootstrapped once, before the first logger is made.
enum LogSetup {
    static let bootstrapped: Void = {
        if Environment.value("LOG_FORMAT")?.lowercased() == "json" {
            LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
        } else {
            LoggingSystem.bootstrap { label in LazyStreamLogHandler(inner: StreamLogHandler.standardError(label: label)) }
        }
    }()
}

/// swift-log's `StreamLogHandler` formats its metadata each time it changes, to have the text ready,
/// and Hummingbird puts a request id into every request's logger: each request paid for formatting
/// metadata that (with the access log at `errors`) is hardly ever printed, about 2 % of a `/healthz`'s
/// CPU in its profile (issue 24). This handler keeps the metadata itself and gives it to the stream
/// handler with the line, when one is written.
/// The metadata of a line is merged in swift-log's order: the handler's, then the provider's, then
/// the call's (each later one wins).
struct LazyStreamLogHandler: LogHandler {
    var inner: StreamLogHandler
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(inner: StreamLogHandler) {
        self.inner = inner
        // The provider is applied here, in its place in the order; the inner handler gets none.
        self.metadataProvider = inner.metadataProvider
        self.inner.metadataProvider = nil
    }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        event.metadata = merged
        inner.log(event: event)
    }
}

/// One JSON object per line on standard error: `ts`, `level`, `label`, `message`, `source`, and the
/// metadata (Hummingbird's `hb.request.id` as `request_id`). Metadata whose key names a secret
/// (password, code, token, secret, key) is replaced by "[redacted]": the server never logs such
/// values, and this is the second line of defence.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    static let renamed = ["hb.request.id": "request_id"]
    static let secretWords = ["password", "code", "token", "secret", "key", "authorization"]

    static func isSecret(_ key: String) -> Bool {
        let lower = key.lowercased()
        return secretWords.contains { lower.contains($0) }
    }

    func log(event: LogEvent) {
        let (level, message, explicit, source) = (event.level, event.message, event.metadata, event.source)
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let explicit { merged.merge(explicit) { $1 } }
        var object: [String: Any] = [
            "ts": Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
            "level": level.rawValue, "label": label, "message": message.description, "source": source,
        ]
        for (key, value) in merged {
            let name = Self.renamed[key] ?? key
            object[name] = Self.isSecret(name) ? "[redacted]" : Self.plain(value)
        }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        data.append(0x0a)
        // A full disk or a closed stderr must not stop the server (FileHandle.write(_:) traps on errors).
        try? FileHandle.standardError.write(contentsOf: data)
    }

    static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let value): value.description
        case .array(let values): values.map(plain)
        case .dictionary(let values): values.mapValues(plain)
        }
    }
}

/// Tracing: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, spans
/// go to that OTLP collector over HTTP (`OTEL_EXPORTER_OTLP_PROTOCOL` http/protobuf, the default, or
/// http/json); otherwise tracing stays off (a no-op tracer). The other standard `OTEL_*` variables
/// (service name, sampler, batch delays) apply. Returns the exporter's service, to run (and flush on
/// shutdown) with the server.
enum TracingSetup {
    static func bootstrap(logger: Logger) throws -> (any Service)? {
        guard Environment.value("OTEL_EXPORTER_OTLP_ENDPOINT") != nil || Environment.value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil
        else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "cosyncauth"
        configuration.traces.exporter = .otlp
        configuration.metrics.enabled = false  // metrics stay in Prometheus, on the metrics listener
        configuration.logs.enabled = false
        configuration.diagnosticLogger = .custom(logger)
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(tracer)
        logger.info("tracing: exporting spans over OTLP/HTTP")
        return service
    }
}
