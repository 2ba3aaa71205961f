import Foundation

/// The mutable state of an app that the admin API can change: name, status, settings and provider
/// credentials. `applying(_:)` validates a JSON object key by key and returns the changed copy, or
/// throws a `FieldError` naming the first bad field; the original is never touched, so a rejected
/// patch changes nothing.
public struct AppState: Sendable, Equatable {
    public typealias Status = AppStatus

    public var name: String
    public var status: Status
    public var settings: AppSettings
    public var credentials: ProviderCredentials

    public init(name: String, status: Status = .active, settings: AppSettings = AppSettings(),
                credentials: ProviderCredentials = ProviderCredentials()) {
        self.name = name
        self.status = status
        self.settings = settings
        self.credentials = credentials
    }

    public static let maxNameLength = 100

    /// Fields accepted on create and PATCH.
    public static var writableFields: [String] {
        ["name", "status"] + AppSettings.CodingKeys.allCases.map(\.rawValue) + ProviderCredentials.fieldNames
    }

    public func applying(_ patch: [String: JSONValue]) throws(FieldError) -> AppState {
        var next = self
        for key in patch.keys.sorted() {
            guard let value = patch[key] else { continue }
            try next.apply(key, value)
        }
        // `required` attestation means a certificate chain to an anchor the app trusts: without anchors
        // any self-made certificate would pass, so the two come together.
        if patch["attestation"] != nil || patch["trustAnchors"] != nil, next.settings.attestation == .required,
            next.settings.trustAnchors.isEmpty
        {
            throw FieldError("attestation", "trust_anchors_required", "'required' needs trustAnchors (the roots the attestation must chain to)")
        }
        return next
    }

