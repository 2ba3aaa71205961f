import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import Mustache

/// The hosted pages' HTML (<doc:OAuth> §3): server-rendered, no framework, no script of its own, one
/// small same-origin stylesheet. Every value is escaped by Mustache (`{{…}}`); only HTML this module
/// rendered itself goes in unescaped (`{{{…}}}`: a page's body, the sign-in options).
enum HostedPages {
    /// A page to answer with.
    struct Page {
        var language: HostedText.Language
        var app: App
        var title: String
        var heading: String
        /// The body template's name and its values (`t`, the language's texts, is added).
        var template: String
        var values: [String: Any] = [:]
        var notice: String?
        var error: String?
        var status: HTTPResponse.Status = .ok
        /// Where a form on this page may end up besides this server (the client's redirect URI after a
        /// sign-in, or its post-logout URI): CSP `form-action` also applies to the redirects that follow
        /// a form's POST, so the page allows that one destination.
        var formTargets: [String] = []
        /// Same-origin scripts (a sign-in option's).
        var scripts: [String] = []
        var cookies: [String] = []
    }

    /// The templates, parsed once. A template that does not parse is a bug that the tests catch; the
    /// pages then answer a plain 500 instead of trapping.
    static let library: MustacheLibrary? = {
        var library = MustacheLibrary()
        do {
            for (name, text) in templates { try library.register(text, named: name) }
            return library
        } catch {
            return nil
        }
    }()

