/// The second factor a login challenge asks for (`login_challenges.factor`), chosen by the app's
/// `twoFactorVerification` mode and what the user enabled. The column's CHECK admits exactly these
/// cases; the raw values are what it stores and what the audit log shows.
public enum SecondFactor: String, Sendable, CaseIterable {
    /// A code sent by SMS to the user's verified phone (sealed in the challenge).
    case phone
    /// A TOTP code from an authenticator app (Google Authenticator and the like).
    case google
}
