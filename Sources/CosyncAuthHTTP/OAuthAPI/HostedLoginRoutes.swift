import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The hosted login page (<doc:OAuth> §3), under the issuer I = `{public URL}/apps/{appId}`.
///
/// The authorization endpoint sends the browser here with `r`, the reference of the waiting request.
/// Pages (GET, `?r=…`) and their forms (POST, `application/x-www-form-urlencoded`). The field names are
/// stable (browser tests fill them by name):
///
/// | Page | GET | POST | Fields |
/// |---|---|---|---|
/// | Sign in | `I/oauth/login` | `I/oauth/login` | `handle`, `password` |
/// | Second factor (TOTP or SMS) | (answer of the sign-in POST) | `I/oauth/login/code` | `code`, `login_token` (hidden) |
/// | Create an account | `I/oauth/login/signup` | `I/oauth/login/signup` | `handle`, `password` |
/// | Signup code | (answer of the signup POST) | `I/oauth/login/signup/code` | `code`, `handle` (hidden) |
/// | Forgot password | `I/oauth/login/forgot` | `I/oauth/login/forgot` | `handle` |
/// | Reset password | (answer of the forgot POST) | `I/oauth/login/reset` | `code`, `password`, `handle` (hidden) |
/// | Continue as (public client, signed-in browser) | `I/oauth/login/continue` | `I/oauth/login/continue` | (only `r` and `csrf`) |
///
/// A public client's request in a browser that is already signed in goes to "Continue as": the page
/// names the signed-in user and the client, its POST (CSRF token bound to the binding cookie, the
/// request and the browser's session) issues the code; "Use another account" is the sign-in page.
///
/// Every form also carries the hidden `r` and `csrf`. `csrf` is bound to the browser's binding cookie
/// (`__Host-cosync-browser`, made by the authorization endpoint) and to `r` (see `HostedCSRF`), and is
/// checked in constant time on every POST; a request started in another browser is refused. A
/// finished sign-in answers `303 See Other` to `I/oauth/authorize/resume?r=…&code=…` (same origin),
/// which answers `302` to the client's redirect URI with `code`, `state` and `iss`. Each page's CSP
/// `form-action` also names the client's redirect target, since browsers check it on the redirects
/// that follow a form's POST.
///
/// The browser session is the cookie `__Host-cosync-sso-{appId}` (HttpOnly, Secure, SameSite=Lax,
/// as long as the session lives); its SHA-256 is stored in `oauth_browser_sessions`. When the public
/// URL is `http://` on a loopback host (development, tests), cookies cannot be Secure, and without
/// Secure browsers refuse the `__Host-` prefix: the names are then `cosync-browser` and
/// `cosync-sso-{appId}`, without Secure.
///
/// Other sign-in methods put their buttons in the sign-in page's slot (`HostedSignInOptions`).
struct HostedLoginRoutes {
    let services: CosyncServices

    enum Path {
        static let login = "/oauth/login"
        static let code = "/oauth/login/code"
        static let signup = "/oauth/login/signup"
        static let signupCode = "/oauth/login/signup/code"
        static let forgot = "/oauth/login/forgot"
        static let reset = "/oauth/login/reset"
        static let resume = "/oauth/authorize/resume"
        static let continueAs = "/oauth/login/continue"
    }

    func register(on issuer: RouterGroup<OAuthAppContext>) {
        issuer.get("oauth/assets/hosted.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "public, max-age=3600", HostedPages.xContentTypeOptions: "nosniff"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: HostedPages.stylesheet)))
        }
        issuer.get("oauth/login") { request, context in await page(request, context) { visit in await signInPage(visit) } }
        issuer.get("oauth/login/signup") { request, context in
            await page(request, context) { visit in Self.offersSignup(visit.app) ? signupPage(visit) : await signInPage(visit) }
        }
        issuer.get("oauth/login/forgot") { request, context in
            await page(request, context) { visit in Self.offersPassword(visit.app) ? forgotPage(visit) : await signInPage(visit) }
        }
        issuer.post("oauth/login") { request, context in await post(request, context) { visit, form in await password(visit, form, context) } }
        issuer.post("oauth/login/code") { request, context in await post(request, context) { visit, form in await secondFactor(visit, form) } }
        issuer.post("oauth/login/signup") { request, context in await post(request, context) { visit, form in await signup(visit, form, request) } }
        issuer.post("oauth/login/signup/code") { request, context in await post(request, context) { visit, form in await signupCode(visit, form) } }
        issuer.post("oauth/login/forgot") { request, context in await post(request, context) { visit, form in await forgot(visit, form, context) } }
        issuer.post("oauth/login/reset") { request, context in await post(request, context) { visit, form in await reset(visit, form, context) } }
        issuer.get("oauth/login/continue") { request, context in await page(request, context) { visit in await continuePage(visit, request) } }
        issuer.post("oauth/login/continue") { request, context in await continuePost(request, context) }
    }

