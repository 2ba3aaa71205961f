import Foundation
import Logging
import PostgresNIO

/// Admin operations on an app's webhook endpoints. Every input is validated before any SQL; a
/// refused URL (the SSRF rule) is a 422 naming `url`.
public struct WebhookAdministration: Sendable {
    public let apps: AppAdministration
    public let settings: WebhookSettings
    var client: PostgresClient { apps.client }
    var logger: Logger { apps.logger }
    var box: SecretBox { apps.box }

    public init(apps: AppAdministration, settings: WebhookSettings) {
        self.apps = apps
        self.settings = settings
    }

    static let maxDescription = 500

    static func purpose(_ id: UUID) -> SealPurpose { .webhookSecret(id) }

    func invalid(_ field: String, _ code: String, _ message: String) -> AdminFailure {
        .invalid(FieldError(field, code, message))
    }

    func url(_ value: JSONValue?) async throws -> String {
        guard let text = value?.stringValue else { throw invalid("url", "required", "is required and must be a string") }
        if let refusal = await settings.guardRule.check(text) { throw invalid("url", refusal.code, refusal.message) }
        return text
    }

    func types(_ value: JSONValue?) throws -> [String] {
        guard let items = value?.arrayValue else { throw invalid("eventTypes", "required", "is required and must be an array of event types") }
        guard !items.isEmpty, items.count <= EventType.allCases.count else {
            throw invalid("eventTypes", "invalid_value", "must list 1-\(EventType.allCases.count) event types")
        }
        var result: [String] = []
        for item in items {
            guard let name = item.stringValue, EventType(rawValue: name) != nil else {
                throw invalid("eventTypes", "unknown_event_type", "must list only known event types (\(EventType.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            guard !result.contains(name) else { throw invalid("eventTypes", "duplicate", "must not list a type twice") }
            result.append(name)
        }
        return result
    }

    func description(_ value: JSONValue?) throws -> String? {
        guard let value else { return nil }
        guard let text = value.stringValue, text.unicodeScalars.count <= Self.maxDescription else {
            throw invalid("description", "invalid_value", "must be a string of at most \(Self.maxDescription) characters")
        }
        return text
    }

    func endpointId(_ text: String) throws -> UUID {
        guard let id = UUID(uuidString: text) else { throw AdminFailure.notFound("webhook") }
        return id
    }

    func audit(_ db: PostgresConnection, app: App, actor: String, action: String, id: UUID, detail: [String: JSONValue] = [:]) async throws {
        var all = detail
        all["webhookId"] = .string(id.uuidString.lowercased())
        try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: actor, action: action, detail: all, logger: logger)
    }

    /// `{url, eventTypes, description?}`: the endpoint and its secret (shown only now).
    public func create(app: App, input: [String: JSONValue], actor: String) async throws -> (WebhookEndpoint, secret: String) {
        let allowed: Set<String> = ["url", "eventTypes", "description"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw invalid(unknown, "unknown_field", "is not a field of a webhook endpoint")
        }
        let types = try types(input["eventTypes"])
        let description = try description(input["description"]) ?? ""
        let url = try await url(input["url"])
        let id = UUID()
        let secret = WebhookSignature.generateSecret()
        let sealed = try box.seal(secret, purpose: Self.purpose(id))
        let endpoint: WebhookEndpoint = try await client.transaction(logger: logger) { db in
            // The app row is locked so that two creations cannot both pass the count; an app deleted
            // meanwhile is not found (not a foreign-key error).
            guard try await AppStore.lockForChange(db, ref: app.ref, logger: logger) else { throw AdminFailure.notFound("app") }
            guard try await EventStore.countEndpoints(db, appRef: app.ref, logger: logger) < settings.maxEndpointsPerApp else {
                throw AdminFailure.conflict(code: "too_many_webhooks", message: "an app may have at most \(settings.maxEndpointsPerApp) webhook endpoints")
            }
            guard let endpoint = try await EventStore.insertEndpoint(
                db, id: id, appRef: app.ref, url: url, types: types, description: description, sealed: sealed, logger: logger)
            else { throw AdminFailure.notFound("webhook") }
            try await audit(db, app: app, actor: actor, action: "webhook.create", id: id, detail: ["url": .string(url)])
            return endpoint
        }
        return (endpoint, secret)
    }

    public func list(app: App) async throws -> [WebhookEndpoint] {
        return try await client.withConnection { try await EventStore.listEndpoints($0, appRef: app.ref, logger: logger) }
    }

    public func get(app: App, id text: String) async throws -> WebhookEndpoint {
        let id = try endpointId(text)
        guard let endpoint = try await client.withConnection({ try await EventStore.endpoint($0, appRef: app.ref, id: id, logger: logger) })
        else { throw AdminFailure.notFound("webhook") }
        return endpoint
    }

    /// PATCH: any of `url`, `eventTypes`, `description`, `enabled`. Enabling clears the failure count.
    public func update(app: App, id text: String, patch: [String: JSONValue], actor: String) async throws -> WebhookEndpoint {
        let id = try endpointId(text)
        let allowed: Set<String> = ["url", "eventTypes", "description", "enabled"]
        if let unknown = patch.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw invalid(unknown, "unknown_field", "cannot be changed here")
        }
        let types = try patch["eventTypes"].map { try self.types($0) }
        let description = try description(patch["description"])
        var enabled: Bool?
        if let value = patch["enabled"] {
            guard let flag = value.boolValue else { throw invalid("enabled", "invalid_value", "must be true or false") }
            enabled = flag
        }
        var url: String?
        if patch["url"] != nil { url = try await self.url(patch["url"]) }
        return try await client.transaction(logger: logger) { db in
            guard let current = try await EventStore.endpoint(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("webhook")
            }
            let nowEnabled = enabled ?? current.enabled
            guard let updated = try await EventStore.updateEndpoint(
                db, id: id, url: url ?? current.url, types: types ?? current.eventTypes, description: description ?? current.description,
                enabled: nowEnabled, disabledReason: nowEnabled ? nil : (enabled == false ? "disabled by \(actor)" : current.disabledReason),
                logger: logger)
            else { throw AdminFailure.notFound("webhook") }
            if nowEnabled {
                try await EventStore.unpark(db, endpoint: id, logger: logger)
            } else {
                try await EventStore.park(db, endpoint: id, logger: logger)
            }
            try await audit(db, app: app, actor: actor, action: "webhook.update", id: id,
                            detail: ["fields": .array(patch.keys.sorted().map { .string($0) })])
            return updated
        }
    }

