import CosyncAuth
import Foundation

// The JSON shapes of the admin API (and of `cosyncauth app …`): how the core's values go on the wire.
// The core returns typed values; only this module knows their JSON.

extension AppRecordStore.PendingRecord {
    public func json() -> [String: JSONValue] {
        var object: [String: JSONValue] = [
            "id": .string(id.uuidString.lowercased()), "handle": .string(handle), "status": .string(status),
            "locale": .string(locale), "metaData": metaData,
            "expiresAt": .string(ISO8601.milliseconds(expiresAt)), "createdAt": .string(ISO8601.milliseconds(createdAt)),
        ]
        if let senderHandle { object["senderHandle"] = .string(senderHandle) }
        return object
    }
}

extension AppRecordStore.Message {
    public func json() -> [String: JSONValue] {
        [
            "id": .int(Int(id)), "channel": .string(channel), "to": .string(to), "template": .string(template),
            "subject": .string(subject), "body": .string(body), "status": .string(status), "attempts": .int(attempts),
            "createdAt": .string(ISO8601.milliseconds(createdAt)),
            "sentAt": sentAt.map { .string(ISO8601.milliseconds($0)) } ?? .null,
        ]
    }
}

extension WebhookEndpoint {
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

extension WebhookAttempt {
    public func json() -> [String: JSONValue] {
        [
            "id": .int(Int(id)), "messageId": .string(messageId), "eventType": .string(eventType), "attempt": .int(attempt),
            "httpStatus": httpStatus.map { .int($0) } ?? .null, "error": error.map { .string($0) } ?? .null,
            "latencyMs": .int(latencyMs), "createdAt": .string(ISO8601.milliseconds(createdAt)),
        ]
    }
}

extension AppView {
    public func json() throws -> [String: JSONValue] {
        var object = try JSONCoding.tree(state.settings).objectValue ?? [:]
        object["product"] = .string(product.rawValue)
        object["appId"] = .string(appId)
        object["name"] = .string(state.name)
        object["status"] = .string(state.status.rawValue)
        if let appToken { object["appToken"] = .string(appToken) }
        if let rawPublicKey { object["rawPublicKey"] = .string(rawPublicKey) }
        object["credentials"] = .object(state.credentials.presence.mapValues { .bool($0) })
        object["createdAt"] = .string(ISO8601.milliseconds(createdAt))
        object["updatedAt"] = .string(ISO8601.milliseconds(updatedAt))
        return object
    }
}

extension AppRecords.TemplateView {
    public func json() -> [String: JSONValue] {
        [
            "template": .string(name), "locale": .string(locale), "subject": .string(template.subject),
            "html": .string(template.html), "text": .string(template.text), "replyTo": .string(template.replyTo),
            "localeLinkText": .string(template.localeLinkText), "isDefault": .bool(isDefault),
        ]
    }
}

extension User {
    public func json() -> [String: JSONValue] {
        var object: [String: JSONValue] = [
            "userId": .string(id.uuidString.lowercased()),
            "handle": .string(handle),
            "userName": userName.map { .string($0) } ?? .null,
            "locale": .string(locale),
            "status": .string(status.rawValue),
            "loginProvider": .string(loginProvider),
            "metaData": .object(metaData),
            "phone": phone.map { .string($0) } ?? .null,
            "phoneVerified": .bool(phoneVerified),
            "twoFactorPhoneVerification": .bool(twoFactorPhone),
            "twoFactorGoogleVerification": .bool(twoFactorGoogle),
            "hasPassword": .bool(passwordHash != nil),
            "createdAt": .string(ISO8601.milliseconds(createdAt)),
            "updatedAt": .string(ISO8601.milliseconds(updatedAt)),
        ]
        object["lastLogin"] = lastLogin.map { .string(ISO8601.milliseconds($0)) } ?? .null
        return object
    }
}

extension Session {
    public func json() -> [String: JSONValue] {
        [
            "sessionId": .string(id.uuidString.lowercased()),
            "method": .string(method.rawValue),
            "provenBy": .string(provenBy.rawValue),
            "provenAt": .string(ISO8601.milliseconds(lastProof.at)),
            "clientAddress": clientAddress.map { .string($0) } ?? .null,
            "userAgent": userAgent.map { .string($0) } ?? .null,
            "createdAt": .string(ISO8601.milliseconds(createdAt)),
            "lastSeenAt": .string(ISO8601.milliseconds(lastSeenAt)),
            "expiresAt": .string(ISO8601.milliseconds(expiresAt)),
        ]
    }
}

extension Identity {
    public func json() -> [String: JSONValue] {
        [
            "identityId": .string(id.uuidString.lowercased()),
            "kind": .string(kind.rawValue),
            "subject": .string(subject),
            "email": email.map { .string($0) } ?? .null,
            "createdAt": .string(ISO8601.milliseconds(createdAt)),
            "lastUsedAt": lastUsedAt.map { .string(ISO8601.milliseconds($0)) } ?? .null,
        ]
    }
}