    // MARK: what every page and form shares

    /// One visit of the page for a waiting request, by the browser that started it.
    struct Visit {
        let app: App
        let reference: String
        let browserKey: String
        let pending: OAuthAuthorization.Pending
        let language: HostedText.Language
        let csrf: String
        let issuerPath: String

        /// A page of the login flow: the form values every page has.
        func page(_ template: String, title: HostedText.Key, values: [String: Any] = [:], status: HTTPResponse.Status = .ok) -> HostedPages.Page {
            var all = values
            all["reference"] = reference
            all["csrf"] = csrf
            all["signInURL"] = url(Path.login)
            return HostedPages.Page(
                language: language, app: app, title: language(title), heading: language(title), template: template, values: all, status: status,
                formTargets: [pending.request.redirectURI])
        }

        /// A page of the flow on this server, for this request.
        func url(_ path: String) -> String { issuerPath + path + "?r=" + AuthorizationRules.formEncode(reference) }
    }

    /// The issuer as a path on this server: the public URL's own path, then `/apps/{appId}`.
    static func issuerPath(_ services: CosyncServices, appId: String) -> String {
        var base = URLComponents(string: services.oauth.publicURL)?.path ?? ""
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/apps/" + appId
    }

    /// A GET of a page: the waiting request `r`, for the browser holding the binding cookie.
    func page(_ request: Request, _ context: OAuthAppContext, _ body: (Visit) async -> HostedPages.Page) async -> Response {
        let app = context.app
        let query: [String: String]
        do { query = try AuthorizeRoutes.parameters(request) } catch {
            return Self.message(services, app: app, request: request, .badRequest, status: .badRequest)
        }
        switch await visit(app: app, request: request, reference: query["r"] ?? "") {
        case .success(let visit): return HostedPages.render(await body(visit), issuerPath: visit.issuerPath)
        case .failure(let failure): return failure.response
        }
    }

    /// A POST of a form: the CSRF token first, then the waiting request.
    func post(_ request: Request, _ context: OAuthAppContext, _ body: (Visit, [String: String]) async -> Response) async -> Response {
        let app = context.app
        let form: [String: String]
        do { form = try await OAuthWire.formBody(request, context: context) } catch {
            return Self.message(services, app: app, request: request, .badRequest, status: .badRequest)
        }
        let reference = form["r"] ?? ""
        let browserKey = HostedCookies.browserKey(request, services: services)
        guard services.oauth.csrf.verify(form["csrf"], browserKey: browserKey, appId: app.appId, purpose: "login:" + reference) else {
            // The way back: the page again, with a fresh form (if the request is still there).
            let link = Self.issuerPath(services, appId: app.appId) + Path.login + "?r=" + AuthorizeRoutes.encode(reference)
            return Self.message(services, app: app, request: request, browserKey == nil ? .cookiesNeeded : .formExpired, status: .forbidden,
                                link: reference.isEmpty ? nil : (link, .backToSignIn))
        }
        switch await visit(app: app, request: request, reference: reference) {
        case .success(let visit): return await body(visit, form)
        case .failure(let failure): return failure.response
        }
    }

    struct VisitFailure: Error { let response: Response }

