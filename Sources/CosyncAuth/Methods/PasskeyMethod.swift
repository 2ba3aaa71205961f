import Foundation
import Logging
import PostgresNIO

/// The passkey sign-in method: judges a WebAuthn assertion by one of a user's registered passkeys,
/// for the AppKey login and verify ceremonies, and for the coming OAuth login page and Portal.
///
/// It knows nothing of a wire: the caller has consumed the challenge, parsed the assertion and holds
/// the user row in its transaction; it answers a verdict, and the caller maps it to its own errors and
/// opens the session (`SessionGrant`) in the same transaction.
public struct PasskeyMethod: Sendable {
    let logger: Logger

    public init(logger: Logger) { self.logger = logger }

    /// What an assertion came to.
    public enum Verdict: Sendable {
        /// The signature verifies: the passkey's use is recorded (counter, backup state, user
        /// verification). `cloneFlagged`: its counter went back and the app's policy is to flag, not refuse.
        case verified(Passkey, proof: AuthProof, cloneFlagged: Bool)
        /// No passkey of this user has the credential id.
        case unknownCredential
        /// The assertion's user handle names another user.
        case otherUser
        /// The signature or the client data do not verify (the verifier's message).
        case failed(String)
        /// The counter went back and the app refuses such passkeys.
        case counterRegressed
    }

    /// Judges `assertion` (its credential id already read: `credentialId`) against `user`'s passkey,
    /// which it locks, with the challenge the ceremony issued. Runs inside the caller's transaction.
    func verify(
        _ db: PostgresConnection, app: App, user: User, assertion: AssertionResponse, credentialId: [UInt8], challenge: [UInt8],
        rp: WebAuthnRelyingParty
    ) async throws -> Verdict {
        guard let passkey = try await PasskeyStore.find(db, appRef: app.ref, userId: user.id, credentialId: credentialId, forUpdate: true, logger: logger)
        else { return .unknownCredential }
        // Only a credential of this app and user is judged by its user handle: an unknown one (e.g.
        // registered in another app of the same RP ID) is `unknownCredential` above.
        if let userHandle = assertion.userHandle, !userHandle.isEmpty {
            let given = Base64URL.decodeLenient(userHandle).map(Array.init) ?? []
            let wire = AppKeyIds.wire(user.id)
            guard given == Array(wire.utf8) || given == (Base64URL.decodeLenient(wire).map(Array.init) ?? []) else { return .otherUser }
        }
        let stored = StoredCredential(
            credentialId: passkey.credentialId, publicKeyCOSE: passkey.publicKeyCOSE, signCount: UInt32(clamping: passkey.signCount),
            backupEligible: passkey.backupEligible)
        let verified: VerifiedAssertion
        do throws(WebAuthnError) {
            verified = try WebAuthn.verifyAssertion(assertion, expectedChallenge: challenge, rp: rp, credential: stored)
        } catch {
            return .failed(error.message)
        }
        if verified.counterRegressed, app.settings.counterRegression != .flag { return .counterRegressed }
        try await PasskeyStore.recordUse(
            db, id: passkey.id, signCount: Int64(verified.signCount), backupState: verified.backupState, userVerified: verified.userVerified,
            cloneSuspected: verified.counterRegressed, logger: logger)
        try await IdentityStore.touchPasskey(db, passkeyId: passkey.id, logger: logger)
        return .verified(passkey, proof: .presented(.passkey), cloneFlagged: verified.counterRegressed)
    }
}
