import Foundation

/// The one normaliser of handles, user names and phone numbers (<doc:EndUserAPI> §1.3, §10): the
/// end-user flows, the admin API and the legacy import all go through it.
public enum Identifiers {
    /// A handle as the end-user wire sends it: trimmed and lower-cased; in an e-mail handle an interior
    /// space was a `+` the SDK did not escape (<doc:EndUserAPI> §1.3 repair). With `keepingAnonymous`,
    /// an `ANON_` handle stays as typed (loginAnonymous matches it exactly; the legacy import keeps it).
    public static func handle(_ raw: String, keepingAnonymous: Bool = false) -> String {
        if keepingAnonymous, raw.contains("ANON_") { return raw.trimmingCharacters(in: .whitespacesAndNewlines) }
        var handle = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        if hasAt(handle) { handle = handle.replacingOccurrences(of: " ", with: "+") }
        return handle
    }

    /// A handle of the admin API: also at most 254 code points as sent (what its OpenAPI schema's
    /// `maxLength` counts, white space included), and with `email`, one that holds an `@`.
    public static func adminHandle(_ raw: String, email: Bool = false) -> String? {
        guard raw.unicodeScalars.count <= 254, let handle = normalizedHandle(raw), !email || hasAt(handle) else { return nil }
        return handle
    }

    /// Whether a handle names an e-mail address: it holds the code point `@`. Not `String.contains("@")`,
    /// which compares grapheme clusters: an `@` followed by a combining mark or an emoji modifier is
    /// one cluster that is not `"@"`, and such a handle would pass for a user name (the legacy server
    /// looked for the character itself).
    public static func hasAt(_ text: some StringProtocol) -> Bool { text.unicodeScalars.contains("@") }

    /// The part of an e-mail address before its first `@` code point (the whole text when it has none).
    public static func localPart(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix { $0 != "@" }))
    }

    /// True for an anonymous handle (`ANON_`, kept as typed: every other handle is lower-cased). Such a
    /// handle is the whole credential `loginAnonymous` needs, so it is never written to a webhook
    /// payload or a log (`redacted`).
    public static func isAnonymous(_ handle: String) -> Bool { handle.contains("ANON_") }

    /// What events and the audit log record of a handle: the handle itself, or `anonymous` for an
    /// anonymous one. No digest of it either: the client chooses the handle, so a guessable one would
    /// be found from its hash. The user id (in every user event) tells anonymous users apart.
    public static func redacted(_ handle: String) -> String { isAnonymous(handle) ? "anonymous" : handle }

    /// A handle given as JSON (admin API): normalised like the wire's, without the space repair (JSON
    /// carries a `+` intact), and checked: 1–254 code points (what the column's CHECK counts; a
    /// grapheme count would let combining marks through to a 500) without spaces or control characters.
    public static func normalizedHandle(_ raw: String) -> String? {
        let handle = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard !handle.isEmpty, handle.unicodeScalars.count <= 254,
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

    /// The one phone rule: E.164 after the repair, `+` then 7–15 ASCII digits, the first not 0 (no
    /// country code starts with 0, and Twilio refuses such a number). Nil when it is not one.
    public static func phone(_ raw: String) -> String? {
        let phone = repairedPhone(raw)
        guard phone.hasPrefix("+") else { return nil }
        let digits = phone.dropFirst()
        guard (7...15).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }), digits.first != "0" else { return nil }
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
