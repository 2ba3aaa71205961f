import CosyncAuth
import Hummingbird

/// Records where an end-user request comes from (the client address as limits count it, and the
/// User-Agent), once: in the request context (the handlers pass the address to the limits) and as
/// `ClientOrigin.current` for the session a login-type answer opens.
struct ClientOriginMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let configuration: ServerConfiguration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.origin = ClientOrigin(
            address: EndUserRoutes.clientAddress(request, context: context, configuration: configuration),
            userAgent: request.headers[.userAgent])
        return try await ClientOrigin.$current.withValue(context.origin) { try await next(request, context) }
    }
}
