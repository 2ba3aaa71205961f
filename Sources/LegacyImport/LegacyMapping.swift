import CosyncAuth
import Crypto
import Foundation

/// A legacy app, decrypted and mapped onto this server's model.
public struct ImportedApp: Sendable {
    public let legacyId: String
    public let appId: String
    public let name: String
    public let status: String
    public let settings: AppSettings
    public let credentials: ProviderCredentials
    public let appToken: String
    public let appSecret: String?
    public let key: RSAKeyMaterial
    /// The SPKI PEM exactly as the legacy server stored it (its base64 is the shipped `rawPublicKey`).
    public let publicKeyPEM: String
    public let createdAt: Date
    public let updatedAt: Date
    public let fingerprint: Data
    /// Values that could not be carried as they were (reported, not fatal).
    public let notes: [String]

    public var rawPublicKey: String { Data(publicKeyPEM.utf8).base64EncodedString() }
}

/// One refused (or adjusted) row, for the JSON report.
public struct ReportEntry: Sendable {
    public let collection: String
    public let legacyId: String
    public let appId: String
    public let handle: String?
    public let action: String  // refused | adjusted | replaced | lost
    public let reason: String

    public init(collection: String, legacyId: String, appId: String, handle: String?, action: String, reason: String) {
        self.collection = collection
        self.legacyId = legacyId
        self.appId = appId
        self.handle = handle
        self.action = action
        self.reason = reason
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "collection": .string(collection), "legacyId": .string(legacyId), "appId": .string(appId), "action": .string(action),
            "reason": .string(reason),
        ]
        if let handle { object["handle"] = .string(handle) }
        return .object(object)
    }
}

enum LegacyMapping {
    static func fingerprint(_ bytes: ArraySlice<UInt8>) -> Data { Data(SHA256.hash(data: Array(bytes))) }

