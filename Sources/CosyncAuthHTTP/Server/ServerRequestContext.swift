import Hummingbird
import NIOCore

/// The request context of every route.
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address (login throttling counts failures per address).
    public let remoteAddress: String?
    /// Set by `AppAuthenticator` on every admin route under `apps/{appId}`.
    var adminScope: AdminAppScope?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress?.ipAddress
    }

    /// End-user and admin bodies are small.
    public var maxUploadSize: Int { 1_048_576 }
}