    func visit(app: App, request: Request, reference: String) async -> Result<Visit, VisitFailure> {
        guard let browserKey = HostedCookies.browserKey(request, services: services) else {
            return .failure(VisitFailure(response: Self.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)))
        }
        do {
            let pending = try await services.oauth.authorization.pending(app: app, reference: reference, browserKey: browserKey)
            let language = HostedText.language(app: app, uiLocales: pending.request.uiLocales, acceptLanguage: request.headers[.acceptLanguage])
            return .success(Visit(
                app: app, reference: reference, browserKey: browserKey, pending: pending, language: language,
                csrf: services.oauth.csrf.token(browserKey: browserKey, appId: app.appId, purpose: "login:" + reference),
                issuerPath: Self.issuerPath(services, appId: app.appId)))
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return .failure(VisitFailure(response: Self.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)))
        } catch OAuthAuthorization.PendingFailure.gone {
            return .failure(VisitFailure(response: Self.message(services, app: app, request: request, .requestExpired, status: .badRequest)))
        } catch {
            services.logger.error("hosted page: reading the request failed", metadata: ["error": "\(String(reflecting: error))"])
            return .failure(VisitFailure(response: Self.message(services, app: app, request: request, .genericError, status: .internalServerError)))
        }
    }

    /// A page that only says something (an error, signed out), in the language the browser asks for.
    static func message(
        _ services: CosyncServices, app: App, request: Request, _ key: HostedText.Key, status: HTTPResponse.Status, uiLocales: [String] = [],
        title: HostedText.Key = .errorTitle, detail: String? = nil, link: (url: String, text: HostedText.Key)? = nil, cookies: [String] = []
    ) -> Response {
        let language = HostedText.language(app: app, uiLocales: uiLocales, acceptLanguage: request.headers[.acceptLanguage])
        var values: [String: Any] = ["message": language(key, ["app": app.name])]
        if let detail { values["detail"] = detail }
        if let link {
            values["link"] = link.url
            values["linkText"] = language(link.text)
        }
        let page = HostedPages.Page(
            language: language, app: app, title: language(title), heading: language(title), template: "message", values: values, status: status,
            cookies: cookies)
        return HostedPages.render(page, issuerPath: issuerPath(services, appId: app.appId))
    }

    // MARK: pages

    static func offersPassword(_ app: App) -> Bool { app.product == .cosyncAuth }
    /// Signup on the page: the app allows it and its flow completes here (`none`, or `code`; a `link`
    /// signup's link needs the app token, which the page does not hold).
    static func offersSignup(_ app: App) -> Bool { offersPassword(app) && app.settings.signupEnabled && app.settings.signupFlow != .link }

    func handleValues(_ visit: Visit, handle: String?) -> [String: Any] {
        var values: [String: Any] = [
            "handleLabel": visit.language(visit.app.settings.userNamesEnabled ? .handleOrUserNameLabel : .handleLabel),
            "handleType": visit.app.settings.userNamesEnabled ? "text" : "email",
        ]
        if let handle { values["handle"] = handle }
        return values
    }

    func signInPage(_ visit: Visit, handle: String? = nil, error: String? = nil, notice: String? = nil, status: HTTPResponse.Status = .ok) async -> HostedPages.Page {
        let shown = handle ?? visit.pending.prefill
        var values = handleValues(visit, handle: shown)
        values["action"] = visit.issuerPath + Path.login
        values["passwordOffered"] = Self.offersPassword(visit.app)
        if Self.offersPassword(visit.app) { values["forgotURL"] = visit.url(Path.forgot) }
        if Self.offersSignup(visit.app) { values["signupURL"] = visit.url(Path.signup) }
        let optionContext = HostedSignInOptionContext(
            services: services, app: visit.app, reference: visit.reference, csrf: visit.csrf, issuerPath: visit.issuerPath, language: visit.language,
            handle: shown)
        var options: [String] = [], scripts: [String] = []
        for option in HostedSignInOptions.all {
            if let rendered = await option.render(optionContext) {
                options.append(rendered.html)
                scripts += rendered.scripts
            }
        }
        if !options.isEmpty { values["options"] = options.joined(separator: "\n") }
        var page = visit.page("signIn", title: .signInTitle, values: values, status: status)
        page.error = error
        page.notice = notice
        page.scripts = scripts
        return page
    }

    func signupPage(_ visit: Visit, handle: String? = nil, error: String? = nil, status: HTTPResponse.Status = .ok) -> HostedPages.Page {
        var values = handleValues(visit, handle: handle ?? visit.pending.request.loginHint)
        values["action"] = visit.issuerPath + Path.signup
        values["handleLabel"] = visit.language(.handleLabel)
        values["handleType"] = "email"
        var page = visit.page("signup", title: .signupTitle, values: values, status: status)
        page.error = error
        return page
    }

    func forgotPage(_ visit: Visit, handle: String? = nil, error: String? = nil, status: HTTPResponse.Status = .ok) -> HostedPages.Page {
        var values = handleValues(visit, handle: handle ?? visit.pending.prefill)
        values["action"] = visit.issuerPath + Path.forgot
        var page = visit.page("forgot", title: .forgotTitle, values: values, status: status)
        page.error = error
        return page
    }

    func codePage(_ visit: Visit, loginToken: String, factor: HostedSignIn.Factor, error: String? = nil, status: HTTPResponse.Status = .ok) -> HostedPages.Page {
        let values: [String: Any] = [
            "action": visit.issuerPath + Path.code, "loginToken": loginToken, "prompt": visit.language(factor == .sms ? .smsPrompt : .totpPrompt),
        ]
        var page = visit.page("code", title: .codeTitle, values: values, status: status)
        page.error = error
        return page
    }

    func signupCodePage(_ visit: Visit, handle: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> HostedPages.Page {
        var page = visit.page("signupCode", title: .codeTitle, values: ["action": visit.issuerPath + Path.signupCode, "handle": handle], status: status)
        page.error = error
        return page
    }

    func resetPage(_ visit: Visit, handle: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> HostedPages.Page {
        var page = visit.page("reset", title: .resetTitle, values: ["action": visit.issuerPath + Path.reset, "handle": handle], status: status)
        page.error = error
        return page
    }

    /// The CSRF purpose of the "Continue as" form: the request and the browser session it shows, so a
    /// form shown for one user cannot continue as another who signed in since.
    static func continuePurpose(reference: String, sessionId: UUID) -> String {
        "continue:" + reference + ":" + sessionId.uuidString.lowercased()
    }

    /// `GET I/oauth/login/continue`: "Continue as <user>" or "Use another account", for a public
    /// client's request in a signed-in browser. Without a usable browser session: the sign-in page.
    func continuePage(_ visit: Visit, _ request: Request) async -> HostedPages.Page {
        let sso = HostedCookies.value(request, HostedCookies.ssoName(appId: visit.app.appId, services: services))
        let browser: OAuthAuthorization.SignedInBrowser?
        do { browser = try await services.oauth.authorization.continuable(app: visit.app, request: visit.pending.request, browserToken: sso) } catch {
            services.logger.error("hosted page: reading the browser session failed", metadata: ["error": "\(String(reflecting: error))"])
            browser = nil
        }
        guard let browser else { return await signInPage(visit) }
        return continueAsPage(visit, browser)
    }

    func continueAsPage(_ visit: Visit, _ browser: OAuthAuthorization.SignedInBrowser) -> HostedPages.Page {
        let language = visit.language
        let shown = Identifiers.isAnonymous(browser.user.handle) ? language(.signedInAccount) : browser.user.handle
        let fill = ["app": visit.app.name, "handle": shown, "client": visit.pending.client.name]
        var page = visit.page("continue", title: .continueTitle, values: [
            "action": visit.issuerPath + Path.continueAs, "prompt": language(.continuePrompt, fill), "button": language(.continueButton, fill),
            "otherURL": visit.url(Path.login),
        ])
        page.values["csrf"] = services.oauth.csrf.token(
            browserKey: visit.browserKey, appId: visit.app.appId, purpose: Self.continuePurpose(reference: visit.reference, sessionId: browser.sessionId))
        return page
    }

    /// `POST I/oauth/login/continue`: the user chose to continue as the signed-in user: the code for
    /// the browser's session, then the resume step. If the browser is no longer signed in as the page
    /// showed, the sign-in page.
    func continuePost(_ request: Request, _ context: OAuthAppContext) async -> Response {
        let app = context.app
        let form: [String: String]
        do { form = try await OAuthWire.formBody(request, context: context) } catch {
            return Self.message(services, app: app, request: request, .badRequest, status: .badRequest)
        }
        let reference = form["r"] ?? ""
        let browserKey = HostedCookies.browserKey(request, services: services)
        let sso = HostedCookies.value(request, HostedCookies.ssoName(appId: app.appId, services: services))
        let signInLink = Self.issuerPath(services, appId: app.appId) + Path.login + "?r=" + AuthorizeRoutes.encode(reference)
        let browser: OAuthAuthorization.SignedInBrowser?
        do { browser = try await services.oauth.authorization.signedInBrowser(app: app, token: sso) } catch {
            services.logger.error("hosted page: reading the browser session failed", metadata: ["error": "\(String(reflecting: error))"])
            return Self.message(services, app: app, request: request, .genericError, status: .internalServerError)
        }
        guard let browser,
            services.oauth.csrf.verify(
                form["csrf"], browserKey: browserKey, appId: app.appId, purpose: Self.continuePurpose(reference: reference, sessionId: browser.sessionId))
        else {
            return Self.message(services, app: app, request: request, browserKey == nil ? .cookiesNeeded : .formExpired, status: .forbidden,
                                link: reference.isEmpty ? nil : (signInLink, .backToSignIn))
        }
        let visit: Visit
        switch await self.visit(app: app, request: request, reference: reference) {
        case .success(let found): visit = found
        case .failure(let failure): return failure.response
        }
        do {
            let code = try await services.oauth.authorization.continueSignedIn(
                app: app, reference: reference, browserKey: visit.browserKey, browserToken: sso, sessionId: browser.sessionId)
            let location = visit.issuerPath + Path.resume + "?r=" + AuthorizeRoutes.encode(reference) + "&code=" + AuthorizeRoutes.encode(code)
            return AuthorizeRoutes.redirect(.seeOther, to: location)
        } catch OAuthAuthorization.ContinueFailure.notSignedIn {
            return HostedPages.render(await signInPage(visit), issuerPath: visit.issuerPath)
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return Self.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)
        } catch OAuthAuthorization.PendingFailure.gone {
            return Self.message(services, app: app, request: request, .requestExpired, status: .badRequest)
        } catch {
            services.logger.error("hosted page: continuing as the signed-in user failed", metadata: ["error": "\(String(reflecting: error))"])
            return Self.message(services, app: app, request: request, .genericError, status: .internalServerError)
        }
    }

    // MARK: forms

    /// `POST I/oauth/login`: handle and password, through the login flow.
    func password(_ visit: Visit, _ form: [String: String], _ context: OAuthAppContext) async -> Response {
        let handle = form["handle"] ?? ""
        guard Self.offersPassword(visit.app) else { return HostedPages.render(await signInPage(visit), issuerPath: visit.issuerPath) }
        do {
            switch try await services.oauth.hostedSignIn.password(
                app: visit.app, handle: handle, password: form["password"] ?? "", clientAddress: context.origin.address)
            {
            case .signedIn(let signedIn): return await finish(visit, signedIn)
            case .secondFactor(let loginToken, let factor):
                return HostedPages.render(codePage(visit, loginToken: loginToken, factor: factor), issuerPath: visit.issuerPath)
            case .codeSent:
                throw EndUserError.internalError
            }
        } catch {
            let (key, status, rule) = Self.refusal(error, step: .signIn)
            let text = visit.language(key, ["rule": rule ?? ""])
            return HostedPages.render(await signInPage(visit, handle: handle, error: text, status: status), issuerPath: visit.issuerPath)
        }
    }

    /// `POST I/oauth/login/code`: the second factor, through the loginComplete flow.
    func secondFactor(_ visit: Visit, _ form: [String: String]) async -> Response {
        let loginToken = form["login_token"] ?? ""
        do {
            let signedIn = try await services.oauth.hostedSignIn.secondFactor(app: visit.app, loginToken: loginToken, code: form["code"] ?? "")
            return await finish(visit, signedIn)
        } catch {
            let (key, status, _) = Self.refusal(error, step: .code)
            let factor: HostedSignIn.Factor = visit.app.settings.twoFactorVerification == .phone ? .sms : .totp
            return HostedPages.render(
                codePage(visit, loginToken: loginToken, factor: factor, error: visit.language(key), status: status), issuerPath: visit.issuerPath)
        }
    }

    /// `POST I/oauth/login/signup`: a new account by the app's signup flow.
    func signup(_ visit: Visit, _ form: [String: String], _ request: Request) async -> Response {
        let handle = form["handle"] ?? ""
        guard Self.offersSignup(visit.app) else { return HostedPages.render(await signInPage(visit), issuerPath: visit.issuerPath) }
        let locale = HostedText.accountLocale(app: visit.app, uiLocales: visit.pending.request.uiLocales, acceptLanguage: request.headers[.acceptLanguage])
        do {
            switch try await services.oauth.hostedSignIn.signup(app: visit.app, handle: handle, password: form["password"] ?? "", locale: locale) {
            case .signedIn(let signedIn): return await finish(visit, signedIn)
            case .codeSent: return HostedPages.render(signupCodePage(visit, handle: handle), issuerPath: visit.issuerPath)
            case .secondFactor: throw EndUserError.internalError
            }
        } catch {
            let (key, status, rule) = Self.refusal(error, step: .signup)
            let text = visit.language(key, ["rule": rule ?? ""])
            return HostedPages.render(signupPage(visit, handle: handle, error: text, status: status), issuerPath: visit.issuerPath)
        }
    }

    /// `POST I/oauth/login/signup/code`: the e-mailed code, through the completeSignup flow.
    func signupCode(_ visit: Visit, _ form: [String: String]) async -> Response {
        let handle = form["handle"] ?? ""
        do {
            let signedIn = try await services.oauth.hostedSignIn.completeSignup(app: visit.app, handle: handle, code: form["code"] ?? "")
            return await finish(visit, signedIn)
        } catch {
            let (key, status, _) = Self.refusal(error, step: .code)
            return HostedPages.render(signupCodePage(visit, handle: handle, error: visit.language(key), status: status), issuerPath: visit.issuerPath)
        }
    }

    /// `POST I/oauth/login/forgot`: a reset code, through the forgotPassword flow. Whether the account
    /// exists is not shown: the next page is the same either way.
    func forgot(_ visit: Visit, _ form: [String: String], _ context: OAuthAppContext) async -> Response {
        let handle = form["handle"] ?? ""
        guard Self.offersPassword(visit.app) else { return HostedPages.render(await signInPage(visit), issuerPath: visit.issuerPath) }
        do {
            try await services.oauth.hostedSignIn.forgotPassword(app: visit.app, handle: handle, clientAddress: context.origin.address)
        } catch EndUserError.accountDoesNotExist {
            // As if it existed.
        } catch {
            let (key, status, _) = Self.refusal(error, step: .forgot)
            return HostedPages.render(forgotPage(visit, handle: handle, error: visit.language(key), status: status), issuerPath: visit.issuerPath)
        }
        return HostedPages.render(resetPage(visit, handle: handle), issuerPath: visit.issuerPath)
    }

    /// `POST I/oauth/login/reset`: the code and a new password, through the resetPassword flow; then the
    /// sign-in form again.
    func reset(_ visit: Visit, _ form: [String: String], _ context: OAuthAppContext) async -> Response {
        let handle = form["handle"] ?? ""
        do {
            try await services.oauth.hostedSignIn.resetPassword(
                app: visit.app, handle: handle, code: form["code"] ?? "", password: form["password"] ?? "", clientAddress: context.origin.address)
        } catch {
            let (key, status, rule) = Self.refusal(error, step: .code)
            let text = visit.language(key, ["rule": rule ?? ""])
            return HostedPages.render(resetPage(visit, handle: handle, error: text, status: status), issuerPath: visit.issuerPath)
        }
        return HostedPages.render(await signInPage(visit, handle: handle, notice: visit.language(.passwordChanged)), issuerPath: visit.issuerPath)
    }

    /// After a sign-in: the code for the waiting request, the browser session's cookie, and the resume step.
    func finish(_ visit: Visit, _ signedIn: HostedSignIn.SignedIn) async -> Response {
        do {
            let done = try await Self.completion(
                services: services, app: visit.app, reference: visit.reference, browserKey: visit.browserKey, signedIn: signedIn)
            var headers = HostedPages.securityHeaders(formTargets: [])
            headers[.location] = done.location
            headers.append(HTTPField(name: .setCookie, value: done.setCookie))
            return Response(status: .seeOther, headers: headers)
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return HostedPages.render(
                HostedPages.Page(language: visit.language, app: visit.app, title: visit.language(.errorTitle), heading: visit.language(.errorTitle),
                                 template: "message", values: ["message": visit.language(.cookiesNeeded)], status: .badRequest),
                issuerPath: visit.issuerPath)
        } catch {
            if !(error is OAuthAuthorization.PendingFailure) {
                services.logger.error("hosted page: answering the request failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            return HostedPages.render(
                HostedPages.Page(language: visit.language, app: visit.app, title: visit.language(.errorTitle), heading: visit.language(.errorTitle),
                                 template: "message", values: ["message": visit.language(.requestExpired)], status: .badRequest),
                issuerPath: visit.issuerPath)
        }
    }

    /// Continues the waiting request `reference` after a sign-in on the page (the password form's, or
    /// another method's): issues the code, opens the browser session, and answers where the browser
    /// goes next (the resume step, same origin) and the browser-session cookie to set. Throws
    /// `OAuthAuthorization.PendingFailure` when the request is gone or belongs to another browser.
    static func completion(
        services: CosyncServices, app: App, reference: String, browserKey: String, signedIn: HostedSignIn.SignedIn
    ) async throws -> (location: String, setCookie: String) {
        let completed = try await services.oauth.authorization.complete(app: app, reference: reference, browserKey: browserKey, signedIn: signedIn)
        let location = issuerPath(services, appId: app.appId) + Path.resume + "?r=" + AuthorizeRoutes.encode(reference) + "&code="
            + AuthorizeRoutes.encode(completed.code)
        let cookie = HostedCookies.set(
            HostedCookies.ssoName(appId: app.appId, services: services), completed.browserToken, maxAge: completed.browserTokenMaxAge, services: services)
        return (location, cookie)
    }

    // MARK: refusals

    enum Step { case signIn, code, signup, forgot }

    /// The text, status and (for a password rule) the rule of a flow's refusal.
    static func refusal(_ error: any Error, step: Step) -> (HostedText.Key, HTTPResponse.Status, String?) {
        if let refused = error as? HostedSignIn.PasswordRefused { return (.passwordRule, .badRequest, refused.rule) }
        if error is KDFOverloaded { return (.busy, .serviceUnavailable, nil) }
        guard let failure = error as? EndUserError else { return (.genericError, .internalServerError, nil) }
        switch failure {
        case .invalidCredentials: return (step == .code ? .invalidCode : .invalidCredentials, .unauthorized, nil)
        case .invalidData: return (step == .signup ? .invalidSignup : step == .code ? .invalidCode : .missingField, .badRequest, nil)
        case .missingParameter: return (.missingField, .badRequest, nil)
        case .userSuspended: return (.userSuspended, .forbidden, nil)
        case .appSuspended, .appMigrated, .appNotFound: return (.appUnavailable, .forbidden, nil)
        case .accountNotVerified: return (.accountNotVerified, .forbidden, nil)
        case .rateLimited, .smsLimitReached: return (.rateLimited, .tooManyRequests, nil)
        case .handleAlreadyRegistered: return (.handleTaken, .conflict, nil)
        case .invalidMetadata: return (.invalidMetadata, .badRequest, nil)
        case .userNamesDisabled: return (.userNamesDisabled, .badRequest, nil)
        case .signupDisabled: return (.signupDisabled, .forbidden, nil)
        case .signupCodeExpired: return (.codeExpired, .badRequest, nil)
        case .accountDoesNotExist: return (step == .signIn ? .invalidCredentials : .invalidCode, .badRequest, nil)
        default: return (.genericError, .internalServerError, nil)
        }
    }
}

/// The hosted pages' cookies: the browser's binding key (CSRF, and which browser started a request)
/// and the per-app browser session. HttpOnly and SameSite=Lax; Secure and `__Host-` prefixed unless the
/// public URL is `http://` on a loopback host (see `HostedLoginRoutes`).
enum HostedCookies {
    static func secure(_ services: CosyncServices) -> Bool {
        guard let url = URLComponents(string: services.oauth.publicURL), url.scheme?.lowercased() == "http" else { return true }
        return !["localhost", "127.0.0.1", "::1", "[::1]"].contains(url.host?.lowercased() ?? "")
    }

    static func bindingName(services: CosyncServices) -> String { (secure(services) ? "__Host-" : "") + "cosync-browser" }
    static func ssoName(appId: String, services: CosyncServices) -> String { (secure(services) ? "__Host-" : "") + "cosync-sso-" + appId }

    /// A `Set-Cookie` value; `maxAge` nil makes it last as long as the browser session.
    static func set(_ name: String, _ value: String, maxAge: Int?, services: CosyncServices) -> String {
        var cookie = "\(name)=\(value); Path=/; HttpOnly; SameSite=Lax"
        if let maxAge { cookie += "; Max-Age=\(max(0, maxAge))" }
        if secure(services) { cookie += "; Secure" }
        return cookie
    }

    static func clear(_ name: String, services: CosyncServices) -> String { set(name, "", maxAge: 0, services: services) }

    static func value(_ request: Request, _ name: String) -> String? {
        guard let value = request.cookies[name]?.value, !value.isEmpty, value.utf8.count <= 200 else { return nil }
        return value
    }

    /// The browser's binding key, when it has a well-formed one.
    static func browserKey(_ request: Request, services: CosyncServices) -> String? {
        value(request, bindingName(services: services)).flatMap { HostedCSRF.isBrowserKey($0) ? $0 : nil }
    }
}
