import Foundation

/// How a session was opened: the login-type call that answered its access token.
public enum SessionMethod: String, Sendable, CaseIterable {
    case password
    case secondFactor = "second_factor"
    case anonymous
    case signup
    case register
    case apple
    case google
    /// A passkey ceremony of the AppKey API (login, verify, signup, anonymous).
    case passkey
    /// A JWT-bearer assertion of the app's backend (OAuth, RFC 7523).
    case custom
    /// An upstream OpenID provider's ID token (OAuth: the hosted page, or a token exchange).
    case oidc

    /// The kind of identity a session of this method is opened with (and ends with).
    public var identityKind: IdentityKind? {
        switch self {
        case .password, .secondFactor, .signup, .register: .password
        case .anonymous: .anonymous
        case .apple: .apple
        case .google: .google
        case .passkey: .passkey
        case .custom: .custom
        case .oidc: .oidc
        }
    }
}

/// One signed-in device of a user: the access token names it (`sid`), and the token lives while the
/// row exists and has not expired.
public struct Session: Sendable, Equatable {
    public let id: UUID
    public let userId: UUID
    public let method: SessionMethod
    /// How and when the session was last proven: its sign-in, or a later re-proof (`StepUp`).
    public let lastProof: AuthProof
    public let clientAddress: String?
    public let userAgent: String?
    public let createdAt: Date
    public let lastSeenAt: Date
    public let expiresAt: Date

    /// The method of the last proof (a session's proofs are always sign-ins).
    public var provenBy: SessionMethod {
        if case .signIn(let method) = lastProof.method { return method }
        return method
    }
}

/// Where a request comes from, as far as a new session records it. The HTTP edge sets it for the
/// duration of one end-user request (a task-local value, so the flows need no extra parameters and
/// nothing outlives the request); outside a request both parts are nil.
public struct ClientOrigin: Sendable {
    public let address: String?
    public let userAgent: String?

    public init(address: String?, userAgent: String?) {
        self.address = address
        // Stored without control characters (PostgreSQL text holds no NUL), cut to the column's 512
        // code points (what PostgreSQL's length() counts, not Swift's grapheme clusters).
        self.userAgent = userAgent.map { agent in
            var scalars = String.UnicodeScalarView()
            scalars.append(contentsOf: agent.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.prefix(512))
            return String(scalars)
        }
    }

    @TaskLocal public static var current = ClientOrigin(address: nil, userAgent: nil)
}

/// The caller of an access-token request: the app, the user and, for this server's tokens, the
/// session the token names.
public struct AuthenticatedCaller: Sendable {
    public let app: App
    public let user: User
    /// Nil for a token without a session (issued before sessions existed, or by the legacy server).
    public let sessionId: UUID?
    /// SHA-256 of the access token presented (a changePassword keeps a session-less token alive by it).
    public let tokenHash: Data
    /// How and when the session was last proven; nil for a token without a session.
    public let sessionProof: AuthProof?

    public init(app: App, user: User, sessionId: UUID?, tokenHash: Data, sessionProof: AuthProof? = nil) {
        self.app = app
        self.user = user
        self.sessionId = sessionId
        self.tokenHash = tokenHash
        self.sessionProof = sessionProof
    }
}
