import Foundation

/// Everything the server needs, read from flags and environment variables, validated up front.
public struct ServerConfiguration: Sendable {
    public var database: DatabaseURL
    public var port: Int
    public var host: String
    public var operatorToken: String?
    public var secretBox: SecretBox
    public var publicURL: String
    /// bcrypt cost for new password hashes. 10 in production (the legacy cost); tests may lower it.
    public var bcryptCost: Int
    /// The longest expected wait for a bcrypt thread before a password request is refused with 503
    /// and `Retry-After` (`COSYNC_KDF_MAX_WAIT_MS`, default 2000; see KDFScheduler).
    public var kdfMaxWait: Duration = .seconds(2)
    /// The nice value of the bcrypt threads (`COSYNC_BCRYPT_NICE`, 0-19, default 0; see `BackgroundPriority`).
    public var bcryptNice: Int32 = 0
    /// How long an app stays in a node's cache without a change notice (`COSYNC_APP_CACHE_TTL`, seconds,
    /// default 120). Only a net: every change reaches every node at once through LISTEN/NOTIFY.
    public var appCacheTTL: Duration = .seconds(120)
    public var databaseMaxConnections: Int
    /// `log` (development) or `sendgrid`.
    public var emailTransport: String = "log"
    public var sendGridBaseURL: String = "https://api.sendgrid.com"
    public var sendGridAPIKey: String? = nil
    public var emailFrom: String = "no-reply@localhost"
    /// Access tokens live max(this, the app's userJWTExpiration).
    public var accessTokenLifetime: TimeInterval = 30 * 24 * 3600
    public var flows = FlowSettings()
    /// The header that trusted proxies put the client address in (`COSYNC_CLIENT_IP_HEADER`, default
    /// X-Forwarded-For), and which proxies are trusted (`COSYNC_TRUSTED_PROXIES`, see TrustedProxies).
    /// No trusted proxies: the TCP peer address is the client.
    public var clientIPHeader: String = "x-forwarded-for"
    public var trustedProxies: TrustedProxies = .none
    /// `log` (development) or `twilio`.
    public var smsTransport: String = "log"
    public var twilioBaseURL: String = "https://api.twilio.com"
    /// Where Apple and Google publish their ID-token keys, and the issuers their tokens carry.
    public var social = SocialProviders()
    /// How often an idle delivery worker looks for due outbox rows.
    public var courierPollInterval: Duration = .milliseconds(500)
    /// How often an idle outbox or webhook worker looks for due rows while `NOTIFY cosync_work`
    /// reaches the node (`COSYNC_WORKER_IDLE_POLL_MS`, default 5000): new work wakes it at once; this
    /// poll finds retries that fall due. Without the notifications the workers poll every
    /// `courierPollInterval`.
    public var workerIdlePoll: Duration = .seconds(5)
    /// How many RSA key pairs are kept generated ahead for new apps (`COSYNC_KEY_POOL_SIZE`, default 64,
    /// 0-10000; 0: every creation generates its own key on the request path).
    public var keyPoolSize = 64
    /// Webhook delivery (COSYNC_WEBHOOK_*).
    public var webhooks = WebhookSettings()
    /// The longest a request may take before it is answered 503 (`COSYNC_REQUEST_TIMEOUT_SECONDS`,
    /// default 15): a request caught by a database failure never hangs its client.
    public var requestTimeout: Duration = .seconds(15)
    /// Which requests get an access-log line (`COSYNC_ACCESS_LOG`): `errors` (default: answers of 400 and
    /// above, and any request slower than 1 s), `all`, or `off`. A line per request costs about a tenth of
    /// a cheap request's CPU (README, "What each part of a request costs").
    public var accessLog: AccessLog = .errors
    /// Whether spans are exported (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// set): without a tracer, the request and flow span middleware are left out of the router.
    public var tracing = false

