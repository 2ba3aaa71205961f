import Foundation

extension Outbox {
    /// A message as the courier renders it from a template: what `email(…)` queues (and, for `sms`, what
    /// `sms(…)` queues; for `clickThrough`, the page the signup link shows).
    public struct Rendered: Sendable, Equatable {
        public let subject: String
        public let html: String
        public let text: String
    }

    /// Renders `template` (named `name`) for an app called `appName`, with `values` for `%CODE%`,
    /// `%HANDLE%` and `%LINK%`. The one renderer of the courier: `email(…)` queues its result, the Portal's
    /// template preview shows it. In the HTML the values are escaped; a signup link becomes an `<a>` with
    /// the template's `localeLinkText`.
    public static func compose(_ template: EmailTemplate, name: String, appName: String, values: [String: String]) -> Rendered {
        var plain = values
        plain["APP_NAME"] = appName
        switch name {
        case "sms":
            return Rendered(subject: "", html: "", text: render(template.html, plain, html: false))
        case "clickThrough":
            return Rendered(subject: "", html: render(template.html, plain.filter { $0.key != "LINK" }, html: true), text: "")
        default:
            var all = plain
            if name == "signUpLink", let link = values["LINK"] {
                let text = template.localeLinkText.isEmpty ? "LINK" : template.localeLinkText
                all["LINK"] = "<a href=\"\(escapeHTML(link))\">\(escapeHTML(text))</a>"
            }
            let subject = render(template.subject, ["APP_NAME": appName], html: false)
            let html = render(template.html, all, html: true)
            let text = render(template.text.isEmpty ? stripTags(template.html) : template.text, plain, html: false)
            return Rendered(subject: subject, html: html, text: text)
        }
    }
}

extension AppRecords {
    /// A draft template and the message the courier would make of it.
    public struct TemplatePreview: Sendable {
        public let template: EmailTemplate
        public let rendered: Outbox.Rendered
    }

    /// The sample values a preview fills the placeholders with.
    public static func previewValues(publicURL: String) -> [String: String] {
        let base = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        return ["CODE": "123456", "HANDLE": "user@example.com", "LINK": base + "/api/appuser/completeSignup?code=123456"]
    }

    /// Checks a draft as `putTemplate` checks it (the same messages) and renders it with the courier's
    /// renderer and sample values. Nothing is stored.
    public func previewTemplate(app: App, name: String, locale: String, input: [String: JSONValue], publicURL: String) throws -> TemplatePreview {
        try checkTemplateKey(name, locale, settings: app.settings)
        let template = try Self.draft(name: name, input: input)
        return TemplatePreview(
            template: template, rendered: Outbox.compose(template, name: name, appName: app.name, values: Self.previewValues(publicURL: publicURL)))
    }

    /// A template from a PUT body `{subject, html, text?, replyTo?, localeLinkText?}`, checked field by
    /// field; the first bad field throws `AdminFailure.invalid`.
    static func draft(name: String, input: [String: JSONValue]) throws -> EmailTemplate {
        let allowed: Set<String> = ["subject", "html", "text", "replyTo", "localeLinkText"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw AdminFailure.invalid(FieldError(unknown, "unknown_field", "is not a field of a template"))
        }
        func text(_ key: String, required: Bool, max: Int) throws -> String {
            guard let value = input[key] else {
                if required { throw AdminFailure.invalid(FieldError(key, "required", "is required")) }
                return ""
            }
            guard let string = value.stringValue else { throw AdminFailure.invalid(FieldError(key, "invalid_type", "must be a string")) }
            guard string.count <= max else { throw AdminFailure.invalid(FieldError(key, "too_long", "must be at most \(max) characters")) }
            return string
        }
        let replyTo = try text("replyTo", required: false, max: 254)
        if !replyTo.isEmpty && !AppState.looksLikeEmail(replyTo) {
            throw AdminFailure.invalid(FieldError("replyTo", "invalid_value", "must be an e-mail address"))
        }
        let subject = try text("subject", required: name != "sms" && name != "clickThrough", max: 500)
        // A subject is one header line: a CR or LF (or any control character) could smuggle headers.
        guard !subject.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw AdminFailure.invalid(FieldError("subject", "invalid_value", "must be one line without control characters"))
        }
        return EmailTemplate(
            subject: subject,
            html: try text("html", required: true, max: 100_000), text: try text("text", required: false, max: 100_000),
            replyTo: replyTo, localeLinkText: try text("localeLinkText", required: false, max: 200))
    }
}
