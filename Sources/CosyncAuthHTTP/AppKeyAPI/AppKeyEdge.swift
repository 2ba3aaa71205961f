import CosyncAuth
import Hummingbird

/// The AppKey API's edge (<doc:AppKeyAPI> §1.5): reads the body first, then resolves the request's
/// credentials once (app, caller or signup-token), so a malformed body answers before a bad
/// credential, and a bad credential before a missing field. The handlers of a group behind it take a
/// typed context (`AppKeyAppContext`, `AppKeyCallerContext`, `AppKeySignupContext`).
struct AppKeyEdge: RouterMiddleware {
    typealias Context = ServerRequestContext

    /// What a route is authenticated by.
    enum Credential: Sendable {
        /// The app its credentials name (app-token, else access token, else signup-token); `gates`:
        /// the app's status gates apply. `presentedAccess`: an optional access token is also verified
        /// (not judged) for the flow.
        case app(gates: Bool, presentedAccess: Bool)
        /// The signed-in caller (access-token; with `allowReset`, a passkey-reset token too).
        case caller(allowReset: Bool)
        /// The pending signup a signup-token names.
        case signup
    }

    let credential: Credential
    let resolver: AppKeyResolver
    /// False: a GET without a body.
    var readsBody = true

    struct Resolved: Sendable {
        var fields = AppKeyFields([:])
        var credentials = AppKeyCredentials()
        var app: Result<App, any Error>?
        var caller: Result<AppKeyCaller, any Error>?
        var signup: Result<AppKeySignupToken, any Error>?
        var presentedAccess = AppKeyPresentedAccess.none
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        var resolved = Resolved()
        if readsBody { resolved.fields = try await AppKeyRoutes.fields(request, context: context) }
        let credentials = AppKeyRoutes.credentials(request)
        resolved.credentials = credentials
        switch credential {
        case .app(let gates, let presentedAccess):
            // Product dispatch already resolved the app-token for the names both APIs share: reused.
            let dispatched = credentials.appToken == nil ? nil : context.dispatchedApp
            resolved.app = await Result.capture { try await resolver.app(credentials, gates: gates, resolved: dispatched) }
            if presentedAccess, case .success = resolved.app { resolved.presentedAccess = await resolver.presentedAccess(credentials) }
        case .caller(let allowReset):
            resolved.caller = await Result.capture { try await resolver.caller(credentials, allowReset: allowReset) }
        case .signup:
            resolved.signup = await Result.capture { try await resolver.signup(credentials) }
        }
        context.appKey = resolved
        return try await next(request, context)
    }
}

/// The context of an AppKey route of the app scope.
struct AppKeyAppContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let app: App
    let fields: AppKeyFields
    let credentials: AppKeyCredentials
    /// An access token that came along, verified but not judged (verifySocialAccount).
    let presentedAccess: AppKeyPresentedAccess

    init(context: ServerRequestContext) throws {
        guard let resolved = context.appKey, let app = resolved.app else { throw EdgeNotResolved() }
        self.app = try app.get()
        self.fields = resolved.fields
        self.credentials = resolved.credentials
        self.presentedAccess = resolved.presentedAccess
        self.coreContext = context.coreContext
    }
}

/// The context of an AppKey route of the user scope.
struct AppKeyCallerContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let caller: AppKeyCaller
    let fields: AppKeyFields

    init(context: ServerRequestContext) throws {
        guard let resolved = context.appKey, let caller = resolved.caller else { throw EdgeNotResolved() }
        self.caller = try caller.get()
        self.fields = resolved.fields
        self.coreContext = context.coreContext
    }
}

/// The context of `userNameAvailable`, whose query is checked before the caller: the caller's error
/// waits for the handler.
struct AppKeyDeferredCallerContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let caller: Result<AppKeyCaller, any Error>

    init(context: ServerRequestContext) throws {
        guard let resolved = context.appKey, let caller = resolved.caller else { throw EdgeNotResolved() }
        self.caller = caller
        self.coreContext = context.coreContext
    }
}

/// The context of `signupComplete`: the pending signup its signup-token names.
struct AppKeySignupContext: ChildRequestContext {
    var coreContext: CoreRequestContextStorage
    let signup: AppKeySignupToken
    let fields: AppKeyFields

    init(context: ServerRequestContext) throws {
        guard let resolved = context.appKey, let signup = resolved.signup else { throw EdgeNotResolved() }
        self.signup = try signup.get()
        self.fields = resolved.fields
        self.coreContext = context.coreContext
    }
}
