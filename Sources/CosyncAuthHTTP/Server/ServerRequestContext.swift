import Hummingbird

/// The request context of every route.
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }

    /// Admin bodies are small JSON documents.
    public var maxUploadSize: Int { 1_048_576 }
}