    public func disable(app: App, id: String, actor: String) async throws -> WebhookEndpoint {
        try await update(app: app, id: id, patch: ["enabled": .bool(false)], actor: actor)
    }

    public func delete(app: App, id text: String, actor: String) async throws {
        let id = try endpointId(text)
        try await client.transaction(logger: logger) { db in
            guard try await EventStore.deleteEndpoint(db, appRef: app.ref, id: id, logger: logger) else { throw AdminFailure.notFound("webhook") }
            try await audit(db, app: app, actor: actor, action: "webhook.delete", id: id)
        }
    }

    /// A new secret (shown only now); the previous one keeps signing for the overlap.
    public func rotateSecret(app: App, id text: String, actor: String) async throws -> (WebhookEndpoint, secret: String) {
        let id = try endpointId(text)
        let secret = WebhookSignature.generateSecret()
        let sealed = try box.seal(secret, purpose: Self.purpose(id))
        let expires = Date().addingTimeInterval(TimeInterval(settings.secretOverlapSeconds))
        let endpoint: WebhookEndpoint = try await client.transaction(logger: logger) { db in
            guard try await EventStore.endpoint(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) != nil,
                let endpoint = try await EventStore.rotateSecret(db, id: id, sealed: sealed, previousExpires: expires, logger: logger)
            else { throw AdminFailure.notFound("webhook") }
            try await audit(db, app: app, actor: actor, action: "webhook.rotate-secret", id: id)
            return endpoint
        }
        return (endpoint, secret)
    }

    public struct AttemptPage: Sendable {
        public let attempts: [WebhookAttempt]
        public let nextCursor: String?
    }

    public func attempts(app: App, id text: String, limit: Int, cursor: String?) async throws -> AttemptPage {
        let endpoint = try await get(app: app, id: text)
        let before = try Cursor.intOrNil(cursor)
        let items = try await client.withConnection {
            try await EventStore.attempts($0, endpoint: endpoint.id, before: before, limit: limit + 1, logger: logger)
        }
        let page = Array(items.prefix(limit))
        return AttemptPage(attempts: page, nextCursor: items.count > limit ? page.last.map { Cursor.encode($0.id) } : nil)
    }

    /// Queues one message again, with its webhook-id.
    public func replay(app: App, id text: String, messageId: String, actor: String) async throws {
        let id = try endpointId(text)
        guard let event = WebhookMessageId.parse(messageId) else { throw AdminFailure.notFound("message") }
        try await client.transaction(logger: logger) { db in
            try Self.requireEnabled(try await EventStore.endpoint(db, appRef: app.ref, id: id, logger: logger))
            guard try await EventStore.replay(db, endpoint: id, event: event, logger: logger) else { throw AdminFailure.notFound("message") }
            try await audit(db, app: app, actor: actor, action: "webhook.replay", id: id, detail: ["messageId": .string(messageId)])
        }
    }

    /// `{since}`: queues again every delivered or dead message of the endpoint since that time. Returns how many.
    public func replay(app: App, id text: String, input: [String: JSONValue], actor: String) async throws -> Int {
        let id = try endpointId(text)
        if let unknown = input.keys.sorted().first(where: { $0 != "since" }) {
            throw invalid(unknown, "unknown_field", "is not accepted here")
        }
        guard let text = input["since"]?.stringValue else { throw invalid("since", "required", "is required (an ISO 8601 date-time)") }
        guard let since = Self.parseDate(text) else { throw invalid("since", "invalid_value", "must be an ISO 8601 date-time from 1970 to 9999") }
        return try await client.transaction(logger: logger) { db in
            try Self.requireEnabled(try await EventStore.endpoint(db, appRef: app.ref, id: id, logger: logger))
            let count = try await EventStore.replay(db, endpoint: id, since: since, logger: logger)
            try await audit(db, app: app, actor: actor, action: "webhook.replay", id: id, detail: ["since": .string(text), "count": .int(count)])
            return count
        }
    }

    /// Replays go to enabled endpoints only (a disabled one would hold them parked).
    static func requireEnabled(_ endpoint: WebhookEndpoint?) throws {
        guard let endpoint else { throw AdminFailure.notFound("webhook") }
        guard endpoint.enabled else {
            throw AdminFailure.conflict(code: "webhook_disabled", message: "the endpoint is disabled; enable it before replaying")
        }
    }

    /// An RFC 3339 date-time (with or without fractional seconds), within a range PostgreSQL and PostgresNIO can hold.
    static func parseDate(_ text: String) -> Date? {
        guard text.count <= 64 else { return nil }
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        guard let date = withFraction.date(from: text) ?? plain.date(from: text) else { return nil }
        guard date.timeIntervalSince1970 >= 0, date.timeIntervalSince1970 < 253_402_300_800 else { return nil }
        return date
    }
}