    private mutating func apply(_ key: String, _ value: JSONValue) throws(FieldError) {
        let v = FieldReader(field: key, value: value)
        switch key {
        case "name":
            // Lengths count code points (as JSON Schema's maxLength does), before trimming.
            let name = try v.string(maxLength: Self.maxNameLength).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !name.isEmpty else { throw FieldError(key, "invalid_value", "must not be empty") }
            guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || [0x85, 0x2028, 0x2029].contains($0.value) }) else {
                throw FieldError(key, "invalid_value", "must not contain control characters")
            }
            self.name = name
        case "status": status = try v.oneOf(Status.self)
        case "product": throw FieldError(key, "read_only", "is chosen when the app is created and cannot change")
        case "signupFlow": settings.signupFlow = try v.oneOf(AppSettings.SignupFlow.self)
        case "twoFactorVerification": settings.twoFactorVerification = try v.oneOf(AppSettings.TwoFactorMode.self)
        case "signupEnabled": settings.signupEnabled = try v.bool()
        case "invitationEnabled": settings.invitationEnabled = try v.bool()
        case "passwordFilter": settings.passwordFilter = try v.bool()
        case "anonymousLoginEnabled": settings.anonymousLoginEnabled = try v.bool()
        case "userNamesEnabled": settings.userNamesEnabled = try v.bool()
        case "appleLoginEnabled": settings.appleLoginEnabled = try v.bool()
        case "googleLoginEnabled": settings.googleLoginEnabled = try v.bool()
        case "metaDataEmail": settings.metaDataEmail = try v.bool()
        case "jwtEnabled": settings.jwtEnabled = try v.bool()
        case "emailExtension": settings.emailExtension = try v.bool()
        case "passwordMinLength": settings.passwordMinLength = try v.int(in: 0...128)
        case "passwordMinUpper": settings.passwordMinUpper = try v.int(in: 0...128)
        case "passwordMinLower": settings.passwordMinLower = try v.int(in: 0...128)
        case "passwordMinDigit": settings.passwordMinDigit = try v.int(in: 0...128)
        case "passwordMinSpecial": settings.passwordMinSpecial = try v.int(in: 0...128)
        case "userJWTExpiration": settings.userJWTExpiration = try v.int(in: 1...8760)
        case "maxLoginAttempts": settings.maxLoginAttempts = try v.int(in: 1...1000)
        case "smsDailyLimit": settings.smsDailyLimit = try v.int(in: 0...1_000_000)
        case "freshAuthMinutes": settings.freshAuthMinutes = try v.int(in: 1...1440)
        case "appleBundleId": settings.appleBundleId = try v.commaList()
        case "googleClientId": settings.googleClientId = try v.commaList()
        case "googleAppName": settings.googleAppName = try v.string(maxLength: 100)
        case "realmAppId": settings.realmAppId = try v.string(maxLength: 200)
        case "handle":
            guard try v.string() == "email" else { throw FieldError(key, "invalid_value", "must be 'email'") }
        case "emailExtensionSenderEmail":
            let email = try v.string(maxLength: 254)
            guard email.isEmpty || Self.looksLikeEmail(email) else {
                throw FieldError(key, "invalid_value", "must be an e-mail address")
            }
            settings.emailExtensionSenderEmail = email
        case "appData":
            guard let object = value.objectValue else { throw v.typeError("an object") }
            guard let size = try? JSONCoding.encode(value).count, size <= 16_384 else {
                throw FieldError(key, "too_long", "must be at most 16 KiB of JSON")
            }
            settings.appData = object
        case "locales": settings.locales = try Self.parseLocales(value)
        case "rpId":
            let id = try v.string(maxLength: 253).lowercased()
            guard id.isEmpty || Self.isDomain(id) else {
                throw FieldError(key, "invalid_value", "must be a domain name such as auth.example.com (no scheme, port or path)")
            }
            settings.rpId = id
        case "rpName":
            let name = try v.string(maxLength: 100)
            guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw FieldError(key, "invalid_value", "must not contain control characters")
            }
            settings.rpName = name
        case "allowedOrigins": settings.allowedOrigins = try Self.parseOrigins(value)
        case "userVerification": settings.userVerification = try v.oneOf(AppSettings.UserVerification.self)
        case "attestation": settings.attestation = try v.oneOf(AppSettings.AttestationPolicy.self)
        case "counterRegression": settings.counterRegression = try v.oneOf(AppSettings.CounterRegression.self)
        case "handleType": settings.handleType = try v.oneOf(AppSettings.HandleType.self)
        case "passkeysPerUser": settings.passkeysPerUser = try v.int(in: 1...100)
        case "challengeLifetimeSeconds": settings.challengeLifetimeSeconds = try v.int(in: 60...600)
        case "signupCodeLifetimeSeconds": settings.signupCodeLifetimeSeconds = try v.int(in: 60...86_400)
        case "trustAnchors": settings.trustAnchors = try Self.parseTrustAnchors(value)
        case "metaData": settings.metaData = try Self.parseMetaData(value, field: key, allowCanEdit: true)
        case "metaDataInvite": settings.metaDataInvite = try Self.parseMetaData(value, field: key, allowCanEdit: false)
        case "TWILIOAccountSid":
            credentials.TWILIOAccountSid = try v.credential { $0.count == 34 && $0.hasPrefix("AC") && Hex.decode(String($0.dropFirst(2))) != nil }
        case "TWILIOToken": credentials.TWILIOToken = try v.credential { (16...200).contains($0.unicodeScalars.count) }
        case "TWILIOPhoneNumber":
            credentials.TWILIOPhoneNumber = try v.credential { number in
                number.first == "+" && (8...16).contains(number.count) && number.dropFirst().allSatisfy(\.isASCII)
                    && number.dropFirst().allSatisfy(\.isNumber) && number.dropFirst().first != "0"
            }
        case "emailExtensionAPIKey": credentials.emailExtensionAPIKey = try v.credential { (8...500).contains($0.unicodeScalars.count) }
        default:
            throw FieldError(key, "unknown_field", "is not a setting of an app")
        }
    }

    /// A lower-case DNS name of at least two labels: letters, digits and inner hyphens.
    static func isDomain(_ text: String, maxLength: Int = 253) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, text.utf8.count <= maxLength else { return false }
        return labels.allSatisfy { label in
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-" else { return false }
            return label.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
        }
    }

    /// WebAuthn origins: `https://host[:port]` (or `http://localhost[:port]` for development), or a
    /// native app origin `android:apk-key-hash:<base64url>` / `ios:bundle-id:<id>`; at most 50.
    static func parseOrigins(_ value: JSONValue) throws(FieldError) -> [String] {
        guard let items = value.arrayValue else { throw FieldError("allowedOrigins", "invalid_type", "must be an array of origins") }
        guard items.count <= 50 else { throw FieldError("allowedOrigins", "too_long", "must have at most 50 origins") }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            let field = "allowedOrigins[\(index)]"
            guard let origin = item.stringValue else { throw FieldError(field, "invalid_type", "must be a string") }
            guard isOrigin(origin) else {
                throw FieldError(
                    field, "invalid_value",
                    "must be https://host[:port], http://localhost[:port] or android:apk-key-hash:<base64url>, without a path")
            }
            guard !result.contains(origin) else { throw FieldError(field, "duplicate", "'\(origin)' is listed twice") }
            result.append(origin)
        }
        return result
    }

    static func isOrigin(_ origin: String) -> Bool {
        guard origin.utf8.count <= 300, !origin.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value >= 0x7f }) else { return false }
        if origin.hasPrefix("android:apk-key-hash:") {
            let hash = origin.dropFirst("android:apk-key-hash:".count)
            return (20...100).contains(hash.count) && hash.unicodeScalars.allSatisfy { $0.properties.isASCIIHexDigit || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || $0 == "-" || $0 == "_" }
        }
        if origin.hasPrefix("ios:bundle-id:") { return origin.count > "ios:bundle-id:".count }
        let rest: Substring
        if origin.hasPrefix("https://") { rest = origin.dropFirst(8) }
        else if origin.hasPrefix("http://localhost") { rest = origin.dropFirst(7) }
        else { return false }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        // The whole origin is at most 300 characters; its host has no bound of its own. Plain http is for
        // `localhost` itself only (not `http://localhost.evil.example`, someone else's domain).
        let plainHTTP = !origin.hasPrefix("https://")
        guard parts.count <= 2, let host = parts.first,
            host == "localhost" || (!plainHTTP && isDomain(String(host), maxLength: 300))
        else { return false }
        if parts.count == 2 { guard let port = Int(parts[1]), (1...65535).contains(port), String(port) == parts[1] else { return false } }
        return true
    }

    /// Standard base64 of DER certificates (a light check: it decodes and is a DER SEQUENCE); at most 10.
    static func parseTrustAnchors(_ value: JSONValue) throws(FieldError) -> [String] {
        guard let items = value.arrayValue else { throw FieldError("trustAnchors", "invalid_type", "must be an array of base64 DER certificates") }
        guard items.count <= 10 else { throw FieldError("trustAnchors", "too_long", "must have at most 10 certificates") }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            let field = "trustAnchors[\(index)]"
            guard let text = item.stringValue else { throw FieldError(field, "invalid_type", "must be a string") }
            // Standard base64 with its padding (the document's pattern), then DER: a SEQUENCE of 18+ bytes.
            let chars = Array(text.utf8)
            let isBase64 = chars.allSatisfy { c in
                (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) || (0x30...0x39).contains(c) || c == 0x2B || c == 0x2F || c == 0x3D
            }
            let padding = chars.reversed().prefix { $0 == UInt8(ascii: "=") }.count
            guard isBase64, chars.count % 4 == 0, (24...16_008).contains(chars.count), padding <= 2,
                !chars.dropLast(padding).contains(UInt8(ascii: "=")),
                let der = WebAuthn.decodeBase64URL(text), der.count >= 18, der.first == 0x30
            else {
                throw FieldError(field, "invalid_value", "must be the standard base64 of a DER X.509 certificate")
            }
            result.append(text)
        }
        return result
    }

    static func looksLikeEmail(_ text: String) -> Bool {
        let parts = text.unicodeScalars.split(separator: "@", omittingEmptySubsequences: false)
        return parts.count == 2 && !parts[0].isEmpty && parts[1].contains(".") && !text.contains(where: \.isWhitespace)
    }

    static func parseLocales(_ value: JSONValue) throws(FieldError) -> [String] {
        guard let items = value.arrayValue else { throw FieldError("locales", "invalid_type", "must be an array of locale codes") }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            guard let code = item.stringValue else {
                throw FieldError("locales[\(index)]", "invalid_type", "must be a string")
            }
            guard Locales.known.contains(code) else {
                throw FieldError("locales[\(index)]", "invalid_value", "'\(code)' is not a known upper-case locale code")
            }
            guard !result.contains(code) else {
                throw FieldError("locales[\(index)]", "duplicate", "'\(code)' is listed twice")
            }
            result.append(code)
        }
        guard result.contains(Locales.defaultLocale) else {
            throw FieldError("locales", "invalid_value", "must include EN")
        }
        return [Locales.defaultLocale] + result.filter { $0 != Locales.defaultLocale }
    }

    static func parseMetaData(_ value: JSONValue, field: String, allowCanEdit: Bool) throws(FieldError) -> [MetaDataField] {
        guard let items = value.arrayValue else { throw FieldError(field, "invalid_type", "must be an array of field descriptors") }
        guard items.count <= 100 else { throw FieldError(field, "too_long", "must have at most 100 descriptors") }
        var fields: [MetaDataField] = []
        for (index, item) in items.enumerated() {
            let descriptor = try MetaDataField.parse(item, field: "\(field)[\(index)]", allowCanEdit: allowCanEdit)
            // A path that is a prefix of another would make one claim overwrite the other.
            for other in fields {
                let a = descriptor.pathComponents, b = other.pathComponents
                if a == b || a.starts(with: b) || b.starts(with: a) {
                    throw FieldError("\(field)[\(index)].path", "duplicate", "overlaps the path '\(other.path)'")
                }
            }
            fields.append(descriptor)
        }
        return fields
    }
}

