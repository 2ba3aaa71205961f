import Foundation

/// A Portal account's role on one app. An operator acts as owner on every app.
public enum PortalRole: String, Sendable, CaseIterable, Comparable {
    case owner, editor, viewer

    /// owner > editor > viewer.
    var rank: Int {
        switch self {
        case .owner: 3
        case .editor: 2
        case .viewer: 1
        }
    }

    public static func < (lhs: PortalRole, rhs: PortalRole) -> Bool { lhs.rank < rhs.rank }
}

/// A Portal account (an operator or a developer), never its secrets.
public struct PortalAccount: Sendable, Equatable {
    public let id: UUID
    /// Lower-cased.
    public let email: String
    public let isOperator: Bool
    /// False until the first TOTP code confirmed the enrolment; such an account cannot sign in.
    public let totpEnabled: Bool
    /// "active" or "suspended".
    public let status: String
}

/// A signed-in browser session.
public struct PortalSession: Sendable {
    public let id: UUID
    public let account: PortalAccount
    public let createdAt: Date
    public let lastSeenAt: Date
    /// When the account last proved itself in this session (the sign-in, or a fresh sign-in since).
    public let provenAt: Date
    /// How: "password+totp".
    public let provenBy: String

    /// The actor of this session's audit rows and admin calls: `portal:<email>`.
    public var auditActor: String { "portal:\(account.email)" }

    /// Whether the last proof is recent enough for a destructive action (default 5 minutes).
    public func isFresh(within seconds: Int = PortalAccounts.freshSeconds, now: Date = Date()) -> Bool {
        now.timeIntervalSince(provenAt) <= Double(seconds)
    }
}

/// A session just made, with the cookie value that names it. The value is shown only now: the
/// database keeps its SHA-256 alone.
public struct PortalSignIn: Sendable {
    public let session: PortalSession
    public let cookie: String
}

/// A TOTP enrolment in progress: the secret to show (as `TOTP.displayKey` and the provisioning URI)
/// and the ticket that carries the ceremony to its confirmation (keep it in a short-lived cookie;
/// 30 minutes, a few code attempts).
public struct PortalEnrolment: Sendable {
    public let account: PortalAccount
    public let totpSecret: [UInt8]
    public let ticket: String

    /// `otpauth://…` for a QR code.
    public var provisioningURI: String { TOTP.provisioningURI(issuer: "Cosync Portal", account: account.email, secret: totpSecret) }
}

/// What the first sign-in step leads to: the TOTP code (with the ticket for step 2), or, for an account
/// whose enrolment was never confirmed, the enrolment.
public enum PortalSignInStep: Sendable {
    case code(ticket: String)
    case enrol(PortalEnrolment)
}

/// One member of an app's Portal team.
public struct PortalMember: Sendable, Equatable {
    public let accountId: UUID
    public let email: String
    public let role: PortalRole
}

public enum PortalError: Error, Equatable, CustomStringConvertible {
    /// Wrong e-mail or password (never says which), or a sign-in ticket that is gone: start again.
    case invalidCredentials
    /// Too many failures; nothing was checked.
    case locked(retryAfterSeconds: Int)
    case needsSecondFactor
    /// A wrong, malformed or already used TOTP code.
    case invalidCode
    /// An invite code that is unknown, used or expired.
    case inviteInvalid
    case weakPassword(String)
    case forbidden
    case notFound
    case conflict(String)
    case badInput(String)

    public var description: String {
        switch self {
        case .invalidCredentials: "The e-mail address or password is not right."
        case .locked(let seconds): "Too many attempts. Try again in \(seconds) seconds."
        case .needsSecondFactor: "A code from your authenticator app is needed."
        case .invalidCode: "The code is not right."
        case .inviteInvalid: "This invite link is not valid: it was used, it expired, or it is wrong."
        case .weakPassword(let reason): reason
        case .forbidden: "Your role does not allow this."
        case .notFound: "Not found."
        case .conflict(let reason): reason
        case .badInput(let reason): reason
        }
    }
}
