import CosyncAuth
import Foundation
import Hummingbird
import Logging
import NIOCore

/// A SendGrid stand-in on 127.0.0.1: accepts `POST /v3/mail/send` like the real API (202) and keeps
/// what it received, so tests read codes from the e-mails the server really sent over HTTP.
actor FakeSendGrid {
    struct Mail: Sendable {
        let to: String
        let from: String
        let subject: String
        let text: String
        let html: String
        let authorization: String
        /// (filename, type, base64 content) of each attachment.
        var attachments: [(name: String, type: String, content: String)] = []
        /// `reply_to.email` ("" when absent) and `custom_args.cosync_message_id` (the outbox row id).
        var replyTo = ""
        var messageId = ""
    }

    /// How the fake answers mail to one recipient: fail with an HTTP status, or answer 202 late.
    enum Behaviour: Sendable {
        case fail(status: Int)
        case delay(Duration)
    }

    private(set) var mails: [Mail] = []
    private(set) var port: Int = 0
    private var behaviours: [String: Behaviour] = [:]
    /// Requests answered with a failure, per recipient.
    private(set) var refused: [String: Int] = [:]

    func record(_ mail: Mail) { mails.append(mail) }
    func setPort(_ port: Int) { self.port = port }
    func setBehaviour(_ behaviour: Behaviour?, for recipient: String) { behaviours[recipient] = behaviour }
    func behaviour(for recipient: String) -> Behaviour? { behaviours[recipient] }
    func countRefusal(_ recipient: String) { refused[recipient, default: 0] += 1 }

    func mails(to recipient: String) -> [Mail] { mails.filter { $0.to == recipient } }

    /// Waits until `count` mails to `recipient` arrived (or the timeout passes) and returns them.
    func waitForMails(to recipient: String, count: Int = 1, timeout: Duration = .seconds(10)) async throws -> [Mail] {
        try await waitForItems(count: count, timeout: timeout) { await self.mails(to: recipient) }
    }

    /// Starts the receiver and returns once it listens.
    static func start() async throws -> FakeSendGrid {
        let fake = FakeSendGrid()
        let router = Router()
        router.post("v3/mail/send") { request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let json = (try? JSONDecoder().decode(JSONValue.self, from: Data(body.readableBytesView))) ?? .null
            let contents = json["content"]?.arrayValue ?? []
            func content(_ type: String) -> String {
                contents.first(where: { $0["type"]?.stringValue == type })?["value"]?.stringValue ?? ""
            }
            let to = json["personalizations"]?.arrayValue?.first?["to"]?.arrayValue?.first?["email"]?.stringValue ?? ""
            let attachments = (json["attachments"]?.arrayValue ?? []).map {
                (name: $0["filename"]?.stringValue ?? "", type: $0["type"]?.stringValue ?? "", content: $0["content"]?.stringValue ?? "")
            }
            switch await fake.behaviour(for: to) {
            case .fail(let status):
                await fake.countRefusal(to)
                return Response(status: .init(code: status))
            case .delay(let duration):
                try await Task.sleep(for: duration)
            case nil: break
            }
            await fake.record(Mail(
                to: to, from: json["from"]?["email"]?.stringValue ?? "", subject: json["subject"]?.stringValue ?? "",
                text: content("text/plain"), html: content("text/html"),
                authorization: request.headers[.authorization] ?? "", attachments: attachments,
                replyTo: json["reply_to"]?["email"]?.stringValue ?? "",
                messageId: json["custom_args"]?["cosync_message_id"]?.stringValue ?? ""))
            return Response(status: .accepted)
        }
        await fake.setPort(try await startFakeServer(router, label: "fake-sendgrid"))
        return fake
    }
}
