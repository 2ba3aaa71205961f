import Hummingbird
import CosyncAuth
import CosyncPortal
import NIOCore

/// The request context of every route.
///
/// Hummingbird copies the context into every middleware and route group a request passes, so it is
/// kept small: what the edges resolve (apps, users: large values) lives in one copy-on-write box,
/// which a copy shares and only a change duplicates. Before, these fields were inline and the context
/// weighed several kilobytes: copying it (and retaining every string and buffer in it) showed in a
/// cheap request's profile (`memmove`, the context's value witnesses; issue 24).
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address (login throttling counts failures per address).
    public let remoteAddress: String?
    private var resolved = ResolvedBox.empty

    /// Set by `AppAuthenticator` on every admin route under `apps/{appId}`.
    var adminScope: AdminAppScope? {
        get { resolved.value.adminScope }
        set { change { $0.adminScope = newValue } }
    }
    /// Where an end-user or AppKey request comes from (client address as limits count it, User-Agent):
    /// computed once, by `ClientOriginMiddleware`.
    var origin: ClientOrigin {
        get { resolved.value.origin }
        set { change { $0.origin = newValue } }
    }
    /// The app product dispatch resolved from the request's app-token (`PathNormalizingResponder`), for
    /// the endpoint names both APIs share; the API's edge reuses it instead of resolving it again.
    var dispatchedApp: App? {
        get { resolved.value.dispatchedApp }
        set { change { $0.dispatchedApp = newValue } }
    }
    /// What the end-user edge resolved (`EndUserEdge`).
    var endUser: EndUserEdge.Resolved? {
        get { resolved.value.endUser }
        set { change { $0.endUser = newValue } }
    }
    /// What the AppKey edge resolved (`AppKeyEdge`).
    var appKey: AppKeyEdge.Resolved? {
        get { resolved.value.appKey }
        set { change { $0.appKey = newValue } }
    }
    /// The app whose OAuth issuer the path names (`OAuthEdge`).
    var oauthApp: App? {
        get { resolved.value.oauthApp }
        set { change { $0.oauthApp = newValue } }
    }

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress?.ipAddress
    }

    /// End-user and admin bodies are small.
    public var maxUploadSize: Int { 1_048_576 }

    /// Changes the box, after duplicating it when another copy of the context shares it.
    private mutating func change(_ body: (inout Resolutions) -> Void) {
        if !isKnownUniquelyReferenced(&resolved) { resolved = ResolvedBox(resolved.value) }
        body(&resolved.value)
    }
}

/// What the edges resolve for a request (see `ServerRequestContext`).
struct Resolutions: Sendable {
    var adminScope: AdminAppScope?
    var origin = ClientOrigin(address: nil, userAgent: nil)
    var dispatchedApp: App?
    var endUser: EndUserEdge.Resolved?
    var appKey: AppKeyEdge.Resolved?
    var oauthApp: App?
}

/// Copy-on-write storage of `Resolutions`. Unchecked Sendable under the rule of Swift's own
/// copy-on-write collections: it is written only through `ServerRequestContext.change`, when no other
/// context shares it; shared, it is only read.
final class ResolvedBox: @unchecked Sendable {
    var value: Resolutions
    init(_ value: Resolutions) { self.value = value }
    /// Shared by every context until its first change (a request that resolves nothing allocates none).
    static let empty = ResolvedBox(Resolutions())
}

/// The Portal's pages run on this context (the Portal module cannot name it).
extension ServerRequestContext: PortalRequestContext {}
