import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// What the Portal needs of the server's request context. The HTTP module's context conforms; this
/// module cannot import it (the HTTP module depends on this one).
public protocol PortalRequestContext: RequestContext {
    /// The TCP peer's address. The Portal applies the configured trusted proxies to it, as the
    /// end-user API does, so that sign-in limits count the real client.
    var remoteAddress: String? { get }
}

/// The Portal's place on the server.
public enum Portal {
    /// Whether a route of the router table (`"GET /portal/…"`) is one of the Portal's.
    public static func isPortalRoute(_ route: String) -> Bool {
        guard let path = route.split(separator: " ").last else { return false }
        return path == "/portal" || path.hasPrefix("/portal/")
    }
}

/// The Portal (issue 23): the web console of operators and app developers, under `/portal`.
///
/// | Path | Page / action |
/// |---|---|
/// | GET/POST `/portal/sign-in` | sign in, step 1 (e-mail and password); its answer is the code form |
/// | POST `/portal/sign-in/code` | step 2 (TOTP code and the hidden ticket); GET goes back to step 1 |
/// | GET/POST `/portal/invite/{code}` | accept an invitation: choose a password |
/// | GET/POST `/portal/enrol` | enrol the authenticator (the key travels in the sealed hand-over cookie) |
/// | POST `/portal/sign-out` | sign out |
/// | GET/POST `/portal/reauth?next=` | fresh sign-in before a destructive action |
/// | GET `/portal` | the apps the account sees (`q`, `cursor`) |
/// | GET/POST `/portal/apps/new` | create an app (operators) |
/// | GET `/portal/apps/{appId}` | overview |
/// | GET/POST `/portal/apps/{appId}/settings` | auth settings (signup flow, metadata fields) |
/// | GET `/portal/apps/{appId}/keys`, POST `…/keys/rotate-token` | keys; rotating needs a fresh sign-in |
/// | GET `/portal/apps/{appId}/users` | users search |
/// | GET `/portal/apps/{appId}/users/{userId}`, POST `…/sessions/{sessionId}/revoke` | a user and their sessions |
/// | GET/POST `/portal/apps/{appId}/members` | members; owners invite |
///
/// Every change goes through the same core services as the admin API (`services.apps`,
/// `services.users`, `services.portal`), audited as `portal:<email>`. Every POST carries a CSRF token
/// bound to the session cookie (before sign-in: to the browser key) and to what the form is for; a
/// POST without a valid one answers 403. A viewer gets no forms that change anything and a 403 for a
/// forged POST; an app the account has no role on answers 404.
public struct PortalRoutes<Context: PortalRequestContext>: Sendable {
    let services: CosyncServices
    let cookies: PortalCookies
    let csrf: PortalCSRF
    let sealer: PortalSealer

    static var pageSize: Int { 50 }

    public init(services: CosyncServices) {
        self.services = services
        cookies = PortalCookies(publicURL: services.configuration.publicURL)
        csrf = PortalCSRF(box: services.configuration.secretBox)
        sealer = PortalSealer(box: services.configuration.secretBox)
    }

