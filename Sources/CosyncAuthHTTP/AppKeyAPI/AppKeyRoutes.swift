import CosyncAuth
import Foundation
import Hummingbird
import Logging
import NIOCore

/// The AppKey end-user API (<doc:AppKeyAPI> §4). Its routes live under an internal path that no client
/// calls: the path normalizer sends `/api/appuser/<name>` here when the request's credential names an
/// AppKey app (<doc:AppKeyAPI> §1.1), and `<COSYNC_APPKEY_PREFIX>/api/appuser/<name>` always.
struct AppKeyRoutes {
    let services: CosyncServices
    let flows: AppKeyFlows
    let resolver: AppKeyResolver

    init(services: CosyncServices) {
        self.services = services
        self.flows = AppKeyFlows(flows: services.flows)
        let core = services.flows
        self.resolver = AppKeyResolver(client: core.client, apps: core.apps, tokens: core.tokens, logger: core.logger)
    }

    /// The internal mount point.
    static let mount = "/_appkey/api/appuser/"

    /// Every AppKey endpoint name (matched case-insensitively: `setUsername` is `setUserName`).
    static let names = [
        "app", "user", "signup", "signupConfirm", "signupComplete", "login", "loginComplete", "loginAnonymous", "loginAnonymousComplete",
        "verify", "verifyComplete", "setLocale", "setUserName", "userNameAvailable", "deleteAccount", "socialSignup", "socialLogin",
        "verifySocialAccount", "updateProfile", "addPasskey", "addPasskeyComplete", "updatePasskey", "removePasskey",
    ]

    /// Every endpoint reads its body first, then resolves its credentials (<doc:AppKeyAPI> §1.5), then runs its flow:
    /// a malformed body answers before a bad credential, a bad credential before a missing field.
    /// `AppKeyEdge` does the first two, once; the handlers take the typed context of their group.
    func register(on router: Router<ServerRequestContext>) {
        let api = router.group("_appkey/api/appuser").add(middleware: AppKeyErrorMiddleware()).add(middleware: FlowSpanMiddleware(prefix: "appkey ", enabled: services.configuration.tracing))
            .add(middleware: ClientOriginMiddleware(configuration: services.configuration))
        let f = flows, resolver = resolver
        func byApp(gates: Bool = true, presentedAccess: Bool = false, readsBody: Bool = true) -> RouterGroup<AppKeyAppContext> {
            api.group().add(middleware: AppKeyEdge(credential: .app(gates: gates, presentedAccess: presentedAccess), resolver: resolver, readsBody: readsBody))
                .group(context: AppKeyAppContext.self)
        }
        func byCaller(allowReset: Bool = false, readsBody: Bool = true) -> RouterGroup<AppKeyCallerContext> {
            api.group().add(middleware: AppKeyEdge(credential: .caller(allowReset: allowReset), resolver: resolver, readsBody: readsBody))
                .group(context: AppKeyCallerContext.self)
        }

        byApp(gates: false, readsBody: false).get("app") { _, c in JSONBody.response(try await f.getApp(app: c.app, appToken: c.credentials.appToken).json()) }
        let app = byApp()
        app.post("signup") { _, c in JSONBody.response(try await f.signup(app: c.app, fields: c.fields).json()) }
        app.post("signupConfirm") { _, c in JSONBody.response(try await f.signupConfirm(app: c.app, fields: c.fields).json()) }
        app.post("login") { _, c in JSONBody.response(try await f.login(app: c.app, fields: c.fields).json()) }
        app.post("loginComplete") { _, c in JSONBody.response(try await f.loginComplete(app: c.app, fields: c.fields).json()) }
        app.post("loginAnonymous") { _, c in JSONBody.response(try await f.loginAnonymous(app: c.app, fields: c.fields).json()) }
        app.post("loginAnonymousComplete") { _, c in JSONBody.response(try await f.loginAnonymousComplete(app: c.app, fields: c.fields).json()) }
        app.post("verify") { _, c in JSONBody.response(try await f.login(app: c.app, fields: c.fields, verify: true).json()) }
        app.post("verifyComplete") { _, c in JSONBody.response(try await f.loginComplete(app: c.app, fields: c.fields, verify: true).json()) }
        app.post("socialSignup") { _, c in JSONBody.response(try await f.socialSignup(app: c.app, fields: c.fields).json()) }
        app.post("socialLogin") { _, c in JSONBody.response(try await f.socialLogin(app: c.app, fields: c.fields).json()) }
        // The access token that may come along is verified now and judged by the flow after the social token.
        byApp(presentedAccess: true).post("verifySocialAccount") { _, c in
            JSONBody.response(try await f.verifySocialAccount(app: c.app, access: c.presentedAccess, fields: c.fields).json())
        }
        api.group().add(middleware: AppKeyEdge(credential: .signup, resolver: resolver)).group(context: AppKeySignupContext.self)
            .post("signupComplete") { _, c in JSONBody.response(try await f.signupComplete(token: c.signup, fields: c.fields).json()) }

        byCaller(readsBody: false).get("user") { _, c in JSONBody.response(try await f.getUser(caller: c.caller).json()) }
        let user = byCaller()
        user.post("setLocale") { _, c in try await f.setLocale(caller: c.caller, fields: c.fields); return EndUserRoutes.trueBody() }
        user.post("setUserName") { _, c in try await f.setUserName(caller: c.caller, fields: c.fields); return EndUserRoutes.trueBody() }
        user.post("deleteAccount") { _, c in try await f.deleteAccount(caller: c.caller); return EndUserRoutes.trueBody() }
        user.post("updateProfile") { _, c in try await f.updateProfile(caller: c.caller, fields: c.fields); return EndUserRoutes.trueBody() }
        user.post("updatePasskey") { _, c in JSONBody.response(try await f.updatePasskey(caller: c.caller, fields: c.fields).json()) }
        user.post("removePasskey") { _, c in JSONBody.response(try await f.removePasskey(caller: c.caller, fields: c.fields).json()) }
        let userOrReset = byCaller(allowReset: true)
        userOrReset.post("addPasskey") { _, c in JSONBody.response(try await f.addPasskey(caller: c.caller).json()) }
        userOrReset.post("addPasskeyComplete") { _, c in JSONBody.response(try await f.addPasskeyComplete(caller: c.caller, fields: c.fields).json()) }
        // The query is checked before the caller.
        api.group().add(middleware: AppKeyEdge(credential: .caller(allowReset: false), resolver: resolver, readsBody: false))
            .group(context: AppKeyDeferredCallerContext.self)
            .get("userNameAvailable") { r, c in
                let name = r.uri.queryParameters["userName"].map(String.init)
                if let name, name.utf8.contains(0) { throw AppKeyError.invalidData }
                return JSONBody.response(["available": .bool(try await f.userNameAvailable(caller: try c.caller.get(), userName: name))])
            }
    }

