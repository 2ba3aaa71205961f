import CosyncAuth
import Hummingbird

/// The end-user API's edge (<doc:EndUserAPI> §2.2): reads the body's fields and resolves the request's
/// credential into the `App` or the `AuthenticatedCaller` once, before the handler, in the order the
/// contract answers errors in. The handlers of a group behind it take a typed context
/// (`EndUserAppContext`, `EndUserCallerContext`) and cannot be written without the resolved values.
struct EndUserEdge: RouterMiddleware {
    typealias Context = ServerRequestContext

    /// The credential a route is authenticated by, and the error when none came (it differs per endpoint).
    enum Credential: Sendable {
        /// The `app-token` header; with `orQuery`, the `appToken` query parameter when the header is absent (login).
        case appToken(missing: EndUserError, orQuery: Bool)
        /// The `access-token` header.
        case accessToken(missing: EndUserError)
    }

    let credential: Credential
    let resolver: TenantResolver
    /// False: the credential's error comes before the body is read (completeSignup).
    var bodyFirst = true
    /// False: a GET without a body.
    var readsBody = true

    /// What the edge resolved; the typed contexts take it apart.
    struct Resolved: Sendable {
        var fields = Fields([:])
        /// The app-token as presented ("" when none came).
        var appToken = ""
        /// Resolved, or the error the contract answers; a typed context throws it.
        var app: Result<App, any Error>?
        var caller: Result<AuthenticatedCaller, any Error>?
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        var resolved = Resolved()
        if readsBody && bodyFirst { resolved.fields = try await EndUserRoutes.fields(request, context: context) }
        switch credential {
        case .appToken(let missing, let orQuery):
            let token = EndUserRoutes.appToken(request) ?? (orQuery ? request.uri.queryParameters["appToken"].map(String.init) : nil)
            resolved.appToken = token ?? ""
            // Product dispatch already resolved this token for the names both APIs share: reused.
            let dispatched = context.dispatchedApp
            resolved.app = await Result.capture {
                if let dispatched, let token, !token.isEmpty {
                    guard dispatched.product == .cosyncAuth else { throw EndUserError.invalidAppToken }
                    return dispatched
                }
                return try await resolver.app(token: token, whenMissing: missing)
            }
        case .accessToken(let missing):
            let token = EndUserRoutes.accessToken(request)
            resolved.caller = await Result.capture { try await resolver.caller(accessToken: token, whenMissing: missing) }
        }
        if readsBody && !bodyFirst {
            if case .failure(let error)? = resolved.app { throw error }
            resolved.fields = try await EndUserRoutes.fields(request, context: context)
        }
        context.endUser = resolved
        return try await next(request, context)
    }
}

extension Result where Failure == any Error {
    /// The outcome of `body`, its error kept for later.
    static func capture(_ body: () async throws -> Success) async -> Result<Success, any Error> {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
}

/// The edge forgot to resolve what a typed context needs: a wiring error of ours (HTTP 500).
struct EdgeNotResolved: Error {}

/// The context of an end-user route authenticated by the app-token.
struct EndUserAppContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let app: App
    let fields: Fields
    /// The app-token as presented (signup hands it to the signup e-mail's link).
    let appToken: String
    /// Where the request comes from, computed once (`ClientOriginMiddleware`).
    let origin: ClientOrigin

    init(context: ServerRequestContext) throws {
        guard let resolved = context.endUser, let app = resolved.app else { throw EdgeNotResolved() }
        self.app = try app.get()
        self.fields = resolved.fields
        self.appToken = resolved.appToken
        self.origin = context.origin
        self.coreContext = context.coreContext
    }
}

/// The context of an end-user route authenticated by the access-token.
struct EndUserCallerContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let caller: AuthenticatedCaller
    let fields: Fields
    let origin: ClientOrigin

    init(context: ServerRequestContext) throws {
        guard let resolved = context.endUser, let caller = resolved.caller else { throw EdgeNotResolved() }
        self.caller = try caller.get()
        self.fields = resolved.fields
        self.origin = context.origin
        self.coreContext = context.coreContext
    }
}

/// The context of an end-user route whose contract checks a field before the access-token
/// (setUserMetadata, verifyPhone, userNameAvailable): the caller was resolved at the edge, and its
/// error is answered only when the flow asks for it.
struct EndUserDeferredCallerContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let caller: Result<AuthenticatedCaller, any Error>
    let fields: Fields

    init(context: ServerRequestContext) throws {
        guard let resolved = context.endUser, let caller = resolved.caller else { throw EdgeNotResolved() }
        self.caller = caller
        self.fields = resolved.fields
        self.coreContext = context.coreContext
    }
}
