/// The ceremony a WebAuthn challenge was issued for (`webauthn_challenges.purpose`). A challenge
/// completes only the ceremony that began it: a login's challenge cannot register a passkey.
/// The column's CHECK admits exactly these cases; the raw values are what it stores.
public enum ChallengePurpose: String, Sendable, CaseIterable {
    /// K3 `signup` → K4 `signupConfirm`: the first passkey of a new account.
    case signup
    /// K8 `loginAnonymous` → K9 `loginAnonymousComplete`: the passkey of a new anonymous account.
    case anonymous
    /// K20 `addPasskey` → K21 `addPasskeyComplete`: one more passkey for a signed-in user.
    case addPasskey
    /// K6 `login` → K7 `loginComplete`.
    case login
    /// K10 `verify` → K11 `verifyComplete`.
    case verify
}