    static func credentials(_ request: Request) -> AppKeyCredentials {
        AppKeyCredentials(
            appToken: LegacyHeaders.value("app-token", in: request.headers), accessToken: LegacyHeaders.value("access-token", in: request.headers),
            signupToken: LegacyHeaders.value("signup-token", in: request.headers))
    }

    /// The body's fields (<doc:AppKeyAPI> §1.3): JSON when Content-Type says so or the body starts with `{`, else the
    /// lenient form parser. A NUL anywhere → E602.
    static func fields(_ request: Request, context: ServerRequestContext) async throws -> AppKeyFields {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: context.maxUploadSize)
        } catch let error as NIOTooManyBytesError {
            throw error
        } catch {
            throw AppKeyError.invalidData
        }
        let bytes = Array(buffer.readableBytesView)
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        let firstByte = bytes.first(where: { ![0x20, 0x09, 0x0a, 0x0d].contains($0) })
        if contentType.hasPrefix("application/json") || firstByte == UInt8(ascii: "{") {
            if firstByte == nil { return AppKeyFields([:]) }
            guard let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)))?.objectValue else {
                throw AppKeyError.invalidData.with("the body is not a JSON object")
            }
            guard !JSONValue.object(object).containsNUL else { throw AppKeyError.invalidData }
            return AppKeyFields(object)
        }
        let form = LegacyForm.parse(bytes)
        guard !form.contains(where: { $0.key.utf8.contains(0) || $0.value.utf8.contains(0) }) else { throw AppKeyError.invalidData }
        return AppKeyFields(form: form)
    }
}

/// Maps every error of the AppKey routes to HTTP 400 `{code, message}` (<doc:AppKeyAPI> §1.6); an unexpected failure
/// is logged (its type only) and answered `{code: 500}`.
struct AppKeyErrorMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as AppKeyError {
            return Self.response(error)
        } catch let error as EndUserError {
            return Self.response(AppKeyError(error))
        } catch is NIOTooManyBytesError {
            return JSONBody.response(["code": .int(602), "message": .string("the body is too large")], status: .contentTooLarge)
        } catch where DatabaseAvailability.isUnavailable(error) {
            context.logger.warning("appkey request caught by a database outage: answered 503", metadata: operatorMetadata(error))
            return AvailabilityMiddleware.databaseUnavailable()
        } catch {
            context.logger.error("appkey request failed", metadata: operatorMetadata(error))
            return Self.response(.internalError)
        }
    }

    static func response(_ error: AppKeyError) -> Response {
        let (code, message) = AppKeyWireError.body(error)
        return JSONBody.response(["code": .int(code), "message": .string(message)], status: .badRequest)
    }
}

