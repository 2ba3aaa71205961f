import CosyncAuth
import Foundation
import Hummingbird
import Logging
import Metrics
import NIOCore

/// `/api/appuser/…`: the legacy wire of the CosyncAuthSwift and CosyncJWTSwift SDKs
/// (<doc:EndUserAPI>). Success is exactly HTTP 200 (`true`, a JSON object, or HTML for the e-mail
/// link); every business error is HTTP 400 `{"code": <int>, "message": <string>}`.
struct EndUserRoutes {
    let services: CosyncServices
    var flows: EndUserFlows { services.flows }

    /// Every endpoint name served (the path normalizer matches them case-insensitively).
    static let names = [
        "getApplication", "login", "loginAnonymous", "signup", "completeSignup", "invite", "register",
        "forgotPassword", "resetPassword", "changePassword", "getUser", "setUserMetadata", "setUserName",
        "userNameAvailable", "setLocale", "deleteAccount", "loginComplete", "socialLogin", "socialSignup", "setPhone",
        "verifyPhone", "setTwoFactorPhoneVerification", "setTwoFactorGoogleVerification", "appleLogin", "googleLogin",
        "appleSignup", "googleSignup",
    ]

    /// Every route sits in a group behind `EndUserEdge`, which resolves its credential once; the
    /// handlers take the typed context of their group.
    func register(on router: Router<ServerRequestContext>) {
        let api = router.group("api/appuser").add(middleware: LegacyErrorMiddleware(resolver: services.resolver)).add(middleware: FlowSpanMiddleware(prefix: "", enabled: services.configuration.tracing))
            .add(middleware: ClientOriginMiddleware(configuration: services.configuration))
        let resolver = services.resolver, f = flows
        /// Routes of the app-token (no token: `missing`).
        func byApp(_ missing: EndUserError, orQuery: Bool = false, bodyFirst: Bool = true) -> RouterGroup<EndUserAppContext> {
            api.group().add(middleware: EndUserEdge(credential: .appToken(missing: missing, orQuery: orQuery), resolver: resolver, bodyFirst: bodyFirst))
                .group(context: EndUserAppContext.self)
        }
        /// Routes of the access-token (no token: `missing`).
        func byCaller(_ missing: EndUserError, readsBody: Bool = true) -> RouterGroup<EndUserCallerContext> {
            api.group().add(middleware: EndUserEdge(credential: .accessToken(missing: missing), resolver: resolver, readsBody: readsBody))
                .group(context: EndUserCallerContext.self)
        }
        func byDeferredCaller(_ missing: EndUserError, readsBody: Bool = true) -> RouterGroup<EndUserDeferredCallerContext> {
            api.group().add(middleware: EndUserEdge(credential: .accessToken(missing: missing), resolver: resolver, readsBody: readsBody))
                .group(context: EndUserDeferredCallerContext.self)
        }

        byApp(.invalidAppToken, orQuery: true).post("login", use: login)
        let app = byApp(.invalidAppToken)
        app.post("loginAnonymous") { _, c in Self.tokens(try await f.loginAnonymous(app: c.app, fields: c.fields)) }
        app.post("signup", use: signup)
        app.post("loginComplete") { _, c in Self.tokens(try await f.loginComplete(app: c.app, fields: c.fields)) }
        app.post("socialLogin") { _, c in Self.tokens(try await f.socialLogin(app: c.app, fields: c.fields, provider: nil)) }
        app.post("appleLogin") { _, c in Self.tokens(try await f.socialLogin(app: c.app, fields: c.fields, provider: .apple)) }
        app.post("googleLogin") { _, c in Self.tokens(try await f.socialLogin(app: c.app, fields: c.fields, provider: .google)) }
        app.post("socialSignup") { _, c in Self.tokens(try await f.socialSignup(app: c.app, fields: c.fields, provider: nil)) }
        app.post("appleSignup") { _, c in Self.tokens(try await f.socialSignup(app: c.app, fields: c.fields, provider: .apple)) }
        app.post("googleSignup") { _, c in Self.tokens(try await f.socialSignup(app: c.app, fields: c.fields, provider: .google)) }
        let appOrMissing = byApp(.missingParameter)
        appOrMissing.post("register") { _, c in Self.tokens(try await f.register(app: c.app, fields: c.fields)) }
        appOrMissing.post("forgotPassword") { _, c in
            try await f.forgotPassword(app: c.app, fields: c.fields, clientAddress: c.origin.address)
            return Self.trueBody()
        }
        appOrMissing.post("resetPassword") { _, c in
            try await f.resetPassword(app: c.app, fields: c.fields, clientAddress: c.origin.address)
            return Self.trueBody()
        }
        // The app-token's error comes before the body's.
        byApp(.missingParameter, bodyFirst: false).post("completeSignup") { _, c in
            Self.tokens(try await f.completeSignup(app: c.app, fields: c.fields).tokens)
        }
        api.get("completeSignup", use: completeSignupLink)

        let user = byCaller(.missingParameter)
        user.post("invite") { _, c in try await f.invite(caller: c.caller, fields: c.fields); return Self.trueBody() }
        user.post("setUserName") { _, c in try await f.setUserName(caller: c.caller, fields: c.fields); return Self.trueBody() }
        user.post("setLocale") { _, c in try await f.setLocale(caller: c.caller, fields: c.fields); return Self.trueBody() }
        user.post("deleteAccount") { _, c in
            try await f.deleteAccount(caller: c.caller, fields: c.fields, clientAddress: c.origin.address)
            return Self.trueBody()
        }
        let userOrInvalid = byCaller(.invalidData)
        userOrInvalid.post("changePassword") { _, c in
            try await f.changePassword(caller: c.caller, fields: c.fields, clientAddress: c.origin.address)
            return Self.trueBody()
        }
        userOrInvalid.post("setPhone") { _, c in try await f.setPhone(caller: c.caller, fields: c.fields); return Self.trueBody() }
        userOrInvalid.post("setTwoFactorPhoneVerification") { _, c in
            try await f.setTwoFactorPhoneVerification(caller: c.caller, fields: c.fields)
            return Self.trueBody()
        }
        userOrInvalid.post("setTwoFactorGoogleVerification", use: setTwoFactorGoogleVerification)
        byCaller(.invalidData, readsBody: false).get("getUser") { _, c in
            JSONBody.response(Self.getUserBody(try f.getUser(caller: c.caller), appId: c.caller.app.appId))
        }
        // The contract checks a field before the access-token: the caller's error waits for the flow.
        byDeferredCaller(.missingParameter).post("setUserMetadata") { _, c in
            try await f.setUserMetadata(caller: { try c.caller.get() }, fields: c.fields)
            return Self.trueBody()
        }
        byDeferredCaller(.invalidData).post("verifyPhone") { _, c in
            try await f.verifyPhone(caller: { try c.caller.get() }, fields: c.fields)
            return Self.trueBody()
        }
        byDeferredCaller(.missingParameter, readsBody: false).get("userNameAvailable", use: userNameAvailable)
    }

