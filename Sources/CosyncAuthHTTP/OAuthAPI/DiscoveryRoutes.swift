import CosyncAuth
import Hummingbird

/// OpenID Connect Discovery 1.0 and RFC 8414 metadata of an app's issuer (<doc:OAuth> §1).
struct DiscoveryRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {
        issuer.get(".well-known/openid-configuration") { _, context in metadata(context.app) }
        issuer.get(".well-known/oauth-authorization-server") { _, context in metadata(context.app) }
    }

    func registerRFC8414(on group: RouterGroup<OAuthAppContext>) {
        group.get { _, context in metadata(context.app) }
    }

    func metadata(_ app: App) -> Response {
        JSONBody.response(Self.document(oauth: services.oauth, app: app), headers: [.cacheControl: "public, max-age=300"])
    }

    /// The metadata document. Everything in it is true of every app's issuer; what a client may do is
    /// narrowed by its registration.
    static func document(oauth: OAuthServices, app: App) -> JSONValue {
        let url = { (path: String) in JSONValue.string(oauth.endpoint(appId: app.appId, path)) }
        let strings = { (values: [String]) in JSONValue.array(values.map(JSONValue.string)) }
        return .object([
            "issuer": .string(oauth.issuer(appId: app.appId)),
            "authorization_endpoint": url(OAuthRoutes.Path.authorize),
            "pushed_authorization_request_endpoint": url(OAuthRoutes.Path.par),
            "token_endpoint": url(OAuthRoutes.Path.token),
            "revocation_endpoint": url(OAuthRoutes.Path.revoke),
            "introspection_endpoint": url(OAuthRoutes.Path.introspect),
            "userinfo_endpoint": url(OAuthRoutes.Path.userinfo),
            "end_session_endpoint": url(OAuthRoutes.Path.logout),
            "jwks_uri": url(OAuthRoutes.Path.jwks),
            "response_types_supported": strings(["code"]),
            "response_modes_supported": strings(["query"]),
            "grant_types_supported": strings(OAuthGrantType.allCases.map(\.rawValue)),
            "subject_types_supported": strings(["public"]),
            "id_token_signing_alg_values_supported": strings(["RS256"]),
            "userinfo_signing_alg_values_supported": strings(["none"]),
            "scopes_supported": strings(OAuthClient.standardScopes),
            "claims_supported": strings([
                "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "amr", "sid", "email", "email_verified", "phone_number",
                "phone_number_verified", "name", "given_name", "family_name", "preferred_username", "locale", "updated_at", "azp", "at_hash",
            ]),
            "code_challenge_methods_supported": strings(["S256"]),
            "token_endpoint_auth_methods_supported": strings(OAuthClient.AuthMethod.allCases.map(\.rawValue)),
            "token_endpoint_auth_signing_alg_values_supported": strings(["RS256", "ES256", "PS256", "EdDSA"]),
            "revocation_endpoint_auth_methods_supported": strings(OAuthClient.AuthMethod.allCases.map(\.rawValue)),
            "introspection_endpoint_auth_methods_supported": strings(
                OAuthClient.AuthMethod.allCases.filter { $0 != .none }.map(\.rawValue)),
            "dpop_signing_alg_values_supported": strings(DPoPAlgorithms.supported),
            "authorization_response_iss_parameter_supported": .bool(true),
            "require_pushed_authorization_requests": .bool(false),
            "prompt_values_supported": strings(["none", "login"]),
            "claims_parameter_supported": .bool(false),
            "request_parameter_supported": .bool(false),
            "request_uri_parameter_supported": .bool(true),
            "require_request_uri_registration": .bool(false),
            "frontchannel_logout_supported": .bool(false),
            "ui_locales_supported": strings(app.settings.locales),
        ])
    }
}
