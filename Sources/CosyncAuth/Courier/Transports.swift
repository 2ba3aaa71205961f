import AsyncHTTPClient
import Foundation
import Logging
import NIOCore

/// One message as the transports see it.
public struct OutboundMessage: Sendable {
    public let id: Int64
    public let appId: String
    public let channel: MessageChannel
    public let to: String
    public let template: String
    public let subject: String
    public let text: String
    public let html: String
    public let sender: String
    public let senderName: String
    public let replyTo: String
    public var attachmentName: String? = nil
    public var attachmentData: Data? = nil
}

public struct DeliveryError: Error, CustomStringConvertible {
    public let description: String
    /// False when retrying cannot help (e.g. the provider rejected the request as malformed).
    public let retryable: Bool
}

public protocol EmailTransport: Sendable {
    /// `apiKey` is the app's own provider key (e-mail extension), when it has one.
    func send(_ message: OutboundMessage, apiKey: String?) async throws
    /// False for a transport that delivers nowhere (the log transport): the outbox row is then the
    /// only copy of the message, so its codes are kept.
    var deliversExternally: Bool { get }
}

public protocol SMSTransport: Sendable {
    func send(_ message: OutboundMessage, credentials: ProviderCredentials) async throws
    var deliversExternally: Bool { get }
}

extension EmailTransport {
    public var deliversExternally: Bool { true }
}

extension SMSTransport {
    public var deliversExternally: Bool { true }
}

/// Development transport: marks messages sent and logs that they were (not their bodies, which hold
/// codes; read them with GET /admin/v1/apps/{appId}/messages, where they stay since nothing left the server).
public struct LogTransport: EmailTransport, SMSTransport {
    let logger: Logger
    public init(logger: Logger) { self.logger = logger }

    public var deliversExternally: Bool { false }

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
        // SendGrid has no idempotency key: the outbox row id travels along (custom_args are echoed in
        // its event webhook and activity feed) so a resend after a crash can be traced to its row.
        payload["custom_args"] = .object(["cosync_message_id": .string(String(message.id)), "cosync_app_id": .string(message.appId)])
        if let name = message.attachmentName, let data = message.attachmentData {
            payload["attachments"] = .array([
                .object([
                    "content": .string(data.base64EncodedString()), "filename": .string(name),
                    "type": .string(name.hasSuffix(".png") ? "image/png" : "application/octet-stream"),
                    "disposition": .string("attachment"),
                ])
            ])
        }
        var request = HTTPClientRequest(url: "\(baseURL)/v3/mail/send")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONCoding.encode(JSONValue.object(payload))))
        let code = try await ProviderCall.status(of: request, on: http)
        guard (200..<300).contains(code) else {
            throw DeliveryError(description: "SendGrid answered HTTP \(code)", retryable: code == 429 || code >= 500)
        }
    }
}

/// Twilio Messages API: `POST {base}/2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded
/// `To`, `From`, `Body`, HTTP Basic with the app's AccountSid and auth token. The base URL is
/// configurable (tests point it at a fake receiver). The Messages API takes no idempotency key, so a
/// message resent after a worker crash (see DeliveryWorker) cannot be deduplicated by Twilio.
public struct TwilioTransport: SMSTransport {
    let http: HTTPClient
    let baseURL: String

    public init(http: HTTPClient = .shared, baseURL: String) {
        self.http = http
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
    }

    /// The app's credentials are complete enough to send.
    public static func canSend(with credentials: ProviderCredentials) -> Bool {
        !(credentials.TWILIOAccountSid ?? "").isEmpty && !(credentials.TWILIOToken ?? "").isEmpty
            && !(credentials.TWILIOPhoneNumber ?? "").isEmpty
    }

    static let formValueCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")

    static func form(_ pairs: [(String, String)]) -> String {
        pairs.map { key, value in
            "\(key)=\(value.addingPercentEncoding(withAllowedCharacters: formValueCharacters) ?? "")"
        }.joined(separator: "&")
    }

    public func send(_ message: OutboundMessage, credentials: ProviderCredentials) async throws {
        guard Self.canSend(with: credentials), let sid = credentials.TWILIOAccountSid, let token = credentials.TWILIOToken,
            let from = credentials.TWILIOPhoneNumber
        else {
            throw DeliveryError(description: "the app has no complete Twilio credentials", retryable: false)
        }
        guard let account = sid.addingPercentEncoding(withAllowedCharacters: Self.formValueCharacters) else {
            throw DeliveryError(description: "the Twilio AccountSid is not usable in a URL", retryable: false)
        }
        var request = HTTPClientRequest(url: "\(baseURL)/2010-04-01/Accounts/\(account)/Messages.json")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Basic \(Data("\(sid):\(token)".utf8).base64EncodedString())")
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: Self.form([("To", message.to), ("From", from), ("Body", message.text)])))
        let code = try await ProviderCall.status(of: request, on: http)
        guard (200..<300).contains(code) else {
            throw DeliveryError(description: "Twilio answered HTTP \(code)", retryable: code == 429 || code >= 500)
        }
    }
}

/// One provider call under one deadline. AsyncHTTPClient's `timeout` covers only the wait for the
/// response head; a provider that then trickles its body would hold the send past the outbox lease
/// (60 s) and the message would be claimed and sent again. So the whole call, body included, gets
/// `deadline` (20 s), well inside the lease.
enum ProviderCall {
    static let deadline: Duration = .seconds(20)

    /// The HTTP status of `request` (its body read and dropped), or a retryable `DeliveryError` when the
    /// call does not finish within `deadline`.
    static func status(of request: HTTPClientRequest, on http: HTTPClient) async throws -> Int {
        try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                let response = try await http.execute(request, timeout: .seconds(15))
                _ = try? await response.body.collect(upTo: 64 * 1024)
                return Int(response.status.code)
            }
            group.addTask {
                try await Task.sleep(for: deadline)
                throw DeliveryError(description: "the provider did not answer within \(deadline)", retryable: true)
            }
            defer { group.cancelAll() }
            guard let code = try await group.next() else { throw CancellationError() }
            return code
        }
    }
}
