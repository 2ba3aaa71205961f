import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// Sends queued outbox rows, one message at a time. Any number of nodes (and `lanes` loops per node)
/// may run it. Each message goes through three separate steps:
///
/// 1. **claim**: one statement picks the oldest due row with `FOR UPDATE SKIP LOCKED`, sets it
///    `sending`, counts the attempt and moves `next_attempt` forward by `lease` (the lease), and commits;
/// 2. **send**: the provider call, outside any transaction;
/// 3. **mark**: one statement sets it `sent` (and redacts its codes) or back to `queued` with backoff
///    (5 s doubling, at most 1 h), or `failed` after `maxAttempts` or a non-retryable answer.
///
/// A worker that dies between 1 and 3 leaves the row `sending`; when its lease runs out another worker
/// claims it again. So a crash resends at most the one message in flight, and never a message already
/// marked `sent`. Neither SendGrid's `v3/mail/send` nor Twilio's Messages API takes an idempotency key,
/// so that one resend cannot be deduplicated by the provider; each e-mail carries the outbox row id in
/// SendGrid `custom_args` (`cosync_message_id`) so a duplicate can be traced.
///
/// Messages of a suspended app are not claimed: they stay `queued` and go out once it is active again.
public struct DeliveryWorker: Service {
    let client: PostgresClient
    let box: SecretBox
    let email: any EmailTransport
    let sms: any SMSTransport
    let logger: Logger
    let pollInterval: Duration
    let maxAttempts: Int
    let batchSize: Int
    /// The operator's sender address (COSYNC_EMAIL_FROM): the From of every e-mail, unless the app
    /// sends through its own provider key.
    let operatorFrom: String
    /// How long a claimed message is reserved for its worker. Longer than the transports' 15 s timeout.
    let leaseSeconds: Int
    /// Concurrent claim-send-mark loops in `run()`, so one slow provider call does not hold the rest.
    let lanes: Int
    /// The node's wake-up for new messages (`NOTIFY cosync_work, 'outbox'`); nil: poll.
    var wake: WorkSignal? = nil
    /// With notifications coming, how often an idle worker still looks (`COSYNC_WORKER_IDLE_POLL_MS`).
    var idlePoll: Duration = .seconds(5)

    public init(
        client: PostgresClient, box: SecretBox, email: any EmailTransport, sms: any SMSTransport, logger: Logger,
        operatorFrom: String, pollInterval: Duration = .milliseconds(500), maxAttempts: Int = 8, batchSize: Int = 20,
        leaseSeconds: Int = 60, lanes: Int = 4
    ) {
        self.client = client
        self.box = box
        self.email = email
        self.sms = sms
        self.logger = logger
        self.operatorFrom = operatorFrom
        self.pollInterval = pollInterval
        self.maxAttempts = max(1, maxAttempts)
        self.batchSize = max(1, batchSize)
        self.leaseSeconds = max(1, leaseSeconds)
        self.lanes = max(1, lanes)
    }