    /// A stable id for an imported row: a UUID (version 8 layout) from SHA-256 of its legacy identity.
    static func stableId(_ parts: String...) -> UUID {
        var bytes = Array(SHA256.hash(data: Data(parts.joined(separator: "\u{1f}").utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x80
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// Handles are trimmed and lower-cased; in an e-mail handle a space was a `+` (<doc:EndUserAPI> §1.3, §11.3).
    /// `ANON_` handles are matched exactly by loginAnonymous and stay as they are.
    static func handle(_ raw: String) -> String { Identifiers.handle(raw, keepingAnonymous: true) }

    /// E.164 with the leading space that stood for `+` repaired; nil when it is not a phone number.
    static func phone(_ raw: String?) -> String? { raw.flatMap { Identifiers.phone($0) } }

    static func locale(_ raw: String?) -> String {
        let locale = (raw ?? "").trimmingCharacters(in: .whitespaces).uppercased()
        return Locales.known.contains(locale) ? locale : Locales.defaultLocale
    }

    // MARK: apps

    static func app(_ doc: LegacyDocument, bytes: ArraySlice<UInt8>, cipher: LegacyCipher) throws -> ImportedApp {
        let legacyId = doc.id ?? "?"
        guard let appId = doc.string("appId"), AppAdministration.isAppId(appId) else {
            throw ImportFailure("apps document \(legacyId): appId is missing or not 32 lowercase hex characters")
        }
        let name = (doc.string("name") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let label = "app '\(name)' (\(appId))"
        guard (1...100).contains(name.count) else { throw ImportFailure("\(label): the name must have 1 to 100 characters") }
        guard let appToken = doc.string("appToken"), !appToken.isEmpty else { throw ImportFailure("\(label): appToken is missing") }

        func secret(_ field: String, _ looksPlain: (String) -> Bool) throws -> String? {
            guard let stored = doc.string(field), !stored.isEmpty else { return nil }
            guard let plain = cipher.reveal(stored, looksPlain: looksPlain) else {
                throw ImportFailure("\(label): \(field) does not decrypt with the given encrypt key (wrong --encrypt-key?)")
            }
            return plain
        }
        guard let privateB64 = try secret("appPrivateKey", LegacyCipher.isBase64PEM),
            let publicB64 = try secret("appPublicKey", LegacyCipher.isBase64PEM),
            let privatePEM = Data(base64Encoded: privateB64).flatMap({ String(data: $0, encoding: .utf8) }),
            let publicPEM = Data(base64Encoded: publicB64).flatMap({ String(data: $0, encoding: .utf8) })
        else { throw ImportFailure("\(label): appPrivateKey and appPublicKey are required") }
        let key: RSAKeyMaterial
        do {
            key = try RSAKeyMaterial(privateKeyPEM: privatePEM, expectedPublicKeyPEM: publicPEM)
        } catch {
            throw ImportFailure("\(label): \(error)")
        }
        let appSecret = try secret("appSecret", LegacyCipher.isJWT)
        var credentials = ProviderCredentials()
        credentials.emailExtensionAPIKey = try secret("emailExtensionAPIKey", LegacyCipher.isSendGridKey)
        credentials.TWILIOAccountSid = try secret("TWILIOAccountSid", LegacyCipher.isTwilioSid)
        credentials.TWILIOToken = try secret("TWILIOToken", LegacyCipher.isTwilioToken)
        credentials.TWILIOPhoneNumber = try secret("TWILIOPhoneNumber", LegacyCipher.isPhone)

        var notes: [String] = []
        let (settings, settingNotes) = self.settings(doc)
        notes += settingNotes
        let status: String
        switch doc.string("status") ?? "active" {
        case "active": status = "active"
        case "migrated": status = "migrated"
        case "inactive": status = "suspended"
        case let other:
            // Legacy let any other value (e.g. "suspend") log users in: active keeps that behaviour.
            status = "active"
            notes.append("status '\(other)' did not block end users on the legacy server; imported as active")
        }
        return ImportedApp(
            legacyId: legacyId, appId: appId, name: name, status: status, settings: settings, credentials: credentials, appToken: appToken,
            appSecret: appSecret, key: key, publicKeyPEM: publicPEM, createdAt: doc.date("createdAt") ?? Date(timeIntervalSince1970: 0),
            updatedAt: doc.date("updatedAt") ?? doc.date("createdAt") ?? Date(timeIntervalSince1970: 0), fingerprint: fingerprint(bytes),
            notes: notes)
    }

    /// Every legacy setting the end-user API reads (<doc:LegacyImport> §2.1), defaults where absent.
    static func settings(_ doc: LegacyDocument) -> (AppSettings, [String]) {
        var s = AppSettings()
        var notes: [String] = []
        if let flow = doc.string("signupFlow") {
            if let value = AppSettings.SignupFlow(rawValue: flow) { s.signupFlow = value } else { notes.append("signupFlow '\(flow)' unknown; code used") }
        }
        if let mode = doc.string("twoFactorVerification") {
            if let value = AppSettings.TwoFactorMode(rawValue: mode) {
                s.twoFactorVerification = value
            } else {
                notes.append("twoFactorVerification '\(mode)' unknown; none used")
            }
        }
        func flag(_ key: String, _ apply: (Bool) -> Void) { if let b = doc.bool(key) { apply(b) } }
        flag("signupEnabled") { s.signupEnabled = $0 }
        flag("invitationEnabled") { s.invitationEnabled = $0 }
        flag("passwordFilter") { s.passwordFilter = $0 }
        flag("anonymousLoginEnabled") { s.anonymousLoginEnabled = $0 }
        flag("userNamesEnabled") { s.userNamesEnabled = $0 }
        flag("appleLoginEnabled") { s.appleLoginEnabled = $0 }
        flag("googleLoginEnabled") { s.googleLoginEnabled = $0 }
        flag("jwtEnabled") { s.jwtEnabled = $0 }
        flag("emailExtension") { s.emailExtension = $0 }
        // Unset in legacy (apps made before the setting existed) meant no e-mail claim.
        s.metaDataEmail = doc.bool("metaDataEmail") ?? false
        func count(_ key: String, _ range: ClosedRange<Int>, _ apply: (Int) -> Void) {
            if let n = doc.int(key) { apply(min(max(n, range.lowerBound), range.upperBound)) }
        }
        count("passwordMinLength", 0...128) { s.passwordMinLength = $0 }
        count("passwordMinUpper", 0...128) { s.passwordMinUpper = $0 }
        count("passwordMinLower", 0...128) { s.passwordMinLower = $0 }
        count("passwordMinDigit", 0...128) { s.passwordMinDigit = $0 }
        count("passwordMinSpecial", 0...128) { s.passwordMinSpecial = $0 }
        // Legacy fell back to 1 hour when 0 or empty.
        if let hours = doc.int("userJWTExpiration") { s.userJWTExpiration = hours <= 0 ? 1 : min(hours, 8760) }
        for key in ["appleBundleId", "googleClientId", "googleAppName", "realmAppId", "handle", "emailExtensionSenderEmail"] {
            guard let text = doc.string(key) else { continue }
            switch key {
            case "appleBundleId": s.appleBundleId = text
            case "googleClientId": s.googleClientId = text
            case "googleAppName": s.googleAppName = text
            case "realmAppId": s.realmAppId = text
            case "handle": s.handle = text
            default: s.emailExtensionSenderEmail = text
            }
        }
        // A list the legacy ZIP import corrupted into ["EN,FR"] is split again.
        if let locales = doc.array("locales")?.compactMap({ $0.stringValue?.uppercased() })
            .flatMap({ $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } })
        {
            let known = locales.filter { Locales.known.contains($0) }
            if known.count != locales.count { notes.append("locales: unknown codes dropped from \(locales)") }
            var list = known.filter { $0 != Locales.defaultLocale }
            list.insert(Locales.defaultLocale, at: 0)
            s.locales = list
        }
        func fields(_ key: String, canEdit: Bool) -> [MetaDataField] {
            (doc.array(key) ?? []).enumerated().compactMap { index, value in
                do {
                    return try MetaDataField.parse(cleanDescriptor(value, canEdit: canEdit), field: "\(key)[\(index)]", allowCanEdit: canEdit)
                } catch {
                    notes.append("\(key)[\(index)] dropped: \(error)")
                    return nil
                }
            }
        }
        s.metaData = fields("metaData", canEdit: true)
        s.metaDataInvite = fields("metaDataInvite", canEdit: false)
        if let appData = doc.object("appData") { s.appData = appData }
        // maxLoginAttempts had no effect in legacy (no lockout existed): this server's default applies.
        return (s, notes)
    }

    /// Keeps the descriptor keys this server knows (`_id` and friends from Mongo are dropped).
    static func cleanDescriptor(_ value: JSONValue, canEdit: Bool) -> JSONValue {
        guard let object = value.objectValue else { return value }
        let allowed: Set<String> = canEdit ? ["id", "path", "fieldName", "required", "canEdit"] : ["id", "path", "fieldName", "required"]
        return .object(object.filter { allowed.contains($0.key) })
    }
}
