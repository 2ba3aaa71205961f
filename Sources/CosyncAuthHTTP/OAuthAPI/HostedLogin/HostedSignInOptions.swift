import CosyncAuth
import Foundation

/// The slot of the hosted sign-in page for the sign-in methods besides the password form: each one
/// adds an entry to `HostedSignInOptions.all`, and the page shows what the entries render under
/// "Other ways to sign in" (an upstream provider's button, the passkey block). An entry renders nothing
/// for an app that does not offer its method.
///
/// What an entry may rely on: the page's CSP allows same-origin scripts (`script-src 'self'`), images
/// (`img-src 'self' data:`), same-origin fetches (`connect-src 'self'`) and form posts to this origin
/// (`form-action 'self'` and the client's redirect target). Its HTML goes into the page unescaped, so it must escape what it prints (render it
/// with a Mustache template, `{{…}}`). Its forms and scripts post with the page's CSRF token
/// (`csrf`, for the waiting request `reference`) and the browser's binding cookie; a finished sign-in
/// continues the request with `HostedLoginRoutes.completion`.
struct HostedSignInOption: Sendable {
    /// The option's HTML and the same-origin scripts it needs, or nil when the app does not offer it.
    let render: @Sendable (HostedSignInOptionContext) async -> (html: String, scripts: [String])?
}

/// What a sign-in option knows of the page it is rendered into.
struct HostedSignInOptionContext: Sendable {
    let services: CosyncServices
    let app: App
    /// The waiting authorization request (`r`).
    let reference: String
    /// The page's CSRF token (purpose `login:<reference>`, see `HostedCSRF`).
    let csrf: String
    /// The issuer as a path on this server (`/apps/{appId}`, after the public URL's own path).
    let issuerPath: String
    let language: HostedText.Language
    /// The handle the form starts with, if any.
    let handle: String?
}

enum HostedSignInOptions {
    /// Upstream providers and passkeys add their entries here.
    static let all: [HostedSignInOption] = [UpstreamRoutes.signInOption, HostedPasskeyRoutes.option]
}
