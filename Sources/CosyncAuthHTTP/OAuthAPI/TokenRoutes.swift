import CosyncAuth
import Hummingbird

/// (Being built: see <doc:OAuth>.)
struct TokenRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {}
}
