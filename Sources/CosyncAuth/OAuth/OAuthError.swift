import Foundation

/// An OAuth error as RFC 6749 §5.2 shapes it: an `error` code from the registry, a sentence for the
/// developer, and the HTTP status. The HTTP module writes it as
/// `{"error": …, "error_description": …}` with `Cache-Control: no-store`; at the authorization
/// endpoint, once the redirect URI is trusted, it goes back to the client in the redirect instead.
public struct OAuthError: Error, Sendable, Equatable {
    public let code: String
    public let description: String
    public let status: Int
    /// A fresh DPoP nonce the client must use (`use_dpop_nonce`, and every DPoP refusal).
    public var dpopNonce: String?
    /// The authentication scheme to name in `WWW-Authenticate` (401 answers): `Basic`, `Bearer` or `DPoP`.
    public var challenge: String?
    /// Seconds to wait before retrying (429, 503).
    public var retryAfter: Int?

    public init(_ code: String, _ description: String, status: Int = 400) {
        self.code = code
        self.description = description
        self.status = status
    }

    public static func invalidRequest(_ description: String) -> OAuthError { OAuthError("invalid_request", description) }
    public static func invalidClient(_ description: String, challenge: String? = "Basic") -> OAuthError {
        var error = OAuthError("invalid_client", description, status: 401)
        error.challenge = challenge
        return error
    }
    public static func invalidGrant(_ description: String) -> OAuthError { OAuthError("invalid_grant", description) }
    public static func unauthorizedClient(_ description: String) -> OAuthError { OAuthError("unauthorized_client", description) }
    public static func unsupportedGrantType(_ description: String) -> OAuthError { OAuthError("unsupported_grant_type", description) }
    public static func invalidScope(_ description: String) -> OAuthError { OAuthError("invalid_scope", description) }
    public static func accessDenied(_ description: String) -> OAuthError { OAuthError("access_denied", description, status: 403) }
    public static func invalidToken(_ description: String, challenge: String = "Bearer") -> OAuthError {
        var error = OAuthError("invalid_token", description, status: 401)
        error.challenge = challenge
        return error
    }
    public static func invalidDPoPProof(_ description: String) -> OAuthError { OAuthError("invalid_dpop_proof", description) }
    public static func serverError(_ description: String = "the server could not answer this request") -> OAuthError {
        OAuthError("server_error", description, status: 500)
    }
    public static func temporarilyUnavailable(_ description: String, retryAfter: Int? = nil) -> OAuthError {
        var error = OAuthError("temporarily_unavailable", description, status: 503)
        error.retryAfter = retryAfter
        return error
    }
    public static func slowDown(retryAfter: Int) -> OAuthError {
        var error = OAuthError("invalid_request", "too many attempts; try again later", status: 429)
        error.retryAfter = retryAfter
        return error
    }
}