    static func render(_ page: Page, issuerPath: String) -> Response {
        var t: [String: String] = [:]
        let fill = ["app": page.app.name, "handle": page.values["handle"] as? String ?? ""]
        for key in HostedText.Key.allCases { t[key.rawValue] = page.language(key, fill) }
        var values = page.values
        values["t"] = t
        if let error = page.error { values["error"] = error }
        guard let library, let body = library.render(values, withTemplate: page.template) else { return failure() }
        var layout: [String: Any] = [
            "lang": page.language.lang, "title": "\(page.title) – \(page.app.name)", "appName": page.app.name, "heading": page.heading,
            "body": body, "stylesheet": issuerPath + stylesheetPath, "scripts": page.scripts,
        ]
        if let notice = page.notice { layout["notice"] = notice }
        if let error = page.error { layout["error"] = error }
        guard let html = library.render(layout, withTemplate: "layout") else { return failure() }
        var headers = securityHeaders(formTargets: page.formTargets)
        headers[.contentType] = "text/html; charset=utf-8"
        for cookie in page.cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: page.status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    static func failure() -> Response {
        var headers = securityHeaders(formTargets: [])
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: .internalServerError, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "the page could not be rendered\n")))
    }

    /// The headers of every hosted page and of the redirects around them: a strict CSP (no framing, no
    /// inline anything, forms only to this origin and the given destinations), no referrer, no caching.
    static func securityHeaders(formTargets: [String]) -> HTTPFields {
        let extra = formTargets.compactMap(cspSource).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        let formAction = (["'self'"] + extra).joined(separator: " ")
        return [
            contentSecurityPolicy: "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; connect-src 'self'; form-action \(formAction); frame-ancestors 'none'; base-uri 'none'",
            xFrameOptions: "DENY", referrerPolicy: "no-referrer", .cacheControl: "no-store", OAuthWire.pragma: "no-cache",
            xContentTypeOptions: "nosniff",
        ]
    }

    /// The CSP source expression that allows a redirect URI: its scheme, host and port for http(s), its
    /// scheme for a private-use one (`com.example.app:`); a loopback one on any port. Nil when the URI
    /// does not read as one (the page then allows only itself).
    static func cspSource(_ uri: String) -> String? {
        guard let components = URLComponents(string: uri), let scheme = components.scheme?.lowercased(),
            scheme.utf8.allSatisfy({ (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2b || $0 == 0x2d || $0 == 0x2e })
        else { return nil }
        guard scheme == "http" || scheme == "https" else { return scheme + ":" }
        guard let host = components.host, !host.isEmpty,
            host.utf8.allSatisfy({ (0x61...0x7a).contains($0) || (0x41...0x5a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2e || $0 == 0x2d || $0 == 0x3a })
        else { return nil }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        if ["127.0.0.1", "::1"].contains(host) { return "\(scheme)://\(shownHost):*" }
        return "\(scheme)://\(shownHost)" + (components.port.map { ":\($0)" } ?? "")
    }

    static let contentSecurityPolicy = HTTPField.Name("Content-Security-Policy")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let xContentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    /// Relative to the issuer.
    static let stylesheetPath = "/oauth/assets/hosted.css"

    static let stylesheet = """
        :root { color-scheme: light dark; --accent: #1f5fbf; --error: #b3261e; --line: #8a8a8a; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: Canvas; color: CanvasText; }
        main { max-width: 26rem; margin: 3rem auto; padding: 1.5rem; }
        .app-name { margin: 0; font-weight: 600; color: var(--accent); }
        h1 { font-size: 1.5rem; margin: .25rem 0 1rem; }
        h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
        .field { margin: 0 0 1rem; }
        label { display: block; font-weight: 600; margin-bottom: .25rem; }
        input { width: 100%; padding: .6rem; font: inherit; border: 1px solid var(--line); border-radius: .4rem; background: Field; color: FieldText; }
        input:focus, button:focus, a:focus { outline: 3px solid var(--accent); outline-offset: 2px; }
        button { width: 100%; padding: .7rem; font: inherit; font-weight: 600; border: 0; border-radius: .4rem; background: var(--accent); color: #fff; cursor: pointer; }
        .secondary { background: transparent; color: var(--accent); border: 1px solid var(--accent); margin-top: .5rem; }
        .error { color: var(--error); border-left: 4px solid var(--error); padding-left: .75rem; }
        .notice { border-left: 4px solid var(--accent); padding-left: .75rem; }
        .links a { display: inline-block; margin: .5rem 1rem 0 0; color: var(--accent); }
        .options { border-top: 1px solid var(--line); margin-top: 1.5rem; }
        @media (prefers-color-scheme: dark) { :root { --accent: #8ab4f8; --error: #f2b8b5; } button { color: #000; } }
        """

    /// The sign-in form's handle field, shared by the forms that ask for one.
    static let handleField = """
        <div class="field">
        <label for="handle">{{handleLabel}}</label>
        <input id="handle" name="handle" type="{{handleType}}" autocomplete="username" autocapitalize="none" spellcheck="false" required value="{{handle}}"{{#error}} aria-describedby="form-error" aria-invalid="true"{{/error}}>
        </div>
        """

    static let hiddenFields = """
        <input type="hidden" name="r" value="{{reference}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        """

    static let templates: [String: String] = [
        "layout": """
            <!DOCTYPE html>
            <html lang="{{lang}}">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <title>{{title}}</title>
            <link rel="stylesheet" href="{{stylesheet}}">
            {{#scripts}}<script src="{{.}}" defer></script>
            {{/scripts}}
            </head>
            <body>
            <main>
            <p class="app-name">{{appName}}</p>
            <h1>{{heading}}</h1>
            {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
            {{#error}}<p class="error" role="alert" id="form-error">{{error}}</p>{{/error}}
            {{{body}}}
            </main>
            </body>
            </html>
            """,
        // The sign-in page. The section "Other ways to sign in" is the slot where other methods
        // (upstream providers, passkeys) put their buttons: see HostedSignInOptions.
        "signIn": """
            {{#passwordOffered}}
            <form method="post" action="{{action}}">
            \(hiddenFields)
            \(handleField)
            <div class="field">
            <label for="password">{{t.passwordLabel}}</label>
            <input id="password" name="password" type="password" autocomplete="current-password" required>
            </div>
            <button type="submit">{{t.signInButton}}</button>
            </form>
            <p class="links">{{#forgotURL}}<a href="{{forgotURL}}">{{t.forgotLink}}</a>{{/forgotURL}}{{#signupURL}}<a href="{{signupURL}}">{{t.signupLink}}</a>{{/signupURL}}</p>
            {{/passwordOffered}}
            {{^passwordOffered}}{{^options}}<p>{{t.passkeyOnly}}</p>{{/options}}{{/passwordOffered}}
            {{#options}}
            <section class="options" aria-labelledby="options-heading">
            <h2 id="options-heading">{{t.otherOptions}}</h2>
            {{{options}}}
            </section>
            {{/options}}
            """,
        "code": """
            <p id="code-help">{{prompt}}</p>
            <form method="post" action="{{action}}">
            \(hiddenFields)
            <input type="hidden" name="login_token" value="{{loginToken}}">
            <div class="field">
            <label for="code">{{t.codeLabel}}</label>
            <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12" required aria-describedby="code-help{{#error}} form-error{{/error}}">
            </div>
            <button type="submit">{{t.verifyButton}}</button>
            </form>
            <p class="links"><a href="{{signInURL}}">{{t.backToSignIn}}</a></p>
            """,
        "signup": """
            <form method="post" action="{{action}}">
            \(hiddenFields)
            \(handleField)
            <div class="field">
            <label for="password">{{t.newPasswordLabel}}</label>
            <input id="password" name="password" type="password" autocomplete="new-password" required>
            </div>
            <button type="submit">{{t.signupButton}}</button>
            </form>
            <p class="links"><a href="{{signInURL}}">{{t.backToSignIn}}</a></p>
            """,
        "signupCode": """
            <p id="code-help">{{t.signupCodePrompt}}</p>
            <form method="post" action="{{action}}">
            \(hiddenFields)
            <input type="hidden" name="handle" value="{{handle}}">
            <div class="field">
            <label for="code">{{t.codeLabel}}</label>
            <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12" required aria-describedby="code-help{{#error}} form-error{{/error}}">
            </div>
            <button type="submit">{{t.verifyButton}}</button>
            </form>
            <p class="links"><a href="{{signInURL}}">{{t.backToSignIn}}</a></p>
            """,
        "forgot": """
            <p>{{t.forgotPrompt}}</p>
            <form method="post" action="{{action}}">
            \(hiddenFields)
            \(handleField)
            <button type="submit">{{t.sendCodeButton}}</button>
            </form>
            <p class="links"><a href="{{signInURL}}">{{t.backToSignIn}}</a></p>
            """,
        "reset": """
            <p id="code-help">{{t.resetPrompt}}</p>
            <form method="post" action="{{action}}">
            \(hiddenFields)
            <input type="hidden" name="handle" value="{{handle}}">
            <div class="field">
            <label for="code">{{t.codeLabel}}</label>
            <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12" required aria-describedby="code-help">
            </div>
            <div class="field">
            <label for="password">{{t.newPasswordLabel}}</label>
            <input id="password" name="password" type="password" autocomplete="new-password" required>
            </div>
            <button type="submit">{{t.resetButton}}</button>
            </form>
            <p class="links"><a href="{{signInURL}}">{{t.backToSignIn}}</a></p>
            """,
        "message": """
            <p>{{message}}</p>
            {{#detail}}<p><code>{{detail}}</code></p>{{/detail}}
            {{#link}}<p class="links"><a href="{{link}}">{{linkText}}</a></p>{{/link}}
            """,
        // "Continue as": a public client's request in a signed-in browser (the user confirms).
        "continue": """
            <p id="continue-help">{{prompt}}</p>
            <form method="post" action="{{action}}">
            \(hiddenFields)
            <button type="submit" aria-describedby="continue-help">{{button}}</button>
            </form>
            <p class="links"><a href="{{otherURL}}">{{t.otherAccountLink}}</a></p>
            """,
        "logout": """
            <p>{{t.logoutPrompt}}</p>
            <form method="post" action="{{action}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            {{#hidden}}<input type="hidden" name="{{name}}" value="{{value}}">
            {{/hidden}}
            <button type="submit">{{t.logoutButton}}</button>
            </form>
            """,
    ]
}
