import Foundation
import Logging
import PostgresNIO

/// Records events in the caller's transaction. One statement (`EventStore.insert`) writes the event
/// (its body is fixed here, so every endpoint and every retry sends the same bytes) and one delivery
/// per enabled endpoint of the app subscribed to its type. A rolled-back transaction leaves neither;
/// a committed one leaves both, whatever happens to the node afterwards.
public enum Events {
    /// Keys a payload must never carry, whatever a call site passes: secrets stay out of webhooks.
    static let forbiddenKeys: Set<String> = [
        "password", "code", "token", "secret", "accesstoken", "jwt", "logintoken", "signupcode", "appsecret", "apptoken",
    ]

    /// Records `type` for `app`. `data` holds ids and metadata only; `appId` and `userId` are added.
    public static func record(
        _ db: PostgresConnection, app: App, type: EventType, userId: UUID?, data: [String: JSONValue] = [:], logger: Logger
    ) async throws {
        var fields = redactingHandles(data.filter { !forbiddenKeys.contains($0.key.lowercased()) })
        fields["appId"] = .string(app.appId)
        if let userId { fields["userId"] = .string(userId.uuidString.lowercased()) }
        let now = Date()
        let payload: JSONValue = .object([
            "type": .string(type.rawValue), "timestamp": .string(ISO8601.milliseconds(now)), "data": .object(fields),
        ])
        let body = String(decoding: try JSONCoding.encode(payload), as: UTF8.self)
        try await EventStore.insert(db, appRef: app.ref, type: type, userId: userId, body: body, logger: logger)
    }

    /// Handle-valued fields with an anonymous handle replaced by its redaction (`Identifiers.redacted`):
    /// that handle alone signs its account in. Shared with the audit log.
    static func redactingHandles(_ fields: [String: JSONValue]) -> [String: JSONValue] {
        var out = fields
        for (key, value) in fields where key.lowercased().hasSuffix("handle") {
            if case .string(let handle) = value { out[key] = .string(Identifiers.redacted(handle)) }
        }
        return out
    }

    /// The same for a user: its id and handle go into the payload.
    public static func record(
        _ db: PostgresConnection, app: App, type: EventType, user: User, data: [String: JSONValue] = [:], logger: Logger
    ) async throws {
        var fields = data
        fields["handle"] = .string(user.handle)
        try await record(db, app: app, type: type, userId: user.id, data: fields, logger: logger)
    }

    /// For an event with no transaction of its own to join (a failed login): a short one.
    public static func record(
        _ client: PostgresClient, app: App, type: EventType, userId: UUID?, data: [String: JSONValue] = [:], logger: Logger
    ) async throws {
        try await client.withConnection { db in
            try await record(db, app: app, type: type, userId: userId, data: data, logger: logger)
        }
    }
}

extension Events {
    /// `session.revoked` for the sessions a change ended (nothing when it ended none), with why.
    static func sessionsRevoked(
        _ db: PostgresConnection, app: App, user: User, _ ended: [UUID], reason: String, logger: Logger
    ) async throws {
        guard !ended.isEmpty else { return }
        try await record(
            db, app: app, type: .sessionRevoked, user: user,
            data: ["sessionIds": .array(ended.map { .string($0.uuidString.lowercased()) }), "reason": .string(reason)], logger: logger)
    }
}
