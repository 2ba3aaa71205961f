import Foundation

/// How and when a caller proved who it is.
///
/// A caller holds up to two kinds of proof. Its session's last proof (`sessions.proven_by`,
/// `proven_at`) is the sign-in that opened it, or a later re-proof on the same session. A factor
/// presented with this very request (the current password, a provider token) is a proof too, and the
/// flow that checked it makes one.
public struct AuthProof: Sendable, Equatable {
    public enum Method: Sendable, Equatable {
        /// A sign-in of this kind: a password, a second factor, a passkey assertion, a provider token…
        case signIn(SessionMethod)
        /// A live passkey-reset token (<doc:AppKeyAPI> §5.4). It only lets its holder add a passkey.
        case passkeyReset
    }

    /// Where the proof comes from.
    public enum Source: Sendable, Equatable {
        /// The session's last proof.
        case session
        /// A factor presented with this request and checked by the flow.
        case request
    }

    public let method: Method
    public let at: Date
    public let source: Source

    public init(method: Method, at: Date, source: Source) {
        self.method = method
        self.at = at
        self.source = source
    }

    /// A sign-in factor the flow checked in this request, proven now (or at `at`: a provider token's `iat`).
    public static func presented(_ method: SessionMethod, at: Date = Date()) -> AuthProof {
        AuthProof(method: .signIn(method), at: at, source: .request)
    }
}

/// The changes that need a recent proof of the caller (step-up).
public enum SensitiveChange: String, Sendable, CaseIterable {
    case changePassword, deleteAccount, detachIdentity, addPasskey, removePasskey
}

/// The one step-up rule: whether the caller's proofs allow a sensitive change.
///
/// A proof counts when it is recent (no older than the app's `freshAuthMinutes`) and its method is one
/// the change accepts (`accepts`). Every sensitive change of every product calls `allows` (or
/// `require`); no flow judges freshness on its own.
public enum StepUp {
    /// The methods each change accepts, and from where.
    public static func accepts(_ proof: AuthProof, for change: SensitiveChange) -> Bool {
        switch (change, proof.method, proof.source) {
        // Changing a password needs the current one, typed with the request. A session opened by a
        // password does not do: whoever holds its token would not need to know the password.
        case (.changePassword, .signIn(.password), .request): true
        // A recent passkey assertion is as strong as the current password.
        case (.changePassword, .signIn(.passkey), _): true
        case (.changePassword, _, _): false
        // A passkey-reset token may add a passkey, and nothing else.
        case (.addPasskey, .passkeyReset, _): true
        case (_, .passkeyReset, _): false
        // Deleting the account, detaching an identity, adding or removing a passkey: any recent sign-in.
        case (.deleteAccount, .signIn, _), (.detachIdentity, .signIn, _), (.addPasskey, .signIn, _), (.removePasskey, .signIn, _): true
        }
    }

    /// Whether one of `proofs` allows `change` in `app` at `now`.
    public static func allows(_ change: SensitiveChange, proofs: [AuthProof], app: App, now: Date = Date()) -> Bool {
        allows(change, proofs: proofs, freshAuthMinutes: app.settings.freshAuthMinutes, now: now)
    }

    /// Whether one of `proofs` allows `change` when a proof counts for `freshAuthMinutes`.
    public static func allows(_ change: SensitiveChange, proofs: [AuthProof], freshAuthMinutes: Int, now: Date = Date()) -> Bool {
        proofs.contains { accepts($0, for: change) && now.timeIntervalSince($0.at) <= window(for: change, $0, freshAuthMinutes: freshAuthMinutes) }
    }

    /// The longest a session's proof stands in for the current password: a stolen access token must
    /// not change the password for as long as an app's `freshAuthMinutes` (up to a day) allows.
    public static let passwordChangeSessionMinutes = 5

    /// How long `proof` counts for `change`, in seconds.
    static func window(for change: SensitiveChange, _ proof: AuthProof, freshAuthMinutes: Int) -> TimeInterval {
        let minutes = change == .changePassword && proof.source == .session
            ? min(freshAuthMinutes, passwordChangeSessionMinutes) : freshAuthMinutes
        return TimeInterval(minutes) * 60
    }

    /// `allows`, or `error`.
    public static func require<E: Error>(_ change: SensitiveChange, proofs: [AuthProof], app: App, else error: E) throws(E) {
        guard allows(change, proofs: proofs, app: app) else { throw error }
    }
}
