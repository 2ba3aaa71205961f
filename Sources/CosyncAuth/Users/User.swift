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

/// Normalisation and syntax of handles and user names (<doc:EndUserAPI> §10).
public enum Identifiers {
    /// Lower-case and trimmed; 1–254 characters without spaces or control characters.
    public static func normalizedHandle(_ raw: String) -> String? {
        let handle = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard !handle.isEmpty, handle.count <= 254,
            !handle.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7f })
        else { return nil }
        return handle
    }

    /// A phone number as typed or stored, trimmed, with the `+` put back where the SDK's unescaped
    /// `+` arrived as a space (<doc:EndUserAPI> §1.3); not validated.
    public static func repairedPhone(_ raw: String) -> String {
        let phone = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if let first = phone.first, first.isNumber, raw.first == " " || raw.first == "+" { return "+" + phone }
        return phone
    }

    /// Lower-case and trimmed; must match `^[a-z][a-z0-9]*$`, at most 64 characters.
    public static func normalizedUserName(_ raw: String) -> String? {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard let first = name.unicodeScalars.first, ("a"..."z").contains(first), name.count <= 64,
            name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) })
        else { return nil }
        return name
    }
}
