import Foundation
import Logging
import PostgresNIO

/// One message of an endpoint: an event and where its delivery stands (never its body).
public struct WebhookDelivery: Sendable {
    public let id: Int64
    public let messageId: String
    public let eventType: String
    /// `pending`, `sending`, `delivered` or `dead`.
    public let status: String
    public let attempts: Int
    public let lastError: String?
    public let createdAt: Date
    public let deliveredAt: Date?
    public let nextAttempt: Date
}

/// The delivery log of an endpoint, message by message, with each message's attempts (the Portal's
/// webhook pages, issue 23). Reads only; a replay is `replay(app:id:messageId:actor:)`.
extension WebhookAdministration {
    public struct DeliveryPage: Sendable {
        public let deliveries: [WebhookDelivery]
        public let nextCursor: String?
    }

    public func deliveries(app: App, id text: String, limit: Int, cursor: String?) async throws -> DeliveryPage {
        let endpoint = try await get(app: app, id: text)
        let before = try Cursor.intOrNil(cursor)
        let items = try await client.withConnection {
            try await EventStore.deliveries($0, endpoint: endpoint.id, before: before, limit: limit + 1, logger: logger)
        }
        let page = Array(items.prefix(limit))
        return DeliveryPage(deliveries: page, nextCursor: items.count > limit ? page.last.map { Cursor.encode($0.id) } : nil)
    }

    /// One message of the endpoint and its attempts, oldest first (at most 200).
    public func delivery(app: App, id text: String, messageId: String) async throws -> (WebhookDelivery, [WebhookAttempt]) {
        let endpoint = try await get(app: app, id: text)
        guard let event = WebhookMessageId.parse(messageId) else { throw AdminFailure.notFound("message") }
        return try await client.withConnection { db in
            guard let delivery = try await EventStore.delivery(db, endpoint: endpoint.id, event: event, logger: logger) else {
                throw AdminFailure.notFound("message")
            }
            let attempts = try await EventStore.deliveryAttempts(db, delivery: delivery.id, limit: 200, logger: logger)
            return (delivery, attempts)
        }
    }
}
