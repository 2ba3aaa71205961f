import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import Mustache

/// The Portal's HTML: server-rendered Mustache templates held here, no framework, no inline script
/// or style. Every value is escaped by Mustache (`{{…}}`); only HTML this module rendered itself goes
/// in unescaped (`{{{…}}}`: a page's body, the QR code's SVG).
enum PortalPages {
    /// A page to answer with.
    struct Page {
        var heading: String
        var template: String
        var values: [String: Any] = [:]
        var notice: String?
        var error: String?
        var status: HTTPResponse.Status = .ok
        var cookies: [String] = []
        /// The signed-in account's e-mail and the sign-out form's token (nil before sign-in).
        var signedIn: (email: String, signOutCSRF: String)?
        /// The app the page is about, and which of its pages this is (`overview`, `settings`, …).
        var app: (appId: String, name: String, current: String)?
        /// Whether the page is the apps list (the main navigation marks it).
        var appsCurrent = false
        /// Whether the signed-in account is an operator (the main navigation shows the operator views),
        /// and which of those views this page is (`tenants`, `accounts`).
        var isOperator = false
        var operatorCurrent = ""
        /// Seconds after which the page reloads itself, e.g. an import in progress: the `Refresh` response
        /// header, which browsers treat as `<meta http-equiv="refresh">` (axe-core refuses a timed meta refresh
        /// as a critical violation, and the page also offers a link to look again).
        var refreshSeconds: Int?
    }

    /// The templates, parsed once. A template that does not parse is a bug the tests catch; the pages
    /// then answer a plain 500 instead of trapping.
    static let library: MustacheLibrary? = {
        var library = MustacheLibrary()
        do {
            for set in templateSets {
                for (name, text) in set { try library.register(text, named: name) }
            }
            return library
        } catch {
            return nil
        }
    }()