    // MARK: request parts

    static func appToken(_ request: Request) -> String? { LegacyHeaders.value("app-token", in: request.headers) }
    static func accessToken(_ request: Request) -> String? { LegacyHeaders.value("access-token", in: request.headers) }

    /// The body's fields: JSON when Content-Type says so, else the lenient form parser (<doc:EndUserAPI> §1.3).
    static func fields(_ request: Request, context: ServerRequestContext) async throws -> Fields {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: context.maxUploadSize)
        } catch let error as NIOTooManyBytesError {
            throw error  // HTTP 413 (LegacyErrorMiddleware)
        } catch {
            throw EndUserError.invalidData  // a body that cannot be read, e.g. malformed chunked framing (HTTPParserError)
        }
        let bytes = Array(buffer.readableBytesView)
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        if contentType.hasPrefix("application/json") {
            guard let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)))?.objectValue else {
                throw EndUserError.invalidData
            }
            var values: [String: String] = [:]
            for (key, value) in object {
                if Self.hasNUL(key) { throw FieldHasNUL() }
                switch value {
                case .null: values[key] = ""
                case .string(let s): values[key] = s
                case .bool(let b): values[key] = b ? "true" : "false"
                case .int(let i): values[key] = String(i)
                case .double(let d): values[key] = String(d)
                case .array, .object: values[key] = String(decoding: (try? JSONCoding.encode(value)) ?? Data(), as: UTF8.self)
                }
                if value.containsNUL { throw FieldHasNUL() }
            }
            return Fields(values)
        }
        let form = LegacyForm.parse(bytes)
        if form.contains(where: { Self.hasNUL($0.key) || Self.hasNUL($0.value) }) { throw FieldHasNUL() }
        return Fields(form)
    }

    /// A NUL (U+0000, raw or as `%00` / `\u0000`) in a field name or value. PostgreSQL text cannot hold
    /// it and no client sends it: such a request is refused with E602 (`FieldHasNUL`).
    static func hasNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
    }

    /// The answer to a request whose fields hold a NUL: the credential is checked first, in the legacy
    /// order of <doc:EndUserAPI> §2.2 (the first present of `app-token`, `access-token`, query `appToken`), so an invalid
    /// token still answers E400 / E405; otherwise, and without a credential, E602.
    static func refuseNUL(_ request: Request, resolver: TenantResolver) async throws -> Never {
        if let token = appToken(request) {
            _ = try await resolver.app(token: token, whenMissing: .invalidData)
        } else if let token = accessToken(request) {
            _ = try await resolver.caller(accessToken: token, whenMissing: .invalidData)
        } else if let token = request.uri.queryParameters["appToken"] {
            _ = try await resolver.app(token: String(token), whenMissing: .invalidData)
        }
        throw EndUserError.invalidData
    }

    /// The client's address as limits count it: the TCP peer, or what trusted proxies put in the proxy
    /// header (every line of it), by the rule of `TrustedProxies`; an IPv6 client by its /64.
    static func clientAddress(_ request: Request, context: ServerRequestContext, configuration: ServerConfiguration) -> String? {
        let lines = request.headers.filter { $0.name.canonicalName == configuration.clientIPHeader }.map(\.value)
        return configuration.trustedProxies.clientAddress(peer: context.remoteAddress, headerLines: lines).map(IPNetwork.Address.limitKey)
    }

    // MARK: responses

    /// The 4 bytes `true`.
    static func trueBody() -> Response {
        Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(string: "true")))
    }

    static func tokens(_ issued: IssuedTokens) -> Response {
        var object: [String: JSONValue] = ["jwt": .string(issued.jwt), "access-token": .string(issued.accessToken)]
        if let signed = issued.signedUserToken { object["signed-user-token"] = .string(signed) }
        return JSONBody.response(object)
    }

    // MARK: handlers

    @Sendable func login(_ request: Request, context: EndUserAppContext) async throws -> Response {
        switch try await flows.login(app: context.app, fields: context.fields, clientAddress: context.origin.address) {
        case .tokens(let issued): return Self.tokens(issued)
        case .secondFactor(let loginToken): return JSONBody.response(["login-token": .string(loginToken)])
        }
    }

    @Sendable func signup(_ request: Request, context: EndUserAppContext) async throws -> Response {
        switch try await flows.signup(app: context.app, fields: context.fields, presentedAppToken: context.appToken) {
        case .tokens(let issued): return Self.tokens(issued)
        case .codeSent: return Self.trueBody()
        }
    }

    /// The e-mailed link (<doc:EndUserAPI> §5.7): answers HTML, also on errors (with HTTP 400 and the legacy code).
    @Sendable func completeSignupLink(_ request: Request, context: ServerRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        var values: [String: String] = [:]
        for key in ["handle", "code"] { values[key] = query[Substring(key)].map(String.init) }
        do {
            guard let token = query["appToken"].map(String.init), !token.isEmpty, values["handle"] != nil, values["code"] != nil else {
                throw EndUserError.missingParameter
            }
            let app = try await services.resolver.app(token: token, whenMissing: .missingParameter)
            guard !values.values.contains(where: Self.hasNUL) else { throw EndUserError.invalidData }
            let completed = try await flows.completeSignup(app: app, fields: Fields(values))
            return Self.html(completed.clickThroughHTML, status: .ok)
        } catch let error as EndUserError {
            let legacy = LegacyError(error)
            return Self.html(
                "<html><body><h2>This link did not work</h2><p>\(legacy.message) (code \(legacy.code)).</p></body></html>",
                status: .badRequest)
        }
    }

    static func html(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "text/html; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// The fields the SDK reads from getUser (<doc:EndUserAPI> §5.15), dates with milliseconds.
    static func getUserBody(_ user: User, appId: String) -> [String: JSONValue] {
        var object: [String: JSONValue] = [
            "handle": .string(user.handle), "loginProvider": .string(user.loginProvider), "locale": .string(user.locale),
            "twoFactorPhoneVerification": .bool(user.twoFactorPhone), "twoFactorGoogleVerification": .bool(user.twoFactorGoogle),
            "appId": .string(appId), "phoneVerified": .bool(user.phoneVerified), "metaData": .object(user.metaData),
            "status": .string(user.status.rawValue), "createdAt": .string(ISO8601.milliseconds(user.createdAt)),
            "updatedAt": .string(ISO8601.milliseconds(user.updatedAt)),
        ]
        if let userName = user.userName { object["userName"] = .string(userName) }
        if let phone = user.phone { object["phone"] = .string(phone) }
        if let lastLogin = user.lastLogin { object["lastLogin"] = .string(ISO8601.milliseconds(lastLogin)) }
        return object
    }

    @Sendable func userNameAvailable(_ request: Request, context: EndUserDeferredCallerContext) async throws -> Response {
        let name = request.uri.queryParameters["userName"].map(String.init)
        if let name, Self.hasNUL(name) { throw FieldHasNUL() }
        let available = try await flows.userNameAvailable(caller: try context.caller.get(), userName: name)
        return JSONBody.response(["available": .bool(available)])
    }

    @Sendable func setTwoFactorGoogleVerification(_ request: Request, context: EndUserCallerContext) async throws -> Response {
        guard let setup = try await flows.setTwoFactorGoogleVerification(caller: context.caller, fields: context.fields) else {
            return Self.trueBody()
        }
        let dataURI = "data:image/png;base64," + Data(setup.qrPNG).base64EncodedString()
        return JSONBody.response(["googleSecretKey": .string(setup.googleSecretKey), "QRDataImage": .string(dataURI)])
    }
}

