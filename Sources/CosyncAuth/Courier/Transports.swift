import AsyncHTTPClient
import Foundation
import Logging
import NIOCore

/// One message as the transports see it.
public struct OutboundMessage: Sendable {
    public let id: Int64
    public let appId: String
    public let channel: String
    public let to: String
    public let template: String
    public let subject: String
    public let text: String
    public let html: String
    public let sender: String
    public let senderName: String
    public let replyTo: String
}

public struct DeliveryError: Error, CustomStringConvertible {
    public let description: String
    /// False when retrying cannot help (e.g. the provider rejected the request as malformed).
    public let retryable: Bool
}

public protocol EmailTransport: Sendable {
    /// `apiKey` is the app's own provider key (e-mail extension), when it has one.
    func send(_ message: OutboundMessage, apiKey: String?) async throws
}

public protocol SMSTransport: Sendable {
    func send(_ message: OutboundMessage, credentials: ProviderCredentials) async throws
}

/// Development transport: marks messages sent and logs that they were (not their bodies, which hold
/// codes; read them with GET /admin/v1/apps/{appId}/messages).
public struct LogTransport: EmailTransport, SMSTransport {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    public func send(_ message: OutboundMessage, apiKey: String?) async throws {
        logger.info("e-mail delivered to the log transport", metadata: ["id": "\(message.id)", "app": "\(message.appId)", "template": "\(message.template)"])
    }

    public func send(_ message: OutboundMessage, credentials: ProviderCredentials) async throws {
        logger.info("SMS delivered to the log transport", metadata: ["id": "\(message.id)", "app": "\(message.appId)"])
    }
}

/// SendGrid v3 `POST /v3/mail/send`. The base URL is configurable (tests point it at a fake receiver).
public struct SendGridTransport: EmailTransport {
    let http: HTTPClient
    let baseURL: String
    let apiKey: String?

    public init(http: HTTPClient = .shared, baseURL: String, apiKey: String?) {
        self.http = http
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.apiKey = apiKey
    }

    public func send(_ message: OutboundMessage, apiKey appKey: String?) async throws {
        guard let key = appKey ?? apiKey else {
            throw DeliveryError(description: "no SendGrid API key is configured", retryable: false)
        }
        var from: [String: JSONValue] = ["email": .string(message.sender)]
        if !message.senderName.isEmpty { from["name"] = .string(message.senderName) }
        var payload: [String: JSONValue] = [
            "personalizations": .array([.object(["to": .array([.object(["email": .string(message.to)])])])]),
            "from": .object(from),
            "subject": .string(message.subject),
            "content": .array([
                .object(["type": .string("text/plain"), "value": .string(message.text)]),
                .object(["type": .string("text/html"), "value": .string(message.html)]),
            ]),
        ]
        if !message.replyTo.isEmpty { payload["reply_to"] = .object(["email": .string(message.replyTo)]) }
        var request = HTTPClientRequest(url: "\(baseURL)/v3/mail/send")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONCoding.encode(JSONValue.object(payload))))
        let response = try await http.execute(request, timeout: .seconds(15))
        _ = try? await response.body.collect(upTo: 64 * 1024)
        guard (200..<300).contains(Int(response.status.code)) else {
            let code = Int(response.status.code)
            throw DeliveryError(description: "SendGrid answered HTTP \(code)", retryable: code == 429 || code >= 500)
        }
    }
}
