/// One metadata field descriptor of an app's `metaData` or `metaDataInvite` schema
/// (<doc:LegacyImport> §2.2): `path` is both the dotted path inside the user's metadata and the JWT
/// claim path.
public struct MetaDataField: Codable, Sendable, Equatable {
    public var id: JSONValue?
    public var path: String
    public var fieldName: String
    public var required: Bool
    public var canEdit: Bool

    public init(id: JSONValue? = nil, path: String, fieldName: String, required: Bool = false, canEdit: Bool = false) {
        self.id = id
        self.path = path
        self.fieldName = fieldName
        self.required = required
        self.canEdit = canEdit
    }

    public var pathComponents: [String] { path.split(separator: ".").map(String.init) }

    /// Registered JWT claims a metadata path must not overwrite (the legacy server let it: <doc:LegacyImport> §8 B7).
    static let reservedClaims: Set<String> = ["aud", "sub", "exp", "iat", "nbf", "iss", "jti"]

    /// Validates one descriptor given as JSON. `field` names it in errors, e.g. `metaData[2].path`.
    public static func parse(_ value: JSONValue, field: String, allowCanEdit: Bool) throws(FieldError) -> MetaDataField {
        guard let object = value.objectValue else {
            throw FieldError(field, "invalid_type", "must be an object with path and fieldName")
        }
        let allowed: Set<String> = allowCanEdit
            ? ["id", "path", "fieldName", "required", "canEdit"] : ["id", "path", "fieldName", "required"]
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw FieldError("\(field).\(unknown)", "unknown_field", "is not a field of a metadata descriptor")
        }
        guard let path = object["path"]?.stringValue else {
            throw FieldError("\(field).path", "invalid_type", "is required and must be a string")
        }
        let components = path.split(separator: ".", omittingEmptySubsequences: false)
        let validComponent: (Substring) -> Bool = { part in
            guard let first = part.first, first.isLetter || first == "_" else { return false }
            return part.count <= 64 && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        }
        guard !path.isEmpty, path.count <= 200, components.count <= 8, components.allSatisfy(validComponent) else {
            throw FieldError(
                "\(field).path", "invalid_value",
                "must be a dotted path of identifiers such as user.firstName")
        }
        if let head = components.first, reservedClaims.contains(String(head)) {
            throw FieldError("\(field).path", "invalid_value", "must not start with the JWT claim '\(head)'")
        }
        guard let fieldName = object["fieldName"]?.stringValue,
            !fieldName.trimmingCharacters(in: .whitespaces).isEmpty, fieldName.unicodeScalars.count <= 100
        else {
            throw FieldError("\(field).fieldName", "invalid_value", "is required: a non-empty string of up to 100 characters")
        }
        var required = false
        if let raw = object["required"], raw != .null {
            guard let flag = raw.boolValue else { throw FieldError("\(field).required", "invalid_type", "must be a boolean") }
            required = flag
        }
        var canEdit = false
        if let raw = object["canEdit"], raw != .null {
            guard let flag = raw.boolValue else { throw FieldError("\(field).canEdit", "invalid_type", "must be a boolean") }
            canEdit = flag
        }
        var id: JSONValue? = nil
        if let raw = object["id"] {
            switch raw {
            case .string, .int, .double, .null: id = raw == .null ? nil : raw
            default: throw FieldError("\(field).id", "invalid_type", "must be a string or a number")
            }
        }
        return MetaDataField(id: id, path: path, fieldName: fieldName, required: required, canEdit: canEdit)
    }
}
