import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The authorization endpoint, pushed authorization requests and RP-initiated logout (<doc:OAuth> §3
/// and "Logout"), under the issuer I = `{public URL}/apps/{appId}`:
///
/// - `GET`/`POST I/oauth/authorize`: an authorization request (query, or form body). Until the client
///   and its redirect URI are trusted, a refusal is an HTML page; after, a `302` to the redirect URI with
///   `error`, `error_description`, `state` and `iss`. A browser with a live session that needs no new
///   proof gets a confidential client's code at once (`302` with `code`, `state`, `iss`), and a public
///   client's after the user confirms (`303` to the "Continue as" page, `I/oauth/login/continue`);
///   otherwise `303` to the hosted login page (`HostedLoginRoutes`).
/// - `GET I/oauth/authorize/resume?r=…&code=…`: the step after a sign-in on the page: `302` to the
///   client, only in the browser that started the request (its binding cookie).
/// - `POST I/oauth/par` (RFC 9126): the client authenticates as at the token endpoint; `201`
///   `{"request_uri": "urn:ietf:params:oauth:request_uri:…", "expires_in": 90}`.
/// - `GET`/`POST I/oauth/logout` (OpenID Connect RP-Initiated Logout 1.0): `id_token_hint`, `client_id`,
///   `post_logout_redirect_uri`, `state`, `ui_locales`. Without a valid `id_token_hint` the user
///   confirms on a page first (its form posts back here with `csrf`).
struct AuthorizeRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {
        issuer.get("oauth/authorize") { request, context in
            await withParameters(request, context, form: false) { params in await authorize(request, context, params: params) }
        }
        issuer.post("oauth/authorize") { request, context in
            await withParameters(request, context, form: true) { params in await authorize(request, context, params: params) }
        }
        issuer.get("oauth/authorize/resume") { request, context in await resume(request, context) }
        issuer.post("oauth/par") { request, context in
            do throws(OAuthError) { return try await par(request, context) } catch { return OAuthWire.errorResponse(error) }
        }
        issuer.get("oauth/logout") { request, context in
            await withParameters(request, context, form: false) { params in await logout(request, context, params: params, post: false) }
        }
        issuer.post("oauth/logout") { request, context in
            await withParameters(request, context, form: true) { params in await logout(request, context, params: params, post: true) }
        }
    }

    /// The parameters of a GET (query) or a POST (form body); malformed ones (a repeated parameter, a
    /// body of another type) are an error page: nothing in them can be trusted.
    func withParameters(
        _ request: Request, _ context: OAuthAppContext, form: Bool, _ body: ([String: String]) async -> Response
    ) async -> Response {
        let params: [String: String]
        do throws(OAuthError) {
            params = form ? try await OAuthWire.formBody(request, context: context) : try Self.parameters(request)
        } catch {
            return HostedLoginRoutes.message(
                services, app: context.app, request: request, .badRequest, status: .badRequest, detail: "\(error.code): \(error.description)")
        }
        return await body(params)
    }

    /// The query string as parameters (strict: a repeated parameter is refused).
    static func parameters(_ request: Request) throws(OAuthError) -> [String: String] {
        guard let raw = request.uri.query, !raw.isEmpty else { return [:] }
        do { return try StrictForm.parse(Array(raw.utf8)) } catch { throw .invalidRequest(error.reason) }
    }

    static func encode(_ text: String) -> String { AuthorizationRules.formEncode(text) }

    /// A redirect with the hosted pages' headers.
    static func redirect(_ status: HTTPResponse.Status, to location: String, cookies: [String] = []) -> Response {
        var headers = HostedPages.securityHeaders(formTargets: [])
        headers[.location] = location
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: status, headers: headers)
    }

    /// The `ui_locales` of a request that may not be valid, for the language of an error page.
    static func locales(_ params: [String: String]) -> [String] {
        (params["ui_locales"] ?? "").split(separator: " ").prefix(10).map(String.init)
    }

    // MARK: authorize

    func authorize(_ request: Request, _ context: OAuthAppContext, params: [String: String]) async -> Response {
        let app = context.app
        let existing = HostedCookies.browserKey(request, services: services)
        let browserKey = existing ?? HostedCSRF.newBrowserKey()
        let sso = HostedCookies.value(request, HostedCookies.ssoName(appId: app.appId, services: services))
        let answer = await services.oauth.authorization.authorize(app: app, params: params, browserKey: browserKey, browserToken: sso)
        switch answer {
        case .errorPage(let error):
            return HostedLoginRoutes.message(
                services, app: app, request: request, error.status >= 500 ? .genericError : .badRequest,
                status: HTTPResponse.Status(code: error.status), uiLocales: Self.locales(params), detail: "\(error.code): \(error.description)")
        case .redirect(let location):
            return Self.redirect(.found, to: location)
        case .signIn(let reference), .chooseAccount(let reference):
            let cookies = existing == nil
                ? [HostedCookies.set(HostedCookies.bindingName(services: services), browserKey, maxAge: nil, services: services)] : []
            var path = HostedLoginRoutes.Path.login
            if case .chooseAccount = answer { path = HostedLoginRoutes.Path.continueAs }
            let location = HostedLoginRoutes.issuerPath(services, appId: app.appId) + path + "?r=" + Self.encode(reference)
            return Self.redirect(.seeOther, to: location, cookies: cookies)
        }
    }

    /// `GET I/oauth/authorize/resume`: the redirect to the client after a sign-in on the page, once.
    func resume(_ request: Request, _ context: OAuthAppContext) async -> Response {
        let app = context.app
        do {
            let query = try Self.parameters(request)
            // Only the browser that started the request (its binding cookie) may take the redirect.
            let browserKey = HostedCookies.browserKey(request, services: services)
            if let location = try await services.oauth.authorization.resume(
                app: app, reference: query["r"] ?? "", code: query["code"] ?? "", browserKey: browserKey)
            {
                return Self.redirect(.found, to: location)
            }
            return HostedLoginRoutes.message(services, app: app, request: request, .requestExpired, status: .badRequest)
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return HostedLoginRoutes.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)
        } catch {
            services.logger.error("resume failed", metadata: ["error": "\(String(reflecting: error))"])
            return HostedLoginRoutes.message(services, app: app, request: request, .genericError, status: .internalServerError)
        }
    }

    // MARK: pushed authorization requests

    /// `POST I/oauth/par` (RFC 9126 §2): the client authenticates as at the token endpoint; the request
    /// is checked as the authorization endpoint would; the answer names it for 90 seconds.
    func par(_ request: Request, _ context: OAuthAppContext) async throws(OAuthError) -> Response {
        let app = context.app
        let oauth = services.oauth
        var form = try await OAuthWire.formBody(request, context: context)
        var presented = OAuthClients.Presented(
            clientId: form["client_id"], clientSecret: form["client_secret"], assertionType: form["client_assertion_type"],
            assertion: form["client_assertion"])
        if let header = request.headers[.authorization], header.count > 6, header.prefix(6).lowercased() == "basic " {
            presented.basic = try Self.basicCredentials(String(header.dropFirst(6)))
        }
        let url = oauth.endpoint(appId: app.appId, OAuthRoutes.Path.par)
        let audience = [url, oauth.endpoint(appId: app.appId, OAuthRoutes.Path.token), oauth.issuer(appId: app.appId)]
        let registered = try await oauth.clients.authenticate(app: app, presented, audience: audience, clientAddress: context.origin.address)
        for credential in ["client_secret", "client_assertion", "client_assertion_type"] { form[credential] = nil }
        let jkt = try await oauth.dpop.verify(request.headers[OAuthWire.dpop], expecting: .init(method: "POST", url: url), appRef: app.ref)
        let pushed = try await oauth.authorization.push(app: app, client: registered, params: form, dpopJKT: jkt)
        var headers: HTTPFields = [.cacheControl: "no-store", OAuthWire.pragma: "no-cache"]
        if let nonce = oauth.dpop.currentNonce(appRef: app.ref), jkt != nil { headers[OAuthWire.dpopNonce] = nonce }
        return JSONBody.response(
            ["request_uri": .string(pushed.requestURI), "expires_in": .int(pushed.expiresIn)], status: .created, headers: headers)
    }

    /// `base64(urlencode(id) ":" urlencode(secret))` → (id, secret) (RFC 6749 §2.3.1).
    static func basicCredentials(_ encoded: String) throws(OAuthError) -> (id: String, secret: String) {
        let trimmed = encoded.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 4096, let data = Data(base64Encoded: trimmed), let colon = data.firstIndex(of: UInt8(ascii: ":")) else {
            throw .invalidClient("malformed HTTP Basic credentials")
        }
        do {
            return (try StrictForm.decode(data[data.startIndex..<colon]), try StrictForm.decode(data[data.index(after: colon)...]))
        } catch {
            throw .invalidClient("malformed HTTP Basic credentials")
        }
    }

    // MARK: logout

    func logout(_ request: Request, _ context: OAuthAppContext, params raw: [String: String], post: Bool) async -> Response {
        let app = context.app
        var params = raw
        let browserKey = HostedCookies.browserKey(request, services: services)
        var confirmed = false
        if post, let token = params.removeValue(forKey: "csrf") {
            guard services.oauth.csrf.verify(token, browserKey: browserKey, appId: app.appId, purpose: "logout") else {
                return HostedLoginRoutes.message(
                    services, app: app, request: request, browserKey == nil ? .cookiesNeeded : .formExpired, status: .forbidden,
                    uiLocales: Self.locales(params))
            }
            confirmed = true
        }
        let ssoName = HostedCookies.ssoName(appId: app.appId, services: services)
        let sso = HostedCookies.value(request, ssoName)
        switch await services.oauth.logout.logout(app: app, params: params, browserToken: sso, confirmed: confirmed) {
        case .errorPage(let error):
            return HostedLoginRoutes.message(
                services, app: app, request: request, error.status >= 500 ? .genericError : .badRequest,
                status: HTTPResponse.Status(code: error.status), uiLocales: Self.locales(params), detail: "\(error.code): \(error.description)")
        case .confirm:
            let key = browserKey ?? HostedCSRF.newBrowserKey()
            let language = HostedText.language(app: app, uiLocales: Self.locales(params), acceptLanguage: request.headers[.acceptLanguage])
            let kept = ["client_id", "post_logout_redirect_uri", "state", "ui_locales"].compactMap { name -> [String: String]? in
                guard let value = params[name], !value.isEmpty else { return nil }
                return ["name": name, "value": value]
            }
            var page = HostedPages.Page(
                language: language, app: app, title: language(.logoutTitle), heading: language(.logoutTitle), template: "logout",
                values: [
                    "action": HostedLoginRoutes.issuerPath(services, appId: app.appId) + OAuthRoutes.Path.logout,
                    "csrf": services.oauth.csrf.token(browserKey: key, appId: app.appId, purpose: "logout"), "hidden": kept,
                ])
            page.formTargets = params["post_logout_redirect_uri"].map { [$0] } ?? []
            if browserKey == nil { page.cookies = [HostedCookies.set(HostedCookies.bindingName(services: services), key, maxAge: nil, services: services)] }
            return HostedPages.render(page, issuerPath: HostedLoginRoutes.issuerPath(services, appId: app.appId))
        case .signedOut(let location, let endedBrowser):
            // A browser session of another user than the hint's stays, and so does its cookie.
            let cleared = sso == nil || !endedBrowser ? [] : [HostedCookies.clear(ssoName, services: services)]
            if let location { return Self.redirect(.found, to: location, cookies: cleared) }
            return HostedLoginRoutes.message(
                services, app: app, request: request, .signedOutBody, status: .ok, uiLocales: Self.locales(params), title: .signedOutTitle,
                cookies: cleared)
        }
    }
}
