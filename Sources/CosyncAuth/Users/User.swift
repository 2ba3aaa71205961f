import Foundation

/// Whether a user may sign in. A value the code does not know reads as suspended.
public enum UserStatus: String, Codable, Sendable, CaseIterable {
    case active, suspended

    init(stored: String) { self = UserStatus(rawValue: stored) ?? .suspended }
}

/// An end user of one app. The password hash and TOTP secret stay inside the server: `json()` never
/// shows them.
public struct User: Sendable {
    public let id: UUID
    public let appRef: Int64
    public var handle: String
    public var userName: String?
    public var passwordHash: String?
    public var locale: String
    public var status: UserStatus
    public var loginProvider: String
    public var socialUserId: String?
    public var metaData: [String: JSONValue]
    public var phone: String?
    public var phoneVerified: Bool
    public var twoFactorPhone: Bool
    public var twoFactorGoogle: Bool
    public var tokenVersion: Int
    public var lastLogin: Date?
    public let createdAt: Date
    public var updatedAt: Date
    /// The JWT `sub` when it is not the handle: the legacy handle as stored, for users whose handle
    /// the import normalised.
    public var jwtSubject: String? = nil
    /// SHA-256 of the one session-less access token (legacy or issued before sessions) that a
    /// changePassword kept alive while the token version moved on: the caller's own.
    public var keptTokenHash: Data? = nil

}
