import Foundation

/// The credentials an AppKey request carries (<doc:AppKeyAPI> §1.5).
public struct AppKeyCredentials: Sendable {
    public var appToken: String?
    public var accessToken: String?
    public var signupToken: String?

    public init(appToken: String? = nil, accessToken: String? = nil, signupToken: String? = nil) {
        self.appToken = appToken.flatMap { $0.isEmpty ? nil : $0 }
        self.accessToken = accessToken.flatMap { $0.isEmpty ? nil : $0 }
        self.signupToken = signupToken.flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// The fields of an AppKey request body, from either body kind: a JSON object (values keep their
/// JSON types; `response` is an object) or the AppKeySwift raw form (every value a string; `response`
/// is a JSON string). "Present" means non-empty after trimming (<doc:AppKeyAPI> §1.3).
public struct AppKeyFields: Sendable {
    public let values: [String: JSONValue]
    public init(_ values: [String: JSONValue]) { self.values = values }
    public init(form: [String: String]) { values = form.mapValues { .string($0) } }

    /// A scalar field as text, trimmed; nil when absent, null, empty or not a scalar.
    public subscript(_ name: String) -> String? {
        let text: String
        switch values[name] {
        case .string(let s): text = s
        case .int(let i): text = String(i)
        case .bool(let b): text = b ? "true" : "false"
        case .double(let d): text = String(d)
        default: return nil
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
    }

    public func require(_ name: String) throws(AppKeyError) -> String {
        guard let value = self[name] else { throw AppKeyError.missingParameter.with("missing parameter: \(name)") }
        return value
    }

    /// `response`: an object, or a string that parses to one (else E602); absent → E403.
    public func response() throws(AppKeyError) -> [String: JSONValue] {
        switch values["response"] {
        case .object(let object): return object
        case .string(let text) where !text.trimmingCharacters(in: .whitespaces).isEmpty:
            guard let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)))?.objectValue
            else { throw AppKeyError.invalidData.with("response is not a JSON object") }
            return object
        case nil, .null, .string: throw AppKeyError.missingParameter.with("missing parameter: response")
        default: throw AppKeyError.invalidData.with("response is not a JSON object")
        }
    }
}

/// A normalised handle (<doc:AppKeyAPI> §1.4).
public enum AppKeyHandle: Sendable, Equatable {
    case email(String)
    case phone(String)
    case anonymous(String)
    case userName(String)

    public var text: String {
        switch self {
        case .email(let s), .phone(let s), .anonymous(let s), .userName(let s): s
        }
    }

    /// Parses a handle; a string that is none of e-mail, phone or anonymous is a user name (when
    /// `userNames` allows; else nil). A malformed anonymous handle is `.anonymous("")`.
    public static func parse(_ raw: String, userNames: Bool = true) -> AppKeyHandle? {
        var text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        text = text.replacingOccurrences(of: "%2B", with: "+").replacingOccurrences(of: "%2b", with: "+")
        guard !text.isEmpty, text.utf8.count <= 254, !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            return nil
        }
        if text.hasPrefix("ANON_") { return .anonymous(isAnonymous(text) ? text : "") }
        if Identifiers.hasAt(text) {
            let email = text.replacingOccurrences(of: " ", with: "+").lowercased()
            return isEmail(email) ? .email(email) : nil
        }
        let stripped = text.filter { !" -.()".contains($0) }
        if !stripped.isEmpty, stripped.drop(while: { $0 == "+" }).allSatisfy({ $0.isASCII && $0.isNumber }),
            stripped.dropFirst(stripped.first == "+" ? 1 : 0).first != "+"
        {
            let digits = stripped.hasPrefix("+") ? String(stripped.dropFirst()) : stripped
            // AppKey accepts separators and a missing `+`; the number itself follows the one phone rule.
            guard let phone = Identifiers.phone("+" + digits) else { return nil }
            return .phone(phone)
        }
        guard userNames else { return nil }
        return .userName(text.lowercased())
    }

    static func isAnonymous(_ text: String) -> Bool {
        let hex = text.dropFirst(5).filter { $0 != "-" }
        let dashed = text.dropFirst(5)
        guard hex.count == 32, hex.allSatisfy(\.isHexDigit), hex.allSatisfy(\.isASCII) else { return false }
        // Dashes only where a UUID has them.
        let dashPositions = dashed.enumerated().filter { $0.element == "-" }.map(\.offset)
        return dashPositions.isEmpty || dashPositions == [8, 13, 18, 23]
    }

    static func isEmail(_ text: String) -> Bool {
        // Split at the @ code point (`Identifiers.hasAt`); the domain is judged by characters, as before.
        let parts = text.unicodeScalars.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !text.contains(where: \.isWhitespace) else { return false }
        let domain = String(String.UnicodeScalarView(parts[1])).split(separator: ".", omittingEmptySubsequences: false)
        guard domain.count >= 2, domain.allSatisfy({ !$0.isEmpty }), let tld = domain.last, tld.count >= 2 else { return false }
        return true
    }
}

/// AppKey user ids on the wire: the user's UUID as 32 lower-case hex characters (also the WebAuthn
/// `user.id`).
public enum AppKeyIds {
    public static func wire(_ id: UUID) -> String { id.uuidString.lowercased().replacingOccurrences(of: "-", with: "") }

    public static func uuid(_ wire: String) -> UUID? {
        let hex = Array(wire)
        guard hex.count == 32 else { return nil }
        let dashed = String(hex[0..<8]) + "-" + String(hex[8..<12]) + "-" + String(hex[12..<16]) + "-" + String(hex[16..<20]) + "-"
            + String(hex[20..<32])
        return UUID(uuidString: dashed)
    }
}
