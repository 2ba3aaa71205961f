import CosyncAuth
import Hummingbird

/// (Being built: see <doc:OAuth>.)
struct AuthorizeRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {}
}
