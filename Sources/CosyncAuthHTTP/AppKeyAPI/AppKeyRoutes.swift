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

    init(services: CosyncServices) {
        self.services = services
        self.flows = AppKeyFlows(flows: services.flows)
    }

    /// The internal mount point.
    static let mount = "/_appkey/api/appuser/"

    /// Every AppKey endpoint name (matched case-insensitively: `setUsername` is `setUserName`).
    static let names = [
        "app", "user", "signup", "signupConfirm", "signupComplete", "login", "loginComplete", "loginAnonymous", "loginAnonymousComplete",
        "verify", "verifyComplete", "setLocale", "setUserName", "userNameAvailable", "deleteAccount", "socialSignup", "socialLogin",
        "verifySocialAccount", "updateProfile", "addPasskey", "addPasskeyComplete", "updatePasskey", "removePasskey",
    ]

    func register(on router: Router<ServerRequestContext>) {
        let api = router.group("_appkey/api/appuser").add(middleware: AppKeyErrorMiddleware()).add(middleware: FlowSpanMiddleware(prefix: "appkey "))
            .add(middleware: ClientOriginMiddleware(configuration: services.configuration))
        let f = flows
        api.get("app", use: { r, _ in JSONBody.response(try await f.getApp(Self.credentials(r))) })
        api.get("user", use: { r, _ in JSONBody.response(try await f.getUser(Self.credentials(r))) })
        api.post("signup", use: object { try await f.signup($0, fields: $1) })
        api.post("signupConfirm", use: object { try await f.signupConfirm($0, fields: $1) })
        api.post("signupComplete", use: object { try await f.signupComplete($0, fields: $1) })
        api.post("login", use: object { try await f.login($0, fields: $1) })
        api.post("loginComplete", use: object { try await f.loginComplete($0, fields: $1) })
        api.post("loginAnonymous", use: object { try await f.loginAnonymous($0, fields: $1) })
        api.post("loginAnonymousComplete", use: object { try await f.loginAnonymousComplete($0, fields: $1) })
        api.post("verify", use: object { try await f.login($0, fields: $1, verify: true) })
        api.post("verifyComplete", use: object { try await f.loginComplete($0, fields: $1, verify: true) })
        api.post("setLocale", use: action { try await f.setLocale($0, fields: $1) })
        api.post("setUserName", use: action { try await f.setUserName($0, fields: $1) })
        api.get("userNameAvailable", use: { r, _ in
            let name = r.uri.queryParameters["userName"].map(String.init)
            if let name, name.utf8.contains(0) { throw AppKeyError.invalidData }
            return JSONBody.response(["available": .bool(try await f.userNameAvailable(Self.credentials(r), userName: name))])
        })
        api.post("deleteAccount", use: action { c, _ in try await f.deleteAccount(c) })
        api.post("socialSignup", use: object { try await f.socialSignup($0, fields: $1) })
        api.post("socialLogin", use: object { try await f.socialLogin($0, fields: $1) })
        api.post("verifySocialAccount", use: object { try await f.verifySocialAccount($0, fields: $1) })
        api.post("updateProfile", use: action { try await f.updateProfile($0, fields: $1) })
        api.post("addPasskey", use: object { c, _ in try await f.addPasskey(c) })
        api.post("addPasskeyComplete", use: object { try await f.addPasskeyComplete($0, fields: $1) })
        api.post("updatePasskey", use: object { try await f.updatePasskey($0, fields: $1) })
        api.post("removePasskey", use: object { try await f.removePasskey($0, fields: $1) })
    }

    typealias Handler = @Sendable (Request, ServerRequestContext) async throws -> Response

    /// An endpoint answering a JSON object.
    func object(_ body: @escaping @Sendable (AppKeyCredentials, AppKeyFields) async throws -> [String: JSONValue]) -> Handler {
        { request, context in
            let fields = try await Self.fields(request, context: context)
            return JSONBody.response(try await body(Self.credentials(request), fields))
        }
    }

    /// An endpoint answering the four bytes `true`.
    func action(_ body: @escaping @Sendable (AppKeyCredentials, AppKeyFields) async throws -> Void) -> Handler {
        { request, context in
            let fields = try await Self.fields(request, context: context)
            try await body(Self.credentials(request), fields)
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
        JSONBody.response(["code": .int(error.code), "message": .string(error.message)], status: .badRequest)
    }
}