    static func render(_ page: Page) -> Response {
        var values = page.values
        values["t"] = PortalText.table
        if let error = page.error { values["error"] = error }
        guard let library, let body = library.render(values, withTemplate: page.template) else { return failure() }
        var layout: [String: Any] = [
            "t": PortalText.table, "title": "\(page.heading) – \(PortalText.text(.productName))", "heading": page.heading, "body": body,
            "appsCurrent": page.appsCurrent, "isOperator": page.isOperator,
        ]
        if !page.operatorCurrent.isEmpty { layout[page.operatorCurrent + "Current"] = true }

        if let signedIn = page.signedIn {
            layout["signedIn"] = true
            layout["signedInAs"] = PortalText.text(.signedInAs, ["email": signedIn.email])
            layout["signOutCSRF"] = signedIn.signOutCSRF
        }
        if let app = page.app {
            layout["app"] = ["appId": app.appId, "name": app.name, app.current + "Current": true] as [String: Any]
        }
        if let notice = page.notice { layout["notice"] = notice }
        if let error = page.error { layout["error"] = error }
        guard let html = library.render(layout, withTemplate: "layout") else { return failure() }
        var headers = PortalHeaders.security()
        headers[.contentType] = "text/html; charset=utf-8"
        for cookie in page.cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        if let seconds = page.refreshSeconds, let refresh = HTTPField.Name("Refresh") { headers[refresh] = String(seconds) }
        return Response(status: page.status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    static func failure() -> Response {
        var headers = PortalHeaders.security()
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: .internalServerError, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "the page could not be rendered\n")))
    }

    /// `303 See Other` to a page of the Portal, with the security headers and any cookies.
    static func redirect(_ location: String, cookies: [String] = []) -> Response {
        var headers = PortalHeaders.security()
        headers[.location] = location
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: .seeOther, headers: headers)
    }

    /// The QR code of `text` as an SVG drawing (one path, no style attribute), or nil when it does not fit.
    static func qrSVG(_ text: String, label: String) -> String? {
        guard let matrix = try? QRCode.matrix(for: text) else { return nil }
        let quiet = 4, size = matrix.count + 2 * quiet
        var path = ""
        for (y, row) in matrix.enumerated() {
            for (x, dark) in row.enumerated() where dark { path += "M\(x + quiet) \(y + quiet)h1v1h-1z" }
        }
        let escaped = label.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;")
        return """
            <svg xmlns="http://www.w3.org/2000/svg" class="qr" viewBox="0 0 \(size) \(size)" width="\(size * 5)" height="\(size * 5)" role="img" aria-label="\(escaped)" shape-rendering="crispEdges"><rect width="\(size)" height="\(size)" fill="#ffffff"/><path fill="#000000" d="\(path)"/></svg>
            """
    }

    /// Every template, by group: this file's (sign-in, apps, the first app pages) and one group per
    /// file of pages added later. A name appears in one group only (the tests check).
    static var templateSets: [[String: String]] { [templates, userTemplates, settingsTemplates, operatorTemplates, importTemplates, observeTemplates, webhookTemplates, passkeyTemplates] }

    static let templates: [String: String] = [
        "layout": """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">
            <title>{{title}}</title>
            <link rel="stylesheet" href="/portal/assets/portal.css">
            <script src="/portal/assets/portal.js" defer></script>
            </head>
            <body data-copy-label="{{t.copyButton}}" data-copied-label="{{t.copied}}">
            <a class="skip-link" href="#main">{{t.skipLink}}</a>
            <header class="top">
            <p class="brand"><a href="/portal">{{t.productName}}</a></p>
            <nav id="nav" aria-label="{{t.mainNav}}">
            <ul>
            {{#signedIn}}<li><a href="/portal"{{#appsCurrent}} aria-current="page"{{/appsCurrent}}>{{t.appsLink}}</a></li>{{/signedIn}}
            {{^signedIn}}<li><a href="/portal/sign-in">{{t.signInTitle}}</a></li>{{/signedIn}}
            {{#isOperator}}<li><a id="nav-tenants" href="/portal/tenants"{{#tenantsCurrent}} aria-current="page"{{/tenantsCurrent}}>{{t.tenantsLink}}</a></li>{{/isOperator}}
            {{#signedIn}}<li><a id="nav-account" href="/portal/account"{{#accountCurrent}} aria-current="page"{{/accountCurrent}}>{{t.accountLink}}</a></li>{{/signedIn}}
            {{#isOperator}}<li><a id="nav-accounts" href="/portal/accounts"{{#accountsCurrent}} aria-current="page"{{/accountsCurrent}}>{{t.accountsLink}}</a></li>{{/isOperator}}
            </ul>
            </nav>
            {{#signedIn}}
            <form id="sign-out" method="post" action="/portal/sign-out">
            <span class="who">{{signedInAs}}</span>
            <input type="hidden" name="csrf" value="{{signOutCSRF}}">
            <button type="submit" class="secondary">{{t.signOutButton}}</button>
            </form>
            {{/signedIn}}
            </header>
            <main id="main" tabindex="-1">
            {{#app}}
            <p class="app-name">{{name}}</p>
            <nav id="app-nav" aria-label="{{t.appNav}}">
            <ul>
            <li><a id="nav-overview" href="/portal/apps/{{appId}}"{{#overviewCurrent}} aria-current="page"{{/overviewCurrent}}>{{t.overviewLink}}</a></li>
            <li><a id="nav-settings" href="/portal/apps/{{appId}}/settings"{{#settingsCurrent}} aria-current="page"{{/settingsCurrent}}>{{t.settingsLink}}</a></li>
            <li><a id="nav-keys" href="/portal/apps/{{appId}}/keys"{{#keysCurrent}} aria-current="page"{{/keysCurrent}}>{{t.keysLink}}</a></li>
            <li><a id="nav-emails" href="/portal/apps/{{appId}}/emails"{{#emailsCurrent}} aria-current="page"{{/emailsCurrent}}>{{t.emailsLink}}</a></li>
            <li><a id="nav-users" href="/portal/apps/{{appId}}/users"{{#usersCurrent}} aria-current="page"{{/usersCurrent}}>{{t.usersLink}}</a></li>
            <li><a id="nav-pending" href="/portal/apps/{{appId}}/pending"{{#pendingCurrent}} aria-current="page"{{/pendingCurrent}}>{{t.pendingLink}}</a></li>
            <li><a id="nav-members" href="/portal/apps/{{appId}}/members"{{#membersCurrent}} aria-current="page"{{/membersCurrent}}>{{t.membersLink}}</a></li>
            <li><a id="nav-import" href="/portal/apps/{{appId}}/import"{{#importCurrent}} aria-current="page"{{/importCurrent}}>{{t.importLink}}</a></li>
            <li><a id="nav-audit" href="/portal/apps/{{appId}}/audit"{{#auditCurrent}} aria-current="page"{{/auditCurrent}}>{{t.auditLink}}</a></li>
            <li><a id="nav-outbox" href="/portal/apps/{{appId}}/outbox"{{#outboxCurrent}} aria-current="page"{{/outboxCurrent}}>{{t.outboxLink}}</a></li>
            <li><a id="nav-webhooks" href="/portal/apps/{{appId}}/webhooks"{{#webhooksCurrent}} aria-current="page"{{/webhooksCurrent}}>{{t.webhooksLink}}</a></li>
            </ul>
            </nav>
            {{/app}}
            <h1>{{heading}}</h1>
            {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
            {{#error}}<p class="error" role="alert" id="form-error">{{error}}</p>{{/error}}
            {{{body}}}
            </main>
            <footer class="foot"><p>{{t.footer}}</p></footer>
            </body>
            </html>
            """,
        "message": """
            <p>{{message}}</p>
            {{#link}}<p><a href="{{link}}">{{linkText}}</a></p>{{/link}}
            """,
        "signIn": """
            <form method="post" action="/portal/sign-in" class="card">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="email">{{t.emailLabel}}</label>
            <input id="email" name="email" type="email" autocomplete="username" autocapitalize="none" spellcheck="false" required value="{{email}}"{{#error}} aria-describedby="form-error" aria-invalid="true"{{/error}}>
            </div>
            <div class="field">
            <label for="password">{{t.passwordLabel}}</label>
            <input id="password" name="password" type="password" autocomplete="current-password" required>
            </div>
            <button id="sign-in-submit" type="submit">{{t.signInButton}}</button>
            </form>
            {{> passkey.signIn}}
            """,
        "code": """
            <p id="code-help">{{t.codePrompt}}</p>
            <form method="post" action="/portal/sign-in/code" class="card">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="ticket" value="{{ticket}}">
            <div class="field">
            <label for="code">{{t.codeLabel}}</label>
            <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12" required aria-describedby="code-help{{#error}} form-error{{/error}}">
            </div>
            <button id="code-submit" type="submit">{{t.verifyButton}}</button>
            </form>
            <p><a href="/portal/sign-in">{{t.backToSignIn}}</a></p>
            """,
        "invite": """
            <p>{{prompt}}</p>
            <form method="post" action="{{action}}" class="card">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="password">{{t.newPasswordLabel}}</label>
            <input id="password" name="password" type="password" autocomplete="new-password" minlength="12" required aria-describedby="password-help{{#error}} form-error{{/error}}">
            <p id="password-help" class="help">{{t.passwordHelp}}</p>
            </div>
            <div class="field">
            <label for="password-confirm">{{t.passwordConfirmLabel}}</label>
            <input id="password-confirm" name="password-confirm" type="password" autocomplete="new-password" minlength="12" required>
            </div>
            <button id="invite-submit" type="submit">{{t.inviteButton}}</button>
            </form>
            """,
        "enrol": """
            <p id="enrol-help">{{t.enrolPrompt}}</p>
            <div class="secret">
            <p class="label" id="totp-key-label">{{t.enrolKeyLabel}}</p>
            <p><code id="totp-key" class="copyable">{{key}}</code></p>
            </div>
            {{#qr}}<figure class="qr-figure">{{{qr}}}</figure>{{/qr}}
            <form method="post" action="/portal/enrol" class="card">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="code">{{t.codeLabel}}</label>
            <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12" required aria-describedby="enrol-code-help{{#error}} form-error{{/error}}">
            <p id="enrol-code-help" class="help">{{t.enrolCodePrompt}}</p>
            </div>
            <button id="enrol-submit" type="submit">{{t.enrolButton}}</button>
            </form>
            {{> passkey.enrol}}
            """,
        "reauth": """
            <p id="reauth-help">{{t.reauthPrompt}}</p>
            <form method="post" action="/portal/reauth" class="card">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="next" value="{{next}}">
            <div class="field">
            <label for="password">{{t.passwordLabel}}</label>
            <input id="password" name="password" type="password" autocomplete="current-password" required>
            </div>
            <div class="field">
            <label for="code">{{t.codeLabel}}</label>
            <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12" required>
            </div>
            <button id="reauth-submit" type="submit">{{t.reauthButton}}</button>
            </form>
            {{> passkey.reauth}}
            """,
        "apps": """
            <form method="get" action="/portal" role="search" class="search">
            <label for="q">{{t.searchLabel}}</label>
            <input id="q" name="q" type="search" value="{{q}}" maxlength="200">
            <button type="submit">{{t.searchButton}}</button>
            </form>
            {{#isOperator}}<p><a id="new-app" class="button" href="/portal/apps/new">{{t.newAppLink}}</a></p>{{/isOperator}}
            <table id="apps">
            <caption>{{t.appsCaption}}</caption>
            <thead><tr><th scope="col">{{t.appNameColumn}}</th><th scope="col">{{t.appIdColumn}}</th><th scope="col">{{t.productColumn}}</th><th scope="col">{{t.statusColumn}}</th><th scope="col">{{t.createdColumn}}</th></tr></thead>
            <tbody>
            {{#apps}}<tr><td><a class="app-link" href="/portal/apps/{{appId}}">{{name}}</a></td><td><code>{{appId}}</code></td><td>{{product}}</td><td>{{status}}</td><td>{{created}}</td></tr>
            {{/apps}}
            </tbody>
            </table>
            {{^apps}}<p>{{t.noApps}}</p>{{/apps}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            """,
        "newApp": """
            <form method="post" action="/portal/apps/new" class="card">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="name">{{t.appNameLabel}}</label>
            <input id="name" name="name" type="text" required maxlength="200" value="{{name}}"{{#error}} aria-describedby="form-error" aria-invalid="true"{{/error}}>
            </div>
            <div class="field">
            <label for="product">{{t.productLabel}}</label>
            <select id="product" name="product">
            <option value="cosyncAuth"{{#cosyncAuth}} selected{{/cosyncAuth}}>{{t.productCosyncAuth}}</option>
            <option value="appKey"{{#appKey}} selected{{/appKey}}>{{t.productAppKey}}</option>
            </select>
            </div>
            <button id="create-app-submit" type="submit">{{t.createAppButton}}</button>
            </form>
            """,
        "overview": """
            <dl class="facts">
            <div><dt>{{t.appIdLabel}}</dt><dd><code>{{appId}}</code></dd></div>
            <div><dt>{{t.productLabelShort}}</dt><dd>{{product}}</dd></div>
            <div><dt>{{t.statusLabel}}</dt><dd>{{status}}</dd></div>
            <div><dt>{{t.createdLabel}}</dt><dd>{{created}}</dd></div>
            <div><dt>{{t.yourRoleLabel}}</dt><dd>{{role}}</dd></div>
            <div><dt>{{t.signupFlowLabelShort}}</dt><dd>{{signupFlow}}</dd></div>
            <div><dt>{{t.metadataCount}}</dt><dd>{{metadataCount}}</dd></div>
            <div><dt>{{t.membersCount}}</dt><dd>{{membersCount}}</dd></div>
            </dl>
            {{> observe.overview}}
            """,
        "members": """
            {{#inviteSent}}
            <div class="once" role="status">
            <p id="invite-sent">{{inviteSent}}</p>
            {{#inviteLink}}
            <p class="label" id="invite-link-label">{{t.inviteLinkLabel}}</p>
            <p><code id="invite-link" class="copyable wrap">{{inviteLink}}</code></p>
            {{/inviteLink}}
            </div>
            {{/inviteSent}}
            <h2 id="members-heading">{{t.membersCaption}}</h2>
            <ul id="members" aria-labelledby="members-heading">
            {{#members}}<li><span class="member-email">{{email}}</span> <span class="member-role">{{role}}</span></li>
            {{/members}}
            </ul>
            {{^members}}<p>{{t.noMembers}}</p>{{/members}}
            {{#canInvite}}
            <section class="card wide" aria-labelledby="invite-heading">
            <h2 id="invite-heading">{{t.inviteHeading}}</h2>
            <form method="post" action="/portal/apps/{{appId}}/members">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="invite-email">{{t.inviteEmailLabel}}</label>
            <input id="invite-email" name="email" type="email" autocomplete="off" required value="{{email}}">
            </div>
            <div class="field">
            <label for="invite-role">{{t.inviteRoleLabel}}</label>
            <select id="invite-role" name="role">
            {{#roles}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>
            {{/roles}}
            </select>
            </div>
            <button id="invite-submit" type="submit">{{t.sendInviteButton}}</button>
            </form>
            </section>
            {{/canInvite}}
            """,
    ]
}
