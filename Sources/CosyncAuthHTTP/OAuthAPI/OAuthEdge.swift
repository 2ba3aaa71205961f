import CosyncAuth
import Hummingbird

/// The edge of an app's OAuth endpoints (`/apps/{appId}/…`): resolves the app named in the path once
/// (from the app cache) and hands it to the handlers in `OAuthAppContext`. An unknown app is a 404
/// in the OAuth error shape; what a suspended app answers is each endpoint's choice (`app.status`).
struct OAuthEdge: RouterMiddleware {
    typealias Context = ServerRequestContext
    let apps: AppAdministration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let appId = context.parameters.get("appId") ?? ""
        guard AppAdministration.isAppId(appId), let app = try await apps.cachedApp(appId: appId) else {
            return OAuthWire.errorResponse(OAuthError("invalid_request", "no such issuer", status: 404))
        }
        context.oauthApp = app
        return try await next(request, context)
    }
}

/// The context of an OAuth route: the app whose issuer the path names.
struct OAuthAppContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let app: App
    /// The client address and User-Agent, as sessions record them.
    let origin: ClientOrigin
    let remoteAddress: String?

    init(context: ServerRequestContext) throws {
        guard let app = context.oauthApp else { throw EdgeNotResolved() }
        self.app = app
        self.origin = context.origin
        self.remoteAddress = context.remoteAddress
        self.coreContext = context.coreContext
    }

    /// Form bodies of the OAuth endpoints are small (`OAuthWire.maxFormBytes`).
    var maxUploadSize: Int { OAuthWire.maxFormBytes }
}
