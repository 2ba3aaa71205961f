import CosyncAuth
import Hummingbird

/// What `AppAuthenticator` resolved for an admin request under `apps/{appId}`.
struct AdminAppScope: Sendable {
    let appId: String
    let principal: AdminPrincipal
    /// The app, when it exists (the operator may name an app that does not: the handler answers 404).
    let app: App?

    var parts: (appId: String, principal: AdminPrincipal) { (appId, principal) }

    /// The resolved app, or the 404 the core answers for an app that does not exist. A handler calls
    /// it where it reads the app, after its own checks of the request, so their errors come first.
    func resolvedApp() throws -> App {
        guard let app else { throw AdminFailure.notFound("app") }
        return app
    }
}

/// The authenticator middleware of the admin routes under `apps/{appId}`: checks the bearer (the
/// operator token, or the secret of that very app; a suspended app's secret may only read) and puts
/// the principal and the app into the request context, so handlers start from a resolved principal.
struct AppAuthenticator: RouterMiddleware {
    typealias Context = ServerRequestContext
    let services: CosyncServices

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let appId = try context.appIdParameter()
        let (principal, app) = try await AdminAuthorization(services: services).requireApp(request, appId: appId)
        var context = context
        context.adminScope = AdminAppScope(appId: appId, principal: principal, app: app)
        return try await next(request, context)
    }
}

/// The context of every admin route under `apps/{appId}`: built from what `AppAuthenticator` put into
/// the request context, so a handler of that group cannot be written without the principal and the app
/// scope (a route outside the group has none: a programming error, answered 500 rather than served
/// unauthenticated).
struct AdminAppContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    /// The principal and the app the authenticator resolved.
    let scope: AdminAppScope

    init(context: ServerRequestContext) throws {
        guard let scope = context.adminScope else {
            throw AdminError(status: .internalServerError, code: "internal", message: "the route has no authenticated app scope")
        }
        self.scope = scope
        self.coreContext = context.coreContext
    }

    /// Admin bodies are small (as `ServerRequestContext`).
    var maxUploadSize: Int { 1_048_576 }
}
