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

}

/// The `webhook-id` of an event: the same for every endpoint, retry and replay.
public enum WebhookMessageId {
    public static func of(_ eventId: UUID) -> String { "msg_" + eventId.uuidString.lowercased() }
    public static func parse(_ text: String) -> UUID? {
        guard text.hasPrefix("msg_") else { return nil }
        return UUID(uuidString: String(text.dropFirst(4)))
    }
}
