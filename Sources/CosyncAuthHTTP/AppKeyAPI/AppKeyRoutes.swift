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
    func register(on router: Router<ServerRequestContext>) {
        let api = router.group("_appkey/api/appuser").add(middleware: AppKeyErrorMiddleware()).add(middleware: FlowSpanMiddleware(prefix: "appkey "))
            .add(middleware: ClientOriginMiddleware(configuration: services.configuration))
        let f = flows, resolver = resolver
        api.get("app", use: { r, _ in
            let credentials = Self.credentials(r)
            let app = try await resolver.app(credentials, gates: false)
            return JSONBody.response(try await f.getApp(app: app, appToken: credentials.appToken))
        })
        api.get("user", use: { r, _ in JSONBody.response(try await f.getUser(caller: resolver.caller(Self.credentials(r)))) })
        api.post("signup", use: appObject { try await f.signup(app: $0, fields: $1) })
        api.post("signupConfirm", use: appObject { try await f.signupConfirm(app: $0, fields: $1) })
        api.post("signupComplete", use: { request, context in
            let fields = try await Self.fields(request, context: context)
            let token = try await resolver.signup(Self.credentials(request))
            return JSONBody.response(try await f.signupComplete(token: token, fields: fields))
        })
        api.post("login", use: appObject { try await f.login(app: $0, fields: $1) })
        api.post("loginComplete", use: appObject { try await f.loginComplete(app: $0, fields: $1) })
        api.post("loginAnonymous", use: appObject { try await f.loginAnonymous(app: $0, fields: $1) })
        api.post("loginAnonymousComplete", use: appObject { try await f.loginAnonymousComplete(app: $0, fields: $1) })
        api.post("verify", use: appObject { try await f.login(app: $0, fields: $1, verify: true) })
        api.post("verifyComplete", use: appObject { try await f.loginComplete(app: $0, fields: $1, verify: true) })
        api.post("setLocale", use: callerAction { try await f.setLocale(caller: $0, fields: $1) })
        api.post("setUserName", use: callerAction { try await f.setUserName(caller: $0, fields: $1) })
        api.get("userNameAvailable", use: { r, _ in
            let name = r.uri.queryParameters["userName"].map(String.init)
            if let name, name.utf8.contains(0) { throw AppKeyError.invalidData }
            let caller = try await resolver.caller(Self.credentials(r))
            return JSONBody.response(["available": .bool(try await f.userNameAvailable(caller: caller, userName: name))])
        })
        api.post("deleteAccount", use: callerAction { c, _ in try await f.deleteAccount(caller: c) })
        api.post("socialSignup", use: appObject { try await f.socialSignup(app: $0, fields: $1) })
        api.post("socialLogin", use: appObject { try await f.socialLogin(app: $0, fields: $1) })
        api.post("verifySocialAccount", use: { request, context in
            let fields = try await Self.fields(request, context: context)
            let credentials = Self.credentials(request)
            let app = try await resolver.app(credentials)
            // Verified now, judged by the flow after the social token.
            let access = await resolver.presentedAccess(credentials)
            return JSONBody.response(try await f.verifySocialAccount(app: app, access: access, fields: fields))
        })
        api.post("updateProfile", use: callerAction { try await f.updateProfile(caller: $0, fields: $1) })
        api.post("addPasskey", use: callerObject(allowReset: true) { c, _ in try await f.addPasskey(caller: c) })
        api.post("addPasskeyComplete", use: callerObject(allowReset: true) { try await f.addPasskeyComplete(caller: $0, fields: $1) })
        api.post("updatePasskey", use: callerObject { try await f.updatePasskey(caller: $0, fields: $1) })
        api.post("removePasskey", use: callerObject { try await f.removePasskey(caller: $0, fields: $1) })
    }

    typealias Handler = @Sendable (Request, ServerRequestContext) async throws -> Response

    /// An app-scope endpoint answering a JSON object: the body, then the app its credentials name (status gates on).
    func appObject(_ body: @escaping @Sendable (App, AppKeyFields) async throws -> [String: JSONValue]) -> Handler {
        { [resolver] request, context in
            let fields = try await Self.fields(request, context: context)
            let app = try await resolver.app(Self.credentials(request))
            return JSONBody.response(try await body(app, fields))
        }
    }

    /// A user-scope endpoint answering a JSON object: the body, then the caller its access token names (with
    /// `allowReset`, a passkey-reset token names one too).
    func callerObject(allowReset: Bool = false, _ body: @escaping @Sendable (AppKeyCaller, AppKeyFields) async throws -> [String: JSONValue])
        -> Handler
    {
        { [resolver] request, context in
            let fields = try await Self.fields(request, context: context)
            let caller = try await resolver.caller(Self.credentials(request), allowReset: allowReset)
            return JSONBody.response(try await body(caller, fields))
        }
    }

    /// A user-scope endpoint answering the four bytes `true`.
    func callerAction(_ body: @escaping @Sendable (AppKeyCaller, AppKeyFields) async throws -> Void) -> Handler {
        { [resolver] request, context in
            let fields = try await Self.fields(request, context: context)
            let caller = try await resolver.caller(Self.credentials(request))
            try await body(caller, fields)
            return EndUserRoutes.trueBody()
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

