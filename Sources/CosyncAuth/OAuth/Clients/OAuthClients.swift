import Foundation
import Logging
import PostgresNIO

/// The registered clients of an app: lookup for the endpoints, and client authentication at the
/// token, revocation and introspection endpoints (RFC 6749 §2.3).
public struct OAuthClients: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// The client `clientId` of `app`, if registered.
    public func find(app: App, clientId: String) async throws -> OAuthClient? {
        guard !clientId.isEmpty, clientId.utf8.count <= 128 else { return nil }
        return try await client.withConnection { try await OAuthClientStore.find($0, appRef: app.ref, clientId: clientId, logger: logger) }
    }

    /// What a request to the token endpoint presented to authenticate its client.
    public struct Presented: Sendable {
        /// From `Authorization: Basic` (both parts form-URL-decoded, RFC 6749 §2.3.1).
        public var basic: (id: String, secret: String)?
        /// `client_id` and `client_secret` form fields.
        public var clientId: String?
        public var clientSecret: String?
        /// `client_assertion_type` and `client_assertion` (private_key_jwt, RFC 7523 §2.2).
        public var assertionType: String?
        public var assertion: String?

        public init(
            basic: (id: String, secret: String)? = nil, clientId: String? = nil, clientSecret: String? = nil, assertionType: String? = nil,
            assertion: String? = nil
        ) {
            self.basic = basic
            self.clientId = clientId
            self.clientSecret = clientSecret
            self.assertionType = assertionType
            self.assertion = assertion
        }
    }

    /// The client a token-endpoint request authenticates as, by the method the client registered
    /// (a client may not pick a weaker one). Public clients name themselves by `client_id`.
    /// `audience` is the endpoint URL a client assertion must be addressed to.
    public func authenticate(app: App, _ presented: Presented, audience: [String]) async throws(OAuthError) -> OAuthClient {
        let methods = [presented.basic != nil, presented.clientSecret != nil, presented.assertion != nil].filter { $0 }.count
        guard methods <= 1 else { throw .invalidRequest("use one client authentication method") }
        let named = presented.basic?.id ?? presented.clientId
        guard let clientId = named, !clientId.isEmpty else { throw .invalidClient("no client authentication") }
        if let formId = presented.clientId, let basicId = presented.basic?.id, formId != basicId {
            throw .invalidRequest("client_id does not match the authenticated client")
        }
        let found: OAuthClient?
        do { found = try await find(app: app, clientId: clientId) } catch { throw .serverError() }
        guard let registered = found else { throw .invalidClient("unknown client") }
        switch registered.authMethod {
        case .none:
            guard methods == 0 else { throw .invalidClient("this client is public and has no secret") }
        case .clientSecretBasic, .clientSecretPost:
            let secret = registered.authMethod == .clientSecretBasic ? presented.basic?.secret : presented.clientSecret
            guard let secret, let stored = registered.secretHash, secret.utf8.count <= 512,
                  Secrets.constantTimeEquals(Secrets.sha256(secret), stored)
            else { throw .invalidClient("client authentication failed") }
        case .privateKeyJWT:
            throw .invalidClient("private_key_jwt is not available yet")
        }
        return registered
    }
}