/// A field name or value of an end-user request holds a NUL (see `EndUserRoutes.hasNUL`).
struct FieldHasNUL: Error {}

/// Maps every error of the end-user routes to HTTP 400 `{code, message}`; an unexpected failure is
/// logged (its type only) and answered `{code: 500}`.
struct LegacyErrorMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    /// Resolves the credential of a request refused for a NUL in its fields (`EndUserRoutes.refuseNUL`).
    var resolver: TenantResolver? = nil

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as EndUserError {
            return try LegacyError(error).response(from: request, context: context)
        } catch let error as LegacyError {
            return try error.response(from: request, context: context)
        } catch is FieldHasNUL {
            guard let resolver else { return try LegacyError.invalidData.response(from: request, context: context) }
            do {
                try await EndUserRoutes.refuseNUL(request, resolver: resolver)
            } catch let error as EndUserError {
                return try LegacyError(error).response(from: request, context: context)
            } catch {
                context.logger.error("end-user request failed", metadata: operatorMetadata(error))
                return try LegacyError.internalError.response(from: request, context: context)
            }
        } catch let busy as KDFOverloaded {
            return KDFOverloadedResponse.response(busy)
        } catch is NIOTooManyBytesError {
            // A body over ServerRequestContext.maxUploadSize (1 MiB): HTTP 413, the legacy error body.
            return JSONBody.response(["code": .int(602), "message": .string("invalid data")], status: .contentTooLarge)
        } catch where DatabaseAvailability.isUnavailable(error) {
            context.logger.warning("end-user request caught by a database outage: answered 503", metadata: operatorMetadata(error))
            return AvailabilityMiddleware.databaseUnavailable()
        } catch is CancellationError {
            // The request's deadline (or its client) gave up on it and was already answered: nothing failed here.
            return AvailabilityMiddleware.databaseUnavailable()
        } catch {
            context.logger.error("end-user request failed", metadata: operatorMetadata(error))
            return try LegacyError.internalError.response(from: request, context: context)
        }
    }
}

/// The answer to a password request refused because bcrypt's queue is full (`KDFScheduler`): HTTP 503,
/// `Retry-After`, and the `{code, message}` body every error of both APIs' 503s has.
enum KDFOverloadedResponse {
    static func response(_ busy: KDFOverloaded) -> Response {
        Counter(label: "cosync_kdf_refused_total").increment()
        return JSONBody.response(
            ["code": .int(503), "message": .string("the server is busy hashing passwords; try again shortly")],
            status: .serviceUnavailable, headers: [.retryAfter: String(busy.retryAfterSeconds)])
    }
}