    public func register(on router: Router<Context>) {
        // Router middleware also wraps the router's not-found answer (whatever the order it was added
        // in), so unknown /portal paths and methods a page lacks get the Portal's 404 and headers too.
        router.add(middleware: PortalHeadersMiddleware(routes: self))
        router.get("portal/assets/portal.css") { _, _ in Self.asset(PortalAssets.stylesheet, type: "text/css; charset=utf-8") }
        router.get("portal/assets/portal.js") { _, _ in Self.asset(PortalAssets.script, type: "text/javascript; charset=utf-8") }

        router.get("portal/sign-in") { request, _ in await signInPage(request) }
        router.post("portal/sign-in") { request, context in await signIn(request, context) }
        router.get("portal/sign-in/code") { _, _ in PortalPages.redirect("/portal/sign-in") }
        router.post("portal/sign-in/code") { request, context in await signInCode(request, context) }
        router.get("portal/invite/:code") { request, context in await invitePage(request, code: context.parameters.get("code") ?? "") }
        router.post("portal/invite/:code") { request, context in await acceptInvite(request, context, code: context.parameters.get("code") ?? "") }
        router.get("portal/enrol") { request, _ in await enrolPage(request) }
        router.post("portal/enrol") { request, context in await enrol(request, context) }
        router.post("portal/sign-out") { request, _ in await signOut(request) }
        router.get("portal/reauth") { request, _ in await reauthPage(request) }
        router.post("portal/reauth") { request, context in await reauth(request, context) }

        router.get("portal") { request, _ in await appsPage(request) }
        router.get("portal/apps/new") { request, _ in await newAppPage(request) }
        router.post("portal/apps/new") { request, _ in await createApp(request) }
        router.get("portal/apps/:appId") { request, context in await overview(request, appId: context.parameters.get("appId") ?? "") }
        router.get("portal/apps/:appId/keys") { request, context in await keysPage(request, appId: context.parameters.get("appId") ?? "") }
        router.post("portal/apps/:appId/keys/rotate-token") { request, context in
            await rotateToken(request, appId: context.parameters.get("appId") ?? "")
        }
        router.get("portal/apps/:appId/members") { request, context in
            await membersPage(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/members") { request, context in
            await invite(request, appId: context.parameters.get("appId") ?? "")
        }
        registerSettings(on: router)
        registerOperator(on: router)
        registerImport(on: router)
        registerObserve(on: router)
        registerUserPages(on: router)
        registerWebhooks(on: router)
        registerPasskeys(on: router)
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: type, .cacheControl: "public, max-age=3600", PortalHeaders.xContentTypeOptions: "nosniff"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: who is asking

    /// A signed-in account on one request.
    struct Visitor {
        let session: PortalSession
        let cookie: String
        var actor: String { session.auditActor }
        var isFresh: Bool { session.isFresh() }
    }

    /// Why a request stops before its page.
    enum Stop: Error {
        case notFound
        case forbidden
        case formExpired
        case badRequest
        case signIn
        case reauth(next: String)
    }

    /// The client's address as the limits count it (trusted proxies applied).
    func clientAddress(_ request: Request, _ context: Context) -> String? {
        let configuration = services.configuration
        let lines = request.headers.filter { $0.name.canonicalName == configuration.clientIPHeader }.map(\.value)
        return configuration.trustedProxies.clientAddress(peer: context.remoteAddress, headerLines: lines).map(IPNetwork.Address.limitKey)
    }

    /// The signed-in account of this request, or nil.
    func visitor(_ request: Request) async throws -> Visitor? {
        guard let cookie = cookies.session(request) else { return nil }
        guard let session = try await services.portal.session(cookie: cookie) else { return nil }
        return Visitor(session: session, cookie: cookie)
    }

    /// A page for a signed-in account; without one, the sign-in page.
    func signedIn(_ request: Request, _ body: (Visitor) async throws -> Response) async -> Response {
        let visitor: Visitor
        do {
            guard let found = try await self.visitor(request) else { throw Stop.signIn }
            visitor = found
        } catch {
            return stopped(error, visitor: nil)
        }
        do { return try await body(visitor) } catch { return stopped(error, visitor: visitor) }
    }

    /// A form of a signed-in account: its CSRF token (bound to the session cookie and `purpose`) first.
    func signedInPost(_ request: Request, purpose: String, _ body: (Visitor, [String: String]) async throws -> Response) async -> Response {
        guard let form = await PortalForm.body(request) else { return stopped(Stop.badRequest, visitor: nil) }
        guard let cookie = cookies.session(request), csrf.verify(form["csrf"], bound: cookie, purpose: purpose) else {
            return stopped(Stop.formExpired, visitor: nil)
        }
        let visitor: Visitor
        do {
            guard let found = try await self.visitor(request) else { throw Stop.signIn }
            visitor = found
        } catch {
            return stopped(error, visitor: nil)
        }
        do { return try await body(visitor, form) } catch { return stopped(error, visitor: visitor) }
    }

    /// The app of an app page, and the account's role on it; 404 when the account has none (whether
    /// the app exists is not said).
    func access(_ visitor: Visitor, appId: String) async throws -> (App, PortalRole) {
        guard AppAdministration.isAppId(appId), let role = try await services.portal.role(of: visitor.session, appId: appId),
            let app = try await services.apps.currentApp(appId: appId)
        else { throw Stop.notFound }
        return (app, role)
    }

    /// The browser key of a page shown before sign-in, and the cookie that sets it when it is new.
    func browserKey(_ request: Request) -> (key: String, setCookie: String?) {
        if let key = cookies.browserKey(request) { return (key, nil) }
        let key = HostedCSRF.newBrowserKey()
        return (key, cookies.set(cookies.browserName, key))
    }

    /// A form shown before sign-in: its CSRF token (bound to the browser key and `purpose`) first.
    func anonymousPost(_ request: Request, purpose: String) async -> Result<(form: [String: String], browserKey: String), StopResponse> {
        guard let form = await PortalForm.body(request) else { return .failure(StopResponse(response: stopped(Stop.badRequest, visitor: nil))) }
        let key = cookies.browserKey(request)
        guard csrf.verify(form["csrf"], bound: key, purpose: purpose), let key else {
            return .failure(StopResponse(response: message(
                key == nil ? .cookiesNeeded : .formExpired, title: .forbiddenTitle, status: .forbidden, link: ("/portal/sign-in", .backToSignIn))))
        }
        return .success((form, key))
    }

    struct StopResponse: Error { let response: Response }

    // MARK: answers

    func makePage(_ visitor: Visitor?, heading: String, template: String, values: [String: Any] = [:], status: HTTPResponse.Status = .ok) -> PortalPages.Page {
        var page = PortalPages.Page(heading: heading, template: template, values: values, status: status)
        if let visitor {
            page.signedIn = (visitor.session.account.email, csrf.token(bound: visitor.cookie, purpose: "sign-out"))
            page.isOperator = visitor.session.account.isOperator
        }
        return page
    }

    /// A page that only says something.
    func message(
        _ key: PortalText.Key, title: PortalText.Key = .errorTitle, status: HTTPResponse.Status, visitor: Visitor? = nil,
        fill: [String: String] = [:], link: (url: String, text: PortalText.Key)? = nil, cookies: [String] = []
    ) -> Response {
        var values: [String: Any] = ["message": PortalText.text(key, fill)]
        if let link {
            values["link"] = link.url
            values["linkText"] = PortalText.text(link.text)
        }
        var page = makePage(visitor, heading: PortalText.text(title), template: "message", values: values, status: status)
        page.cookies = cookies
        return PortalPages.render(page)
    }

    /// The answer when a request stops: a redirect to sign in or to re-authenticate, or a refusal page.
    func stopped(_ error: any Error, visitor: Visitor?) -> Response {
        switch error {
        case Stop.signIn:
            return PortalPages.redirect("/portal/sign-in", cookies: [cookies.clear(cookies.sessionName)])
        case Stop.reauth(let next):
            return PortalPages.redirect("/portal/reauth?next=" + PortalForm.encode(next))
        case Stop.notFound, PortalError.notFound, AdminFailure.notFound:
            return message(.notFound, title: .notFoundTitle, status: .notFound, visitor: visitor)
        case Stop.forbidden, PortalError.forbidden:
            return message(.forbidden, title: .forbiddenTitle, status: .forbidden, visitor: visitor)
        case Stop.formExpired:
            return message(.formExpired, title: .forbiddenTitle, status: .forbidden, visitor: visitor)
        case Stop.badRequest, AdminFailure.badRequest:
            return message(.badRequest, status: .badRequest, visitor: visitor)
        case is KDFOverloaded:
            return message(.busy, status: .serviceUnavailable, visitor: visitor)
        default:
            services.logger.error("portal: a page failed", metadata: ["error": "\(String(reflecting: error))"])
            return message(.genericError, status: .internalServerError, visitor: visitor)
        }
    }

    /// The text and status of a refusal the page shows in its form (`form-error`): the admin API's
    /// validation messages, and the Portal account errors a form can fix. Nil for other errors.
    static func formError(_ error: any Error) -> (String, HTTPResponse.Status)? {
        switch error {
        case AdminFailure.invalid(let field): return (field.description, .badRequest)
        case AdminFailure.badRequest(_, let text): return (text, .badRequest)
        case AdminFailure.conflict(_, let text): return (text, .conflict)
        case PortalError.badInput(let text): return (text, .badRequest)
        case PortalError.conflict(let text): return (text, .conflict)
        case PortalError.weakPassword(let reason): return (PortalText.text(.weakPassword, ["reason": reason]), .badRequest)
        case PortalError.invalidCredentials: return (PortalText.text(.invalidCredentials), .unauthorized)
        case PortalError.invalidCode: return (PortalText.text(.invalidCode), .unauthorized)
        case PortalError.locked(let seconds): return (PortalText.text(.locked, ["seconds": String(seconds)]), .tooManyRequests)
        case PortalError.needsSecondFactor: return (PortalText.text(.needsSecondFactor), .forbidden)
        case is KDFOverloaded: return (PortalText.text(.busy), .serviceUnavailable)
        default: return nil
        }
    }

    static func date(_ date: Date?) -> String {
        guard let date else { return "" }
        return ISO8601.milliseconds(date).prefix(16).replacingOccurrences(of: "T", with: " ") + " UTC"
    }
}

/// Every answer under `/portal` carries `PortalHeaders.security()`: the pages set them already; this
/// adds any that are missing (the assets keep their own Cache-Control) and answers what no route
/// handles (an unknown path, a method a page lacks) with the Portal's own 404 page. Other paths pass
/// through untouched.
struct PortalHeadersMiddleware<Context: PortalRequestContext>: RouterMiddleware {
    let routes: PortalRoutes<Context>

    static func isPortal(_ path: String) -> Bool { path == "/portal" || path.hasPrefix("/portal/") }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.isPortal(request.uri.path) else { return try await next(request, context) }
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response =
                error.status == .notFound
                ? routes.message(.notFound, title: .notFoundTitle, status: .notFound)
                : routes.message(error.status.code < 500 ? .badRequest : .genericError, status: error.status)
        } catch {
            response = routes.message(.genericError, status: .internalServerError)
        }
        for field in PortalHeaders.security() where response.headers[field.name] == nil {
            response.headers.append(field)
        }
        return response
    }
}
