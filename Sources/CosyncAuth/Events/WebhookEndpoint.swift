import Foundation

/// A webhook endpoint of an app, as the admin API shows it (never its secrets).
public struct WebhookEndpoint: Sendable {
    public let id: UUID
    public let url: String
    public let eventTypes: [String]
    public let description: String
    public let enabled: Bool
    public let disabledReason: String?
    public let consecutiveFailures: Int
    public let previousSecretExpiresAt: Date?
    public let createdAt: Date
    public let updatedAt: Date

    public func json() -> [String: JSONValue] {
        [
            "webhookId": .string(id.uuidString.lowercased()), "url": .string(url),
            "eventTypes": .array(eventTypes.map { .string($0) }), "description": .string(description),
            "enabled": .bool(enabled), "disabledReason": disabledReason.map { .string($0) } ?? .null,
            "consecutiveFailures": .int(consecutiveFailures),
            "previousSecretExpiresAt": previousSecretExpiresAt.map { .string(ISO8601.milliseconds($0)) } ?? .null,
            "createdAt": .string(ISO8601.milliseconds(createdAt)), "updatedAt": .string(ISO8601.milliseconds(updatedAt)),
        ]
    }
}

/// One logged delivery attempt.
public struct WebhookAttempt: Sendable {
    public let id: Int64
    public let messageId: String
    public let eventType: String
    public let attempt: Int
    public let httpStatus: Int?
    public let error: String?
    public let latencyMs: Int
    public let createdAt: Date

    public func json() -> [String: JSONValue] {
        [
            "id": .int(Int(id)), "messageId": .string(messageId), "eventType": .string(eventType), "attempt": .int(attempt),
            "httpStatus": httpStatus.map { .int($0) } ?? .null, "error": error.map { .string($0) } ?? .null,
            "latencyMs": .int(latencyMs), "createdAt": .string(ISO8601.milliseconds(createdAt)),
        ]
    }
}

/// The `webhook-id` of an event: the same for every endpoint, retry and replay.
public enum WebhookMessageId {
    public static func of(_ eventId: UUID) -> String { "msg_" + eventId.uuidString.lowercased() }
    public static func parse(_ text: String) -> UUID? {
        guard text.hasPrefix("msg_") else { return nil }
        return UUID(uuidString: String(text.dropFirst(4)))
    }
}