/// Typed reads of one JSON value, with errors naming the field.
struct FieldReader {
    let field: String
    let value: JSONValue

    func typeError(_ expected: String) -> FieldError {
        FieldError(field, "invalid_type", "must be \(expected), got \(value.typeName)")
    }

    func bool() throws(FieldError) -> Bool {
        guard let flag = value.boolValue else { throw typeError("a boolean") }
        return flag
    }

    func string(maxLength: Int = 10_000) throws(FieldError) -> String {
        guard let text = value.stringValue else { throw typeError("a string") }
        guard text.unicodeScalars.count <= maxLength else { throw FieldError(field, "too_long", "must be at most \(maxLength) characters") }
        return text
    }

    func int(in range: ClosedRange<Int>) throws(FieldError) -> Int {
        guard case .int(let number) = value else { throw typeError("an integer") }
        guard range.contains(number) else {
            throw FieldError(field, "out_of_range", "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    func oneOf<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws(FieldError) -> T where T.RawValue == String {
        let names = T.allCases.map(\.rawValue)
        guard let text = value.stringValue else { throw typeError("one of \(names.joined(separator: ", "))") }
        guard let result = T(rawValue: text) else {
            throw FieldError(field, "invalid_value", "must be one of \(names.joined(separator: ", ")), got '\(text)'")
        }
        return result
    }

    /// A comma-separated list of non-empty tokens without spaces (bundle ids, client ids); may be empty.
    func commaList() throws(FieldError) -> String {
        let text = try string(maxLength: 2000)
        guard !text.isEmpty else { return "" }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard parts.allSatisfy({ !$0.isEmpty && !$0.contains(where: \.isWhitespace) }) else {
            throw FieldError(field, "invalid_value", "must be a comma-separated list of identifiers")
        }
        return parts.joined(separator: ",")
    }

    /// A write-only credential: a string accepted by `isValid`, or null to clear it.
    func credential(_ isValid: (String) -> Bool) throws(FieldError) -> String? {
        if value == .null { return nil }
        guard let text = value.stringValue else { throw typeError("a string or null") }
        guard isValid(text) else { throw FieldError(field, "invalid_value", "is not a valid value for this credential") }
        return text
    }
}
