import Foundation

/// The metadata rules of <doc:EndUserAPI> §9 and the user-JWT claims of <doc:EndUserAPI> §7.1.
public enum Metadata {
    /// The value at a dotted path.
    static func value(at path: [String], in object: [String: JSONValue]) -> JSONValue? {
        guard let head = path.first else { return nil }
        guard let value = object[head] else { return nil }
        if path.count == 1 { return value }
        guard let nested = value.objectValue else { return nil }
        return Self.value(at: Array(path.dropFirst()), in: nested)
    }

    /// Sets the value at a dotted path, creating the objects on the way.
    static func set(_ value: JSONValue, at path: [String], in object: inout [String: JSONValue]) {
        guard let head = path.first else { return }
        if path.count == 1 {
            object[head] = value
            return
        }
        var nested = object[head]?.objectValue ?? [:]
        set(value, at: Array(path.dropFirst()), in: &nested)
        object[head] = .object(nested)
    }

    /// Deep merge: `overlay` wins on conflicts.
    static func merge(_ base: [String: JSONValue], _ overlay: [String: JSONValue]) -> [String: JSONValue] {
        var result = base
        for (key, value) in overlay {
            if let a = result[key]?.objectValue, let b = value.objectValue {
                result[key] = .object(merge(a, b))
            } else {
                result[key] = value
            }
        }
        return result
    }

    /// Parses the `metaData` body field: a JSON object text (one holding a NUL, even escaped as
    /// `\u0000`, does not parse: jsonb cannot store it).
    static func parse(_ text: String?) -> [String: JSONValue]?? {
        guard let text, !text.isEmpty else { return .some(nil) }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)), let object = value.objectValue,
            !value.containsNUL
        else {
            return .none
        }
        return .some(object)
    }

    /// <doc:EndUserAPI> §9.2/§9.3: keeps only the configured paths (string values, trimmed). A required field that is
    /// absent, or a non-string value at a configured path, is `invalidMetadata`.
    static func filter(_ input: [String: JSONValue], fields: [MetaDataField]) throws(EndUserError) -> [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for field in fields {
            let path = field.pathComponents
            guard let value = value(at: path, in: input), value != .null else {
                if field.required { throw .invalidMetadata }
                continue
            }
            guard let text = value.stringValue else { throw .invalidMetadata }
            set(.string(text.trimmingCharacters(in: .whitespacesAndNewlines)), at: path, in: &result)
        }
        return result
    }

    /// <doc:EndUserAPI> §9.4 (the recommended, compatible rules): start from the stored metadata, apply supplied
    /// editable fields; a supplied non-editable value that differs from the stored one, a non-string
    /// value, or a required field missing from both is `invalidMetadata`.
    static func update(_ stored: [String: JSONValue], with input: [String: JSONValue], fields: [MetaDataField]) throws(EndUserError) -> [String: JSONValue] {
        var result = stored
        for field in fields {
            let path = field.pathComponents
            if let supplied = value(at: path, in: input), supplied != .null {
                guard let text = supplied.stringValue else { throw .invalidMetadata }
                let trimmed = JSONValue.string(text.trimmingCharacters(in: .whitespacesAndNewlines))
                if field.canEdit {
                    set(trimmed, at: path, in: &result)
                } else if value(at: path, in: stored) != trimmed {
                    throw .invalidMetadata
                }
            } else if field.required && value(at: path, in: stored) == nil {
                throw .invalidMetadata
            }
        }
        return result
    }

    static let reservedClaims: Set<String> = ["aud", "sub", "exp", "iat", "nbf", "iss", "jti"]

    /// The claims of the user JWT (<doc:EndUserAPI> §7.1). Works on a copy of the metadata; a required field with no
    /// value means the JWT cannot be built (`invalidMetadata`).
    public static func userJWTClaims(user: User, settings: AppSettings, now: Date = Date()) throws(EndUserError) -> [String: JSONValue] {
        var m = user.metaData
        var emailClaim = settings.metaDataEmail
        let anonymous = user.handle.contains("ANON_")
        for field in settings.metaData {
            let path = field.pathComponents
            if field.fieldName == "email" {
                set(.string(user.handle), at: path, in: &m)
                emailClaim = false
            }
            var v = value(at: path, in: m)
            if anonymous { v = .string("ANON_\(field.fieldName)") }
            let empty = v == nil || v == .null || v == .string("")
            if field.required && empty { throw .invalidMetadata }
            if let v, !empty { set(v, at: path, in: &m) }
        }
        if settings.userNamesEnabled, let userName = user.userName, !userName.isEmpty {
            m["userName"] = .string(userName)
        }
        let hours = settings.userJWTExpiration > 0 ? settings.userJWTExpiration : 1
        var claims: [String: JSONValue] = [:]
        for (key, value) in m where !reservedClaims.contains(key) && value != .null {
            claims[key] = value
        }
        if emailClaim && claims["email"] == nil { claims["email"] = .string(user.handle) }
        claims["aud"] = .string(settings.realmAppId.isEmpty ? "none" : settings.realmAppId)
        claims["sub"] = .string(user.jwtSubject ?? user.handle)
        claims["iat"] = .int(Int(now.timeIntervalSince1970))
        claims["exp"] = .int(Int(now.timeIntervalSince1970) + hours * 3600)
        return claims
    }
}
