import CosyncAuth
import Hummingbird

/// (Being built: see <doc:OAuth>.)
struct HostedLoginRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {}
}
