/// A per-app, per-locale message template (<doc:LegacyImport> §6). Placeholders: `%CODE%`,
/// `%HANDLE%`, `%APP_NAME%`, `%LINK%`. For `sms` the `html` field is the SMS text.
public struct EmailTemplate: Sendable, Equatable, Codable {
    public var subject: String
    public var html: String
    public var text: String
    public var replyTo: String
    public var localeLinkText: String

    public init(subject: String, html: String, text: String, replyTo: String = "", localeLinkText: String = "") {
        self.subject = subject
        self.html = html
        self.text = text
        self.replyTo = replyTo
        self.localeLinkText = localeLinkText
    }

    public static let names = [
        "signUp", "signUpLink", "clickThrough", "signUpSuccess", "resetPassword", "invite", "qrCode", "sms", "resetPasskey",
    ]

    /// The built-in template used when an app has none for a name and locale (and none in EN).
    public static func builtIn(_ name: String) -> EmailTemplate? {
        switch name {
        case "signUp":
            EmailTemplate(
                subject: "Verify your e-mail for %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>Your verification code for %APP_NAME% is <b>%CODE%</b>.</p>"
                    + "<p>If you did not sign up, you can ignore this e-mail.</p><p>The %APP_NAME% team</p>",
                text: "Hello %HANDLE%,\n\nYour verification code for %APP_NAME% is %CODE%.\n\n"
                    + "If you did not sign up, you can ignore this e-mail.\n\nThe %APP_NAME% team")
        case "signUpLink":
            EmailTemplate(
                subject: "Verify your account for %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>Please follow this link to verify your account: %LINK%</p>"
                    + "<p>If you did not sign up, you can ignore this e-mail.</p><p>The %APP_NAME% team</p>",
                text: "Hello %HANDLE%,\n\nPlease open this link to verify your account: %LINK%\n\nThe %APP_NAME% team",
                localeLinkText: "LINK")
        case "clickThrough":
            EmailTemplate(
                subject: "clickThrough",
                html: "<html><body><h2>%APP_NAME%</h2><p>Your account %HANDLE% is verified. You can now log in to the app.</p></body></html>",
                text: "Your account %HANDLE% is verified. You can now log in to %APP_NAME%.")
        case "signUpSuccess":
            EmailTemplate(
                subject: "Welcome to %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>Welcome to %APP_NAME%. Your account is ready.</p><p>The %APP_NAME% team</p>",
                text: "Hello %HANDLE%,\n\nWelcome to %APP_NAME%. Your account is ready.\n\nThe %APP_NAME% team")
        case "resetPasskey":
            EmailTemplate(
                subject: "Add a new passkey for %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>Your passkeys for %APP_NAME% were reset. To add a new one, enter this reset token in the app:</p>"
                    + "<p><code>%CODE%</code></p><p>If you did not ask for it, contact the %APP_NAME% team.</p>",
                text: "Hello %HANDLE%,\n\nYour passkeys for %APP_NAME% were reset. To add a new one, enter this reset token in the app:\n\n%CODE%\n\n"
                    + "If you did not ask for it, contact the %APP_NAME% team.")
        case "resetPassword":
            EmailTemplate(
                subject: "Reset your password for %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>Your password reset code for %APP_NAME% is <b>%CODE%</b>.</p>"
                    + "<p>If you did not ask for it, you can ignore this e-mail.</p>",
                text: "Hello %HANDLE%,\n\nYour password reset code for %APP_NAME% is %CODE%.\n\n"
                    + "If you did not ask for it, you can ignore this e-mail.")
        case "invite":
            EmailTemplate(
                subject: "Your invitation to %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>You have been invited to %APP_NAME%. Your invitation code is <b>%CODE%</b>.</p>",
                text: "Hello %HANDLE%,\n\nYou have been invited to %APP_NAME%. Your invitation code is %CODE%.")
        case "qrCode":
            EmailTemplate(
                subject: "Two-step verification for %APP_NAME%",
                html: "<p>Hello %HANDLE%,</p><p>Scan the attached QR code with your authenticator app, or enter this key: <b>%CODE%</b></p>",
                text: "Hello %HANDLE%,\n\nScan the attached QR code with your authenticator app, or enter this key: %CODE%")
        case "sms":
            EmailTemplate(subject: "", html: "Your %APP_NAME% code is %CODE%", text: "Your %APP_NAME% code is %CODE%")
        default: nil
        }
    }
}
