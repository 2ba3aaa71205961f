import Hummingbird
import CosyncAuth
import CosyncPortal
import NIOCore

/// The request context of every route.
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address (login throttling counts failures per address).
    public let remoteAddress: String?
    /// Set by `AppAuthenticator` on every admin route under `apps/{appId}`.
    var adminScope: AdminAppScope?
    /// Where an end-user or AppKey request comes from (client address as limits count it, User-Agent):
    /// computed once, by `ClientOriginMiddleware`.
    var origin = ClientOrigin(address: nil, userAgent: nil)
    /// The app product dispatch resolved from the request's app-token (`PathNormalizingResponder`), for
    /// the endpoint names both APIs share; the API's edge reuses it instead of resolving it again.
    var dispatchedApp: App?
    /// What the end-user edge resolved (`EndUserEdge`).
    var endUser: EndUserEdge.Resolved?
    /// What the AppKey edge resolved (`AppKeyEdge`).
    var appKey: AppKeyEdge.Resolved?
    /// The app whose OAuth issuer the path names (`OAuthEdge`).
    var oauthApp: App?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress?.ipAddress
    }

    /// End-user and admin bodies are small.
    public var maxUploadSize: Int { 1_048_576 }
}

/// The Portal's pages run on this context (the Portal module cannot name it).
extension ServerRequestContext: PortalRequestContext {}
