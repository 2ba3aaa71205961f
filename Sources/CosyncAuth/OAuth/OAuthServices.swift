import Foundation
import Logging
import PostgresNIO

/// Everything the OAuth 2.1 / OpenID Connect side of the server is built from (<doc:OAuth>). Each
/// part (clients, the authorization endpoint, the token endpoint, DPoP, upstream providers) is a small
/// type made from these in its own file, so the parts share the same flows, sessions, limits and events
/// as the end-user API and none of them holds another's state.
public struct OAuthServices: Sendable {
    public let client: PostgresClient
    public let apps: AppAdministration
    public let tokens: TokenIssuer
    /// The end-user flows: the hosted login page signs users in through them.
    public let flows: EndUserFlows
    public let box: SecretBox
    /// The server's public base URL, without a trailing slash.
    public let publicURL: String
    public let logger: Logger
    /// JWK sets fetched from URLs apps registered (backends' assertion keys, upstream providers), cached on this node.
    public let remoteKeys: RemoteKeySets

    /// `outbound` is the operator's rule for outgoing calls (COSYNC_WEBHOOK_ALLOW_HTTP, COSYNC_WEBHOOK_ALLOW_CIDRS):
    /// it decides whether the URLs apps register may point at a loopback address.
    public init(
        client: PostgresClient, apps: AppAdministration, tokens: TokenIssuer, flows: EndUserFlows, box: SecretBox, publicURL: String,
        outbound: WebhookURLGuard = ClientKeys.publicOnly, logger: Logger
    ) {
        self.remoteKeys = RemoteKeySets(outbound: outbound)
        self.client = client
        self.apps = apps
        self.tokens = tokens
        self.flows = flows
        self.box = box
        var base = publicURL
        while base.hasSuffix("/") { base.removeLast() }
        self.publicURL = base
        self.logger = logger
    }

    /// The issuer identifier of an app: `{public URL}/apps/{appId}`.
    public func issuer(appId: String) -> String { "\(publicURL)/apps/\(appId)" }

    /// The absolute URL of one of an app's OAuth endpoints (`path` starts with `/`, e.g. `/oauth/token`).
    public func endpoint(appId: String, _ path: String) -> String { issuer(appId: appId) + path }

    /// The registered clients and their authentication at the token endpoint.
    public var clients: OAuthClients { OAuthClients(client: client, logger: logger) }

    /// DPoP proof checks (RFC 9449).
    public var dpop: DPoPVerifier { DPoPVerifier(client: client, box: box, logger: logger) }
}
