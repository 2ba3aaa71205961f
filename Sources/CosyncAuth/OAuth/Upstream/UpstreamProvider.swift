import AsyncHTTPClient
import Foundation

/// An OpenID provider an app signs its users in through (<doc:OAuth> §8, Webcom's "OAuth2" method): on
/// the hosted page (its button, then the authorization code flow with PKCE, `state` and `nonce`), or
/// by exchanging an ID token a native app already holds (RFC 8693). The endpoints come from its
/// discovery document; the client secret is sealed at rest and never shown.
public struct UpstreamProvider: Sendable, Equatable {
    /// How this server authenticates at the provider's token endpoint.
    public enum TokenAuthMethod: String, Sendable, CaseIterable {
        case clientSecretBasic = "client_secret_basic"
        case clientSecretPost = "client_secret_post"
        /// No secret: a public client there (PKCE protects the code).
        case none
    }

    public let id: UUID
    public let appRef: Int64
    public var name: String
    public var discoveryURL: String
    public var issuer: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var jwksURI: String
    public var tokenAuthMethod: TokenAuthMethod
    public var clientId: String
    /// The client secret, sealed with purpose `.upstreamClientSecret(id)`.
    public var clientSecretSealed: Data?
    public var scopes: [String]
    /// Further client ids of the app at the provider (its native apps): their ID tokens may be exchanged.
    public var audiences: [String]
    public var enabled: Bool
    public let createdAt: Date
    public var updatedAt: Date

    /// The admin API's view: everything but the secret (only whether there is one).
    public func json(redirectURI: String, startURL: String) -> [String: JSONValue] {
        [
            "providerId": .string(id.uuidString.lowercased()), "name": .string(name), "discoveryUrl": .string(discoveryURL),
            "issuer": .string(issuer), "authorizationEndpoint": .string(authorizationEndpoint), "tokenEndpoint": .string(tokenEndpoint),
            "jwksUri": .string(jwksURI), "tokenAuthMethod": .string(tokenAuthMethod.rawValue), "clientId": .string(clientId),
            "hasClientSecret": .bool(clientSecretSealed != nil), "scopes": .array(scopes.map(JSONValue.string)),
            "audiences": .array(audiences.map(JSONValue.string)), "enabled": .bool(enabled), "redirectUri": .string(redirectURI),
            "startUrl": .string(startURL), "createdAt": .string(ISO8601.milliseconds(createdAt)), "updatedAt": .string(ISO8601.milliseconds(updatedAt)),
        ]
    }
}

/// A provider's OpenID Connect discovery document, as far as this server uses it.
struct UpstreamDiscovery: Sendable, Equatable {
    let issuer: String
    let authorizationEndpoint: String
    let tokenEndpoint: String
    let jwksURI: String
    /// `token_endpoint_auth_methods_supported` (default `client_secret_basic`, OpenID Discovery §3).
    let tokenAuthMethods: [String]

    static let wellKnown = "/.well-known/openid-configuration"

    /// The document's URL for what the admin gave: the discovery URL itself, or the issuer (the
    /// well-known path is then added).
    static func documentURL(_ given: String) -> String {
        if given.hasSuffix(wellKnown) { return given }
        var base = given
        while base.hasSuffix("/") { base.removeLast() }
        return base + wellKnown
    }

    /// Fetches and checks the document at `url` (a `documentURL`): the four fields present and
    /// fetchable (`FetchableURL`), and the issuer identical to the URL the document was fetched under
    /// (OpenID Discovery §4.3), so a document cannot claim another provider's issuer.
    static func fetch(_ url: String, http: HTTPClient, outbound: WebhookURLGuard) async throws(RemoteKeySets.Failure) -> UpstreamDiscovery {
        let document = try await RemoteKeySets.fetchJSON(url, http: http, outbound: outbound, maxBytes: 256 * 1024)
        func field(_ name: String) throws(RemoteKeySets.Failure) -> String {
            guard let value = document[name]?.stringValue else { throw RemoteKeySets.Failure(reason: "the document has no \(name)") }
            if let refusal = FetchableURL.refusal(value) { throw RemoteKeySets.Failure(reason: "its \(name) \(refusal)") }
            return value
        }
        let issuer = try field("issuer")
        guard issuer.utf8.count <= 512 else { throw RemoteKeySets.Failure(reason: "its issuer is longer than 512 characters") }
        var expected = String(url.dropLast(wellKnown.count))
        var stated = issuer
        while expected.hasSuffix("/") { expected.removeLast() }
        while stated.hasSuffix("/") { stated.removeLast() }
        guard expected == stated else {
            throw RemoteKeySets.Failure(reason: "its issuer (\(issuer)) is not the URL it was fetched under (OpenID Discovery §4.3)")
        }
        let methods = document["token_endpoint_auth_methods_supported"]?.arrayValue?.compactMap(\.stringValue) ?? ["client_secret_basic"]
        return UpstreamDiscovery(
            issuer: issuer, authorizationEndpoint: try field("authorization_endpoint"), tokenEndpoint: try field("token_endpoint"),
            jwksURI: try field("jwks_uri"), tokenAuthMethods: methods)
    }

    /// How to authenticate with a secret (or without one) at this provider.
    func tokenAuthMethod(hasSecret: Bool) -> UpstreamProvider.TokenAuthMethod? {
        guard hasSecret else { return UpstreamProvider.TokenAuthMethod.none }
        if tokenAuthMethods.contains("client_secret_basic") { return .clientSecretBasic }
        if tokenAuthMethods.contains("client_secret_post") { return .clientSecretPost }
        return nil
    }
}