    /// `COSYNC_ACCESS_LOG`.
    public enum AccessLog: String, Sendable, CaseIterable {
        case all, errors, off
    }
    /// A path prefix under which the AppKey routes are mounted too (`COSYNC_APPKEY_PREFIX`, e.g.
    /// `/appkey` → `/appkey/api/appuser/login`); nil: only the shared `/api/appuser/…` dispatch.
    public var appKeyPrefix: String? = nil
    /// The Portal's passkey relying party (`COSYNC_PORTAL_RP_ID`, `COSYNC_PORTAL_ORIGIN`; nil: the public
    /// URL's host and origin). See `PortalRelyingParty`.
    public var portalRPID: String? = nil
    public var portalOrigin: String? = nil
    /// On SIGTERM/SIGINT: how long `/readyz` answers 503 while the node keeps serving
    /// (`COSYNC_SHUTDOWN_DRAIN_SECONDS`, default 3), then how long in-flight work may take
    /// (`COSYNC_SHUTDOWN_TIMEOUT_SECONDS`, default 20).
    public var shutdownDrain: Duration = .seconds(3)
    public var shutdownTimeout: Duration = .seconds(20)
    /// Where Prometheus scrapes `GET /metrics` (`COSYNC_METRICS_HOST`, default 127.0.0.1, and
    /// `COSYNC_METRICS_PORT`, default 9464; `off`: no metrics listener). Never the public listener.
    public var metricsListener: MetricsListener? = .defaultListener

    /// The address of the metrics listener.
    public struct MetricsListener: Sendable, Equatable {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public static let defaultListener = MetricsListener(host: "127.0.0.1", port: 9464)
    }

    public init(
        database: DatabaseURL, port: Int = 8080, host: String = "0.0.0.0", operatorToken: String?,
        secretBox: SecretBox, publicURL: String, bcryptCost: Int = 10, databaseMaxConnections: Int = 20
    ) {
        self.database = database
        self.port = port
        self.host = host
        self.operatorToken = operatorToken
        self.secretBox = secretBox
        self.publicURL = publicURL
        self.bcryptCost = bcryptCost
        self.databaseMaxConnections = databaseMaxConnections
    }

    public static func parseDatabaseURL(_ value: String?) throws -> DatabaseURL {
        guard let value, !value.isEmpty else {
            throw ConfigurationError("DATABASE_URL", "is not set (e.g. postgres://postgres@127.0.0.1:5432/cosyncauth)")
        }
        return try DatabaseURL(value)
    }

    public static func parseMasterKey(_ value: String?) throws -> SecretBox {
        guard let value, !value.isEmpty else {
            throw ConfigurationError(
                "COSYNC_MASTER_KEY",
                "is not set; it encrypts secrets at rest (32 random bytes as base64: openssl rand -base64 32)")
        }
        do {
            return try SecretBox(masterKey: value)
        } catch {
            throw ConfigurationError("COSYNC_MASTER_KEY", "must be 32 bytes, given as 64 hex characters or base64")
        }
    }

    public static func parsePort(_ value: String?, setting: String = "PORT") throws -> Int {
        guard let value, !value.isEmpty else { return 8080 }
        guard let port = Int(value), (1...65535).contains(port) else {
            throw ConfigurationError(setting, "must be a number from 1 to 65535, got '\(value)'")
        }
        return port
    }

