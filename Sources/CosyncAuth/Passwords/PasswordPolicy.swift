/// The app's password rules (<doc:EndUserAPI> §8.1). The SDKs enforce them on the device; the server can
/// enforce them only where it sees a plaintext password: the admin API.
public enum PasswordPolicy {
    /// The 22 "special" code points of the legacy client rule (note U+2018, not the ASCII apostrophe).
    static let special: Set<Unicode.Scalar> = Set("@%+\\/\u{2018}!#$^?:()[]~`-_.,".unicodeScalars)

    /// Nil when the password passes, else a sentence saying which rule failed.
    public static func violation(of password: String, settings: AppSettings) -> String? {
        guard settings.passwordFilter else { return nil }
        if password.count < settings.passwordMinLength {
            return "must be at least \(settings.passwordMinLength) characters"
        }
        let upper = password.filter { String($0).uppercased() == String($0) && String($0).lowercased() != String($0) }.count
        if upper < settings.passwordMinUpper { return "must have at least \(settings.passwordMinUpper) upper-case letters" }
        let lower = password.filter { String($0).lowercased() == String($0) && String($0).uppercased() != String($0) }.count
        if lower < settings.passwordMinLower { return "must have at least \(settings.passwordMinLower) lower-case letters" }
        let digits = password.filter { $0.isASCII && $0.isNumber }.count
        if digits < settings.passwordMinDigit { return "must have at least \(settings.passwordMinDigit) digits" }
        let specials = password.unicodeScalars.filter { special.contains($0) }.count
        if specials < settings.passwordMinSpecial {
            return "must have at least \(settings.passwordMinSpecial) special characters"
        }
        return nil
    }
}
