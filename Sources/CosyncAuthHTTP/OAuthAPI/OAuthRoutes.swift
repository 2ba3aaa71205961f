import CosyncAuth
import Hummingbird

/// The OAuth 2.1 / OpenID Connect endpoints of every app's issuer (<doc:OAuth>), under
/// `/apps/{appId}`. Each endpoint family registers itself from its own file.
struct OAuthRoutes {
    let services: CosyncServices

    /// The paths of the issuer, relative to it (discovery lists them).
    enum Path {
        static let authorize = "/oauth/authorize"
        static let par = "/oauth/par"
        static let token = "/oauth/token"
        static let revoke = "/oauth/revoke"
        static let introspect = "/oauth/introspect"
        static let userinfo = "/oauth/userinfo"
        static let logout = "/oauth/logout"
        static let login = "/oauth/login"
        static let jwks = "/.well-known/jwks.json"
    }

    func register(on router: Router<ServerRequestContext>) {
        let issuer = router.group("apps/:appId")
            .add(middleware: ClientOriginMiddleware(configuration: services.configuration))
            .add(middleware: OAuthEdge(apps: services.apps))
            .group(context: OAuthAppContext.self)
        DiscoveryRoutes(services: services).register(on: issuer)
        // RFC 8414 §3: the metadata of issuer `https://host/apps/{appId}` is also served at
        // `https://host/.well-known/oauth-authorization-server/apps/{appId}`.
        let wellKnown = router.group(".well-known/oauth-authorization-server/apps/:appId")
            .add(middleware: OAuthEdge(apps: services.apps))
            .group(context: OAuthAppContext.self)
        DiscoveryRoutes(services: services).registerRFC8414(on: wellKnown)
        AuthorizeRoutes(services: services).register(on: issuer)
        HostedLoginRoutes(services: services).register(on: issuer)
        HostedPasskeyRoutes(services: services).register(on: issuer)
        TokenRoutes(services: services).register(on: issuer)
        UpstreamRoutes(services: services).register(on: issuer)
    }
}

/// For tests: which routes belong to the OAuth protocol (<doc:OAuth>) rather than to the OpenAPI
/// document: every route of an issuer but its JWKS, and the RFC 8414 metadata path.
public enum OAuthProtocolRoutes {
    /// `route` is "METHOD /path" as `routeTable` lists it.
    public static func isProtocolRoute(_ route: String) -> Bool {
        guard let path = route.split(separator: " ").last.map(String.init) else { return false }
        if path.hasPrefix("/.well-known/oauth-authorization-server/") { return true }
        return path.hasPrefix("/apps/") && !path.hasSuffix("/.well-known/jwks.json")
    }
}
