import Foundation

/// The grant types a client may use at the token endpoint.
public enum OAuthGrantType: String, Sendable, CaseIterable, Codable {
    case authorizationCode = "authorization_code"
    case refreshToken = "refresh_token"
    case clientCredentials = "client_credentials"
    /// RFC 8693: a CosyncAuth access token (or an upstream ID token) for an OAuth token set.
    case tokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
    /// RFC 7523: a JWT the app's backend signed for a user.
    case jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
}

/// A registered client of an app's issuer (<doc:OAuth> §2).
public struct OAuthClient: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable, Codable {
        /// A native app: no secret, PKCE protects its codes, DPoP its tokens.
        case `public`
        /// An app backend that keeps a secret or a private key.
        case confidential
    }

    /// How the client proves itself at the token endpoint (RFC 6749 §2.3, RFC 7523 §2.2).
    public enum AuthMethod: String, Sendable, CaseIterable, Codable {
        case none
        case clientSecretBasic = "client_secret_basic"
        case clientSecretPost = "client_secret_post"
        case privateKeyJWT = "private_key_jwt"
    }

    /// The row id (foreign keys point at it; `clientId` is what the wire carries).
    public let ref: UUID
    public let appRef: Int64
    public let clientId: String
    public var name: String
    public let kind: Kind
    public var authMethod: AuthMethod
    /// SHA-256 of the client secret (client_secret_basic / _post).
    public var secretHash: Data?
    /// The client's public keys (private_key_jwt): a JWKS document, or where to fetch one.
    public var jwks: JSONValue?
    public var jwksURI: String?
    public var redirectURIs: [String]
    public var postLogoutRedirectURIs: [String]
    public var grantTypes: [OAuthGrantType]
    public var scopes: [String]
    public var accessTokenSeconds: Int
    public var refreshSlidingSeconds: Int
    public var refreshAbsoluteSeconds: Int
    /// How long a rotated refresh token still answers its successor (a retried or racing refresh).
    public var refreshGraceSeconds: Int
    public var dpopRequired: Bool
    public let createdAt: Date
    public var updatedAt: Date

    public init(
        ref: UUID, appRef: Int64, clientId: String, name: String, kind: Kind, authMethod: AuthMethod, secretHash: Data?, jwks: JSONValue?,
        jwksURI: String?, redirectURIs: [String], postLogoutRedirectURIs: [String], grantTypes: [OAuthGrantType], scopes: [String],
        accessTokenSeconds: Int, refreshSlidingSeconds: Int, refreshAbsoluteSeconds: Int, refreshGraceSeconds: Int, dpopRequired: Bool,
        createdAt: Date, updatedAt: Date
    ) {
        self.ref = ref
        self.appRef = appRef
        self.clientId = clientId
        self.name = name
        self.kind = kind
        self.authMethod = authMethod
        self.secretHash = secretHash
        self.jwks = jwks
        self.jwksURI = jwksURI
        self.redirectURIs = redirectURIs
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.grantTypes = grantTypes
        self.scopes = scopes
        self.accessTokenSeconds = accessTokenSeconds
        self.refreshSlidingSeconds = refreshSlidingSeconds
        self.refreshAbsoluteSeconds = refreshAbsoluteSeconds
        self.refreshGraceSeconds = refreshGraceSeconds
        self.dpopRequired = dpopRequired
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    public func allows(_ grant: OAuthGrantType) -> Bool { grantTypes.contains(grant) }

    /// The scopes every client may ask for; `openid` makes the answer carry an ID token.
    public static let standardScopes = ["openid", "profile", "email", "phone", "offline_access"]
}
