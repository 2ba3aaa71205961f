import Foundation
import Logging
import PostgresNIO

/// Writes e-mails and SMS to the `messages` outbox, inside the caller's transaction, so a message
/// exists exactly when the state change it belongs to was committed. The delivery worker sends them.
public struct Outbox: Sendable {
    /// The operator's sender of e-mail (COSYNC_EMAIL_FROM). The From of an e-mail is decided when it is
    /// sent (DeliveryWorker.addresses), not stored here.
    public let defaultSender: String
    /// Public base URL, for the signup link.
    public let publicURL: String

    public init(defaultSender: String, publicURL: String) {
        self.defaultSender = defaultSender
        self.publicURL = publicURL
    }

    /// The template for (name, locale): the app's own, else the app's EN one, else the built-in.
    static func template(_ db: PostgresConnection, appRef: Int64, name: String, locale: String, logger: Logger) async throws -> EmailTemplate {
        if let own = try await AppRecordStore.template(db, appRef: appRef, name: name, locale: locale, logger: logger) { return own }
        if locale != Locales.defaultLocale,
            let english = try await AppRecordStore.template(db, appRef: appRef, name: name, locale: Locales.defaultLocale, logger: logger)
        {
            return english
        }
        guard let builtIn = EmailTemplate.builtIn(name) else { throw EndUserError.internalError }
        return builtIn
    }

    /// Replaces `%NAME%` placeholders. In HTML the values are escaped (the legacy server did not).
    static func render(_ text: String, _ values: [String: String], html: Bool) -> String {
        var out = text
        for (key, value) in values {
            out = out.replacingOccurrences(of: "%\(key)%", with: html && key != "LINK" ? escapeHTML(value) : value)
        }
        return out
    }

    static func escapeHTML(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    /// Queues an e-mail rendered from the app's template. `values` fills `%CODE%`, `%HANDLE%`, `%LINK%`
    /// (and `%APP_NAME%`, added here).
    public func email(
        _ db: PostgresConnection, app: App, template name: String, locale: String, to: String,
        values: [String: String], attachment: (name: String, data: [UInt8])? = nil, logger: Logger
    ) async throws {
        let template = try await Self.template(db, appRef: app.ref, name: name, locale: locale, logger: logger)
        let rendered = Self.compose(template, name: name, appName: app.name, values: values)
        // `sender` is the From the tenant asks for (its e-mail extension address), `reply_to` the
        // template's. The delivery worker decides at send time, when it knows which provider key it
        // uses: only with the app's own key may `sender` be the From; otherwise From is the operator's
        // COSYNC_EMAIL_FROM and the tenant's address only becomes Reply-To (DeliveryWorker.addresses).
        let settings = app.settings
        let sender = settings.emailExtension ? settings.emailExtensionSenderEmail : ""
        try await OutboxStore.insertEmail(
            db, appRef: app.ref, to: to, template: name, subject: rendered.subject, text: rendered.text, html: rendered.html, sender: sender, senderName: app.name,
            replyTo: template.replyTo, attachmentName: attachment?.name, attachmentData: attachment.map { Data($0.data) }, logger: logger)
    }

    /// Queues an SMS from the app's `sms` template (its `html` field is the SMS text), counted against
    /// the app's `smsDailyLimit` in the same transaction: over the limit it throws `smsLimitReached`
    /// and the caller's transaction (and so the SMS) is rolled back.
    /// One number gets at most `perNumberPerHour` SMS an hour, so one user cannot burn the app's quota.
    public func sms(
        _ db: PostgresConnection, app: App, locale: String, to: String, values: [String: String], perNumberPerHour: Int,
        logger: Logger
    ) async throws {
        guard try await SMSQuotaStore.recentSMS(db, appRef: app.ref, to: to, logger: logger) < perNumberPerHour,
            try await SMSQuotaStore.takeSMSQuota(db, appRef: app.ref, dailyLimit: app.settings.smsDailyLimit, logger: logger)
        else {
            throw EndUserError.smsLimitReached
        }
        let template = try await Self.template(db, appRef: app.ref, name: "sms", locale: locale, logger: logger)
        let text = Self.compose(template, name: "sms", appName: app.name, values: values).text
        try await OutboxStore.insertSMS(db, appRef: app.ref, to: to, text: text, logger: logger)
    }

    /// The template name of a Portal invite in the outbox (a message of no app).
    public static let portalInviteTemplate = "portalInvite"

    /// Queues a Portal e-mail: it belongs to no app (no app template, no tenant sender), so it is sent
    /// from the operator's COSYNC_EMAIL_FROM. `text` and `html` are complete (the caller escapes the HTML).
    func portalEmail(
        _ db: PostgresConnection, template: String, to: String, subject: String, text: String, html: String, logger: Logger
    ) async throws {
        try await OutboxStore.insertEmail(
            db, appRef: nil, to: to, template: template, subject: subject, text: text, html: html, sender: "", senderName: "Cosync Portal",
            replyTo: "", attachmentName: nil, attachmentData: nil, logger: logger)
    }

    static func stripTags(_ html: String) -> String {
        var out = ""
        var inTag = false
        for c in html {
            if c == "<" { inTag = true } else if c == ">" { inTag = false } else if !inTag { out.append(c) }
        }
        return out
    }
}
