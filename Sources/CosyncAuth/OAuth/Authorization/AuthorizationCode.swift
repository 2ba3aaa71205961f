import Foundation

/// What an authorization code stands for (`oauth_codes`): the sign-in the hosted page made for one
/// client's request. The code itself is 256 random bits; only its SHA-256 is stored.
public struct AuthorizationCode: Sendable, Equatable {
    public let appRef: Int64
    public let clientRef: UUID
    public let sessionId: UUID
    public let userId: UUID
    public let redirectURI: String
    public let scope: String
    public let nonce: String?
    /// The PKCE S256 challenge (base64url of SHA-256 of the verifier).
    public let codeChallenge: String
    /// The DPoP key the request bound the code to (`dpop_jkt`, RFC 9449 §10), if any.
    public let dpopJKT: String?
    /// When the user last proved itself on the session (`auth_time`).
    public let authTime: Date
    /// How (`amr`, RFC 8176 values: `pwd`, `otp`, `sms`, `hwk`, `user`…).
    public let amr: [String]

    public init(
        appRef: Int64, clientRef: UUID, sessionId: UUID, userId: UUID, redirectURI: String, scope: String, nonce: String?,
        codeChallenge: String, dpopJKT: String?, authTime: Date, amr: [String]
    ) {
        self.appRef = appRef
        self.clientRef = clientRef
        self.sessionId = sessionId
        self.userId = userId
        self.redirectURI = redirectURI
        self.scope = scope
        self.nonce = nonce
        self.codeChallenge = codeChallenge
        self.dpopJKT = dpopJKT
        self.authTime = authTime
        self.amr = amr
    }

    /// How long a code may wait for its exchange.
    public static let lifetimeSeconds = 60
}
