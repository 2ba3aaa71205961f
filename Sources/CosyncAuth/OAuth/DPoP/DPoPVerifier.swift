import Foundation
import Logging
import PostgresNIO

/// DPoP (RFC 9449): checks the `DPoP` proof a request carries and answers the thumbprint (`jkt`) of
/// the key that signed it.
public struct DPoPVerifier: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let logger: Logger

    /// What the caller expects of a proof.
    public struct Expectation: Sendable {
        /// The request's method and its URL without query or fragment (`htm`, `htu`).
        public var method: String
        public var url: String
        /// The access token the request presents, at a resource (`ath`); nil at the token endpoint.
        public var accessToken: String?

        public init(method: String, url: String, accessToken: String? = nil) {
            self.method = method
            self.url = url
            self.accessToken = accessToken
        }
    }

    /// Checks `proof` (the `DPoP` header, nil when absent) and answers its key's thumbprint, or nil
    /// when no proof came. Throws `invalid_dpop_proof`, or `use_dpop_nonce` with a fresh nonce.
    public func verify(_ proof: String?, expecting: Expectation, appRef: Int64) async throws(OAuthError) -> String? {
        guard proof != nil else { return nil }
        throw .invalidDPoPProof("DPoP is not available yet")
    }

    /// The nonce a client should use in its next proof (sent as `DPoP-Nonce`).
    public func currentNonce(appRef: Int64) -> String? { nil }
}