    /// The metrics listener from `COSYNC_METRICS_HOST` and `COSYNC_METRICS_PORT` (or their flags):
    /// loopback port 9464 unless set; the port `off` turns the listener off. It may not share the public
    /// port: the metrics are never served where the API is.
    public static func parseMetricsListener(host: String?, port: String?, publicPort: Int) throws -> MetricsListener? {
        let portText = port?.trimmingCharacters(in: .whitespaces) ?? ""
        if ["off", "none", "false", "disabled"].contains(portText.lowercased()) { return nil }
        var listener = MetricsListener.defaultListener
        if !portText.isEmpty {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw ConfigurationError("COSYNC_METRICS_PORT", "must be a number from 1 to 65535, or off, got '\(portText)'")
            }
            listener.port = number
        }
        if let host = host?.trimmingCharacters(in: .whitespaces), !host.isEmpty {
            guard host.utf8.count <= 253, host.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "/" }) else {
                throw ConfigurationError("COSYNC_METRICS_HOST", "must be an address to bind, such as 127.0.0.1 or 0.0.0.0")
            }
            listener.host = host
        }
        guard listener.port != publicPort else {
            throw ConfigurationError(
                "COSYNC_METRICS_PORT", "must differ from PORT (\(publicPort)): the metrics are never served on the public listener")
        }
        return listener
    }

    public static func parseOperatorToken(_ value: String?) throws -> String? {
        guard let value, !value.isEmpty else { return nil }
        guard value.count >= 24 else {
            throw ConfigurationError("COSYNC_OPERATOR_TOKEN", "is too short (at least 24 characters)")
        }
        guard value.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw ConfigurationError("COSYNC_OPERATOR_TOKEN", "must be printable ASCII without spaces")
        }
        return value
    }

    public static func parsePublicURL(_ value: String?, port: Int) throws -> String {
        guard let value, !value.isEmpty else { return "http://localhost:\(port)" }
        guard let url = URL(string: value), let scheme = url.scheme, ["http", "https"].contains(scheme),
            url.host != nil
        else {
            throw ConfigurationError("COSYNC_PUBLIC_URL", "must be an http(s) URL such as https://auth.example.com")
        }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    /// Reads the e-mail, token and code settings from the environment.
    public mutating func readDeliverySettings(_ env: [String: String]) throws {
        func value(_ name: String) -> String? { env[name].flatMap { $0.isEmpty ? nil : $0 } }
        emailTransport = value("COSYNC_EMAIL_TRANSPORT") ?? "log"
        guard ["log", "sendgrid"].contains(emailTransport) else {
            throw ConfigurationError("COSYNC_EMAIL_TRANSPORT", "must be log or sendgrid")
        }
        func httpURL(_ name: String) throws -> String? {
            guard let text = value(name) else { return nil }
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigurationError(name, "must be an http(s) URL")
            }
            return text
        }
        sendGridAPIKey = value("COSYNC_SENDGRID_API_KEY")
        if let base = try httpURL("COSYNC_SENDGRID_BASE_URL") { sendGridBaseURL = base }
        smsTransport = value("COSYNC_SMS_TRANSPORT") ?? "log"
        guard ["log", "twilio"].contains(smsTransport) else {
            throw ConfigurationError("COSYNC_SMS_TRANSPORT", "must be log or twilio")
        }
        flows.smsNeedsProviderCredentials = smsTransport == "twilio"
        if let base = try httpURL("COSYNC_TWILIO_BASE_URL") { twilioBaseURL = base }
        if let url = try httpURL("COSYNC_APPLE_JWKS_URL") { social.apple.jwksURL = url }
        if let url = try httpURL("COSYNC_GOOGLE_JWKS_URL") { social.google.jwksURL = url }
        func issuers(_ name: String) throws -> [String]? {
            guard let text = value(name) else { return nil }
            let list = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !list.isEmpty else { throw ConfigurationError(name, "must list at least one issuer") }
            return list
        }
        if let list = try issuers("COSYNC_APPLE_ISSUER") { social.apple.issuers = list }
        if let list = try issuers("COSYNC_GOOGLE_ISSUERS") { social.google.issuers = list }
        if emailTransport == "sendgrid" && sendGridAPIKey == nil {
            throw ConfigurationError("COSYNC_SENDGRID_API_KEY", "is required when COSYNC_EMAIL_TRANSPORT=sendgrid")
        }
        if let from = value("COSYNC_EMAIL_FROM") {
            guard AppState.looksLikeEmail(from) else { throw ConfigurationError("COSYNC_EMAIL_FROM", "must be an e-mail address") }
            emailFrom = from
        }
        func number(_ name: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = value(name) else { return nil }
            guard let n = Int(text), range.contains(n) else {
                throw ConfigurationError(name, "must be a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
        if let header = value("COSYNC_CLIENT_IP_HEADER") {
            clientIPHeader = header.lowercased()
            trustedProxies = .count(1)  // the header alone keeps its old meaning: one proxy in front
        }
        if let proxies = value("COSYNC_TRUSTED_PROXIES") { trustedProxies = try TrustedProxies.parse(proxies) }
        if let ms = try number("COSYNC_COURIER_POLL_MS", 10...600_000) { courierPollInterval = .milliseconds(ms) }
        if let ms = try number("COSYNC_WORKER_IDLE_POLL_MS", 100...600_000) { workerIdlePoll = .milliseconds(ms) }
        if let size = try number("COSYNC_KEY_POOL_SIZE", 0...10_000) { keyPoolSize = size }
        if let seconds = try number("COSYNC_REQUEST_TIMEOUT_SECONDS", 1...3600) { requestTimeout = .seconds(seconds) }
        if let ms = try number("COSYNC_KDF_MAX_WAIT_MS", 10...60000) { kdfMaxWait = .milliseconds(ms) }
        if let nice = try number("COSYNC_BCRYPT_NICE", 0...19) { bcryptNice = Int32(nice) }
        if let seconds = try number("COSYNC_APP_CACHE_TTL", 1...3600) { appCacheTTL = .seconds(seconds) }
        if let seconds = try number("COSYNC_SHUTDOWN_DRAIN_SECONDS", 0...300) { shutdownDrain = .seconds(seconds) }
        if let seconds = try number("COSYNC_SHUTDOWN_TIMEOUT_SECONDS", 1...3600) { shutdownTimeout = .seconds(seconds) }
        if let days = try number("COSYNC_ACCESS_TOKEN_DAYS", 1...3650) { accessTokenLifetime = Double(days) * 86400 }
        if let hours = try number("COSYNC_SIGNUP_CODE_HOURS", 1...720) { flows.signupCodeLifetime = hours * 3600 }
        if let hours = try number("COSYNC_INVITE_CODE_HOURS", 1...8760) { flows.inviteCodeLifetime = hours * 3600 }
        if let minutes = try number("COSYNC_RESET_CODE_MINUTES", 5...10080) { flows.resetCodeLifetime = minutes * 60 }
        if let minutes = try number("COSYNC_PHONE_CODE_MINUTES", 5...1440) { flows.phoneCodeLifetime = minutes * 60 }
        if let seconds = try number("COSYNC_JWKS_MIN_REFETCH_SECONDS", 0...86400) { social.minimumRefetchInterval = .seconds(seconds) }
        if let prefix = value("COSYNC_APPKEY_PREFIX") { appKeyPrefix = try Self.parseAppKeyPrefix(prefix) }
        if let rpId = value("COSYNC_PORTAL_RP_ID") { portalRPID = try Self.parsePortalRPID(rpId) }
        if let origin = value("COSYNC_PORTAL_ORIGIN") { portalOrigin = try Self.parsePortalOrigin(origin) }
        try checkPortalRelyingParty()
        if let mode = value("COSYNC_ACCESS_LOG") {
            guard let parsed = AccessLog(rawValue: mode.lowercased()) else {
                throw ConfigurationError("COSYNC_ACCESS_LOG", "must be all, errors or off")
            }
            accessLog = parsed
        }
        tracing = value("OTEL_EXPORTER_OTLP_ENDPOINT") != nil || value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil
        try webhooks.read(env)
    }

    /// `/segment[/segment…]` of letters, digits, `-`, `_`, `.`; not `/api` nor `/admin`.
    public static func parseAppKeyPrefix(_ text: String) throws -> String? {
        var prefix = text.trimmingCharacters(in: .whitespaces)
        while prefix.hasSuffix("/") { prefix.removeLast() }
        if prefix.isEmpty { return nil }
        if !prefix.hasPrefix("/") { prefix = "/" + prefix }
        let segments = prefix.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard segments.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) } }),
            let first = segments.first, !["api", "admin", "_appkey", "metrics", "healthz", "readyz"].contains(first.lowercased())
        else {
            throw ConfigurationError("COSYNC_APPKEY_PREFIX", "must be a path such as /appkey (letters, digits, - _ .), not under /api or /admin")
        }
        return prefix
    }

    public static func parseBcryptCost(_ value: String?) throws -> Int {
        guard let value, !value.isEmpty else { return 10 }
        guard let cost = Int(value), (4...16).contains(cost) else {
            throw ConfigurationError("COSYNC_BCRYPT_COST", "must be a number from 4 to 16")
        }
        return cost
    }
}
