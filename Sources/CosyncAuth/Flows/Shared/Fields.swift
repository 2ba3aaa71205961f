/// The named fields of an end-user request, after the transport decoded them (form or JSON). A field
/// is "present" when it is non-empty, as the legacy server treated "" as missing.
public struct Fields: Sendable {
    public let values: [String: String]
    public init(_ values: [String: String]) { self.values = values }

    public subscript(_ name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }

    /// The field, or `missingParameter`.
    public func require(_ name: String) throws(EndUserError) -> String {
        guard let value = self[name] else { throw .missingParameter }
        return value
    }
}

extension JSONValue {
    /// True when a string or a key anywhere inside holds a NUL (U+0000). PostgreSQL can store it
    /// neither in text nor in jsonb (SQLSTATE 22P05), and no client sends it: such input is invalid.
    public var containsNUL: Bool {
        switch self {
        case .string(let text): text.utf8.contains(0)
        case .array(let items): items.contains(where: \.containsNUL)
        case .object(let object): object.contains { $0.key.utf8.contains(0) || $0.value.containsNUL }
        default: false
        }
    }
}

/// Input rules shared by the flows (<doc:EndUserAPI> §1.3, <doc:EndUserAPI> §8.2, §10).
enum Input {
    /// A code: trimmed, 1-10 digits, else `invalidData`. Returned in canonical decimal form.
    static func code(_ raw: String) throws(EndUserError) -> String {
        let text = raw.trimmingCharacters(in: .whitespaces)
        guard (1...10).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(text) else {
            throw .invalidData
        }
        return String(value)
    }

    /// A password as the SDK sends it: 32 lowercase hex characters, else `invalidData`.
    static func md5(_ raw: String) throws(EndUserError) -> String {
        guard PasswordHasher.isMD5Hex(raw) else { throw .invalidData }
        return raw
    }
}
