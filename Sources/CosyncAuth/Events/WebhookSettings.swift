import Foundation

/// The operator's webhook settings (COSYNC_WEBHOOK_*).
public struct WebhookSettings: Sendable {
    /// Waits between attempts: the first retry waits `retrySchedule[0]`, and so on; after the last wait's
    /// attempt fails too, the delivery is dead. About a day in all by default.
    public var retrySchedule: [Double] = [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 28800]
    /// `http://` endpoint URLs are refused unless this is set (COSYNC_WEBHOOK_ALLOW_HTTP=1).
    public var allowHTTP = false
    /// Networks an endpoint may resolve into although they are private, loopback or link-local.
    public var allowedNetworks: [IPNetwork] = []
    /// Failed attempts in a row (no success between) after which an endpoint is disabled.
    public var disableAfterFailures = 20
    /// How long the previous secret still signs after a rotation.
    public var secretOverlapSeconds = 24 * 3600
    /// The whole HTTP call, connection to body, must finish within this.
    public var timeout: Duration = .seconds(10)
    /// The most endpoints one app may have.
    public var maxEndpointsPerApp = 20

    public init() {}

    public var guardRule: WebhookURLGuard { WebhookURLGuard(allowHTTP: allowHTTP, allowedNetworks: allowedNetworks) }

    /// Reads the COSYNC_WEBHOOK_* variables; a bad value names itself.
    public mutating func read(_ env: [String: String]) throws {
        func value(_ name: String) -> String? { env[name].flatMap { $0.isEmpty ? nil : $0 } }
        if let text = value("COSYNC_WEBHOOK_ALLOW_HTTP") {
            guard ["0", "1", "true", "false"].contains(text) else { throw ConfigurationError("COSYNC_WEBHOOK_ALLOW_HTTP", "must be 0 or 1") }
            allowHTTP = text == "1" || text == "true"
        }
        if let text = value("COSYNC_WEBHOOK_ALLOW_CIDRS") {
            allowedNetworks = []
            for part in text.split(separator: ",") {
                guard let network = IPNetwork(part.trimmingCharacters(in: .whitespaces)) else {
                    throw ConfigurationError("COSYNC_WEBHOOK_ALLOW_CIDRS", "'\(part)' is not an IP address or CIDR network")
                }
                allowedNetworks.append(network)
            }
        }
        if let text = value("COSYNC_WEBHOOK_RETRY_SECONDS") {
            let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard !parts.isEmpty, parts.count <= 50, parts.allSatisfy({ $0.map { $0 >= 0 && $0 <= 7 * 86400 } ?? false }) else {
                throw ConfigurationError("COSYNC_WEBHOOK_RETRY_SECONDS", "must be 1-50 comma-separated waits in seconds, each at most 604800")
            }
            retrySchedule = parts.compactMap { $0 }
        }
        func number(_ name: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = value(name) else { return nil }
            guard let n = Int(text), range.contains(n) else {
                throw ConfigurationError(name, "must be a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
        if let n = try number("COSYNC_WEBHOOK_DISABLE_AFTER", 1...100_000) { disableAfterFailures = n }
        if let n = try number("COSYNC_WEBHOOK_SECRET_OVERLAP_SECONDS", 0...30 * 86400) { secretOverlapSeconds = n }
        if let n = try number("COSYNC_WEBHOOK_TIMEOUT_SECONDS", 1...60) { timeout = .seconds(n) }
    }
}