    /// Templates whose body is a long-lived secret (the TOTP key and its QR code): once sent, the
    /// outbox keeps only the envelope, whatever the transport.
    static let redactedAfterSending: Set<String> = ["qrCode"]
    /// Templates that carry a one-time code or link: redacted once a real transport delivered them (or
    /// delivery finally failed). With the log transport nothing left the server, so the outbox keeps
    /// them: it is where a developer reads the code.
    static let redactedAfterDelivery: Set<String> = ["signUp", "signUpLink", "invite", "resetPassword", "sms", "qrCode", Outbox.portalInviteTemplate]
    static let redactedBody = "[redacted after delivery]"
    /// How long a shutdown waits for the message in flight: the provider deadline (20 s) plus the mark.
    static let inFlightLimit: Duration = .seconds(22)

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    // Idle, the first lane looks every `idlePoll` (retries fall due without a notification);
                    // the others only when notified or once a minute.
                    await runClaimLane(
                        pollInterval: pollInterval, inFlightLimit: Self.inFlightLimit, wake: wake,
                        idlePoll: lane == 0 ? idlePoll : .seconds(60), claim: { try await claim() },
                        deliver: { try await deliver($0) })
                }
            }
        }
    }

    /// Sends due messages one by one, at most `batchSize`. Returns how many were handled.
    @discardableResult
    public func deliverDue() async throws -> Int {
        var handled = 0
        while handled < batchSize, try await deliverNext() { handled += 1 }
        return handled
    }

    /// Claims one due message, sends it and records the outcome. False when nothing was due.
    @discardableResult
    public func deliverNext() async throws -> Bool {
        guard let claimed = try await claim() else { return false }
        try await deliver(claimed)
        return true
    }

    /// A claimed message (`OutboxStore.ClaimedMessage`).
    typealias Claimed = OutboxStore.ClaimedMessage

    /// Step 1: takes the lease on the oldest due message (queued and due, or `sending` whose lease ran
    /// out) of an app that is not suspended. One statement, so one short transaction.
    func claim() async throws -> Claimed? {
        try await client.withConnection { try await OutboxStore.claim($0, leaseSeconds: leaseSeconds, logger: logger) }
    }

    /// The From and Reply-To of an e-mail. Only an app that sends through its own provider key may
    /// choose its From (`requestedFrom`, its `emailExtensionSenderEmail`); otherwise From is the
    /// operator's address and the tenant's address (the template's `replyTo`, else the requested From)
    /// only becomes Reply-To.
    static func addresses(requestedFrom: String, replyTo: String, operatorFrom: String, ownKey: Bool) -> (from: String, replyTo: String) {
        if ownKey, !requestedFrom.isEmpty { return (requestedFrom, replyTo) }
        let tenant = replyTo.isEmpty ? requestedFrom : replyTo
        return (operatorFrom, tenant.lowercased() == operatorFrom.lowercased() ? "" : tenant)
    }

    /// Steps 2 and 3 for one claimed message.
    func deliver(_ claimed: Claimed) async throws {
        let message = claimed.message
        if claimed.attempt > maxAttempts {
            // Only a lease that ran out (the worker died while sending) gets a row here: stop retrying.
            try await markFailed(claimed, reason: "gave up: the delivery lease ran out \(claimed.attempt - 1) times", final: true)
            return
        }
        let delivered: Bool
        do {
            let credentials = try claimed.sealed.map {
                try JSONDecoder().decode(ProviderCredentials.self, from: try box.open($0, purpose: .appCredentials(appId: message.appId)))
            } ?? ProviderCredentials()
            switch message.channel {
            case .sms:
                try await sms.send(message, credentials: credentials)
                delivered = sms.deliversExternally
            case .email:
                let appKey = claimed.settings.emailExtension ? credentials.emailExtensionAPIKey.flatMap { $0.isEmpty ? nil : $0 } : nil
                let (from, replyTo) = Self.addresses(
                    requestedFrom: message.sender, replyTo: message.replyTo, operatorFrom: operatorFrom, ownKey: appKey != nil)
                var outgoing = OutboundMessage(
                    id: message.id, appId: message.appId, channel: message.channel, to: message.to, template: message.template,
                    subject: message.subject, text: message.text, html: message.html, sender: from, senderName: message.senderName,
                    replyTo: replyTo)
                outgoing.attachmentName = message.attachmentName
                outgoing.attachmentData = message.attachmentData
                try await email.send(outgoing, apiKey: appKey)
                delivered = email.deliversExternally
            }
        } catch {
            let reason = (error as? DeliveryError)?.description ?? "\(type(of: error))"
            let retryable = (error as? DeliveryError)?.retryable ?? true
            try await markFailed(claimed, reason: reason, final: !retryable || claimed.attempt >= maxAttempts)
            return
        }
        let redact = Self.redactedAfterSending.contains(message.template)
            || (delivered && Self.redactedAfterDelivery.contains(message.template))
        let marked = try await client.withConnection {
            try await OutboxStore.markSent(
                $0, id: message.id, attempt: claimed.attempt, redact: redact, redactedBody: Self.redactedBody, logger: logger)
        }
        if !marked {
            // The lease ran out during the send and another worker took the row over: it marks it.
            logger.warning("message sent after its lease ran out", metadata: ["id": "\(message.id)", "app": "\(message.appId)"])
        }
    }

    /// Step 3 on failure: back to `queued` with backoff, or `failed` (a code-carrying body is then
    /// redacted too: it will never be delivered).
    func markFailed(_ claimed: Claimed, reason: String, final: Bool) async throws {
        let message = claimed.message
        let delay = min(5 * (1 << min(max(claimed.attempt, 0), 10)), 3600)
        let redact = final && Self.redactedAfterDelivery.contains(message.template)
            && (message.channel == .sms ? sms.deliversExternally : email.deliversExternally)
        try await client.withConnection {
            try await OutboxStore.markFailed(
                $0, id: message.id, attempt: claimed.attempt, reason: reason, final: final, delaySeconds: delay, redact: redact,
                redactedBody: Self.redactedBody, logger: logger)
        }
        Telemetry.deliveryFailure(channel: message.channel.rawValue, final: final)
        logger.warning(
            "message delivery failed",
            metadata: ["id": "\(message.id)", "app": "\(message.appId)", "reason": "\(reason)", "final": "\(final)"])
    }
}
