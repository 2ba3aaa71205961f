import Foundation
import Logging
import PostgresNIO

// `POST setTwoFactorGoogleVerification`: TOTP on or off.

/// The reply of `setTwoFactorGoogleVerification(true)`.
public struct AuthenticatorSetup: Sendable, Equatable {
    public let googleSecretKey: String
    /// The otpauth URI as a QR code PNG (the edge answers it as a data URI).
    public let qrPNG: [UInt8]
}

/// `POST setTwoFactorGoogleVerification` (<doc:EndUserAPI> §5.19, §6.6): enabling makes a new secret every time,
/// sealed at rest, answers it with a QR PNG of the otpauth URI, and e-mails both (template
/// `qrCode`, PNG attached). Disabling keeps the secret, as legacy did.
struct TOTPEnrolment: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let accounts: Accounts
    let outbox: Outbox
    let audit: UserAudit
    let logger: Logger

    func run(caller: AuthenticatedCaller, fields: Fields) async throws -> AuthenticatorSetup? {
        let (app, user) = (caller.app, caller.user)
        try Gates.requireActive(app)
        guard app.settings.twoFactorVerification == .google else { throw EndUserError.googleTwoFactorDisabled }
        guard TwoFactorSwitch.wantsOn(fields) else {
            try await client.transaction(logger: logger) { db in
                try await accounts.lockCaller(db, app: app, userId: user.id)
                try await UserStore.setTwoFactor(db, userId: user.id, google: false, logger: logger)
                try await audit.record(db, app: app, handle: user.handle, action: "setTwoFactorGoogleVerification", detail: ["enabled": .bool(false)])
                try await Events.record(db, app: app, type: .userSecondFactorDisabled, user: user, data: ["factor": .string("google")], logger: logger)
            }
            return nil
        }
        let secret = TOTP.newSecret()
        let displayKey = TOTP.displayKey(secret)
        let issuer = app.settings.googleAppName.isEmpty ? app.name : app.settings.googleAppName
        let uri = AuthenticatorLabel.provisioningURI(issuer: issuer, account: user.handle, secret: secret)
        let png = try QRCode.png(for: uri, scale: 6)
        let sealed = try box.seal(TOTP.base32(secret), purpose: .totp(userId: user.id))
        try await client.transaction(logger: logger) { db in
            try await accounts.lockCaller(db, app: app, userId: user.id)
            try await UserStore.setTOTP(db, userId: user.id, sealed: sealed, logger: logger)
            if Identifiers.hasAt(user.handle) {
                try await outbox.email(
                    db, app: app, template: "qrCode", locale: user.locale, to: user.handle,
                    values: ["CODE": displayKey, "HANDLE": user.handle], attachment: (name: "QRCode.png", data: png), logger: logger)
            }
            try await audit.record(db, app: app, handle: user.handle, action: "setTwoFactorGoogleVerification", detail: ["enabled": .bool(true)])
            try await Events.record(db, app: app, type: .userSecondFactorEnabled, user: user, data: ["factor": .string("google")], logger: logger)
        }
        return AuthenticatorSetup(googleSecretKey: displayKey, qrPNG: png)
    }
}

extension EndUserFlows {
    public func setTwoFactorGoogleVerification(caller: AuthenticatedCaller, fields: Fields) async throws -> AuthenticatorSetup? {
        try await TOTPEnrolment(client: client, box: box, accounts: accounts, outbox: outbox, audit: userAudit, logger: logger)
            .run(caller: caller, fields: fields)
    }
}

/// The label an authenticator app shows for the account (`<issuer>:<account>` in the otpauth URI), cut
/// short so that the URI always fits a QR code. A handle may be 254 code points (1016 UTF-8 bytes,
/// three times that once percent-encoded) and an app name 100 (twice in the URI): whole, they made a
/// URI longer than any QR code holds, and enrolment failed. Short values are kept whole, so the usual
/// URI is unchanged; a long one keeps its beginning and ends with `…`. Only the label is cut: the
/// secret, the algorithm and the period are always whole.
public enum AuthenticatorLabel {
    /// The most bytes the account takes in the URI, percent-encoded.
    public static let accountLimit = 320
    /// The most bytes the issuer takes in the URI, percent-encoded (it appears twice).
    public static let issuerLimit = 160
    /// The longest URI these limits allow (a 20-byte secret): well inside `QRCode.maxByteCount`, and
    /// a code small enough (version 22 at most) for a phone camera.
    public static var longestURI: Int {
        TOTP.provisioningURI(issuer: "", account: "", secret: Array(repeating: 0, count: 20)).utf8.count + accountLimit + 2 * issuerLimit
    }

    /// `TOTP.provisioningURI` with the issuer and the account cut to their limits.
    public static func provisioningURI(issuer: String, account: String, secret: [UInt8]) -> String {
        TOTP.provisioningURI(issuer: fitted(issuer, limit: issuerLimit), account: fitted(account, limit: accountLimit), secret: secret)
    }

    /// `text` whole if its percent-encoded form takes at most `limit` bytes; otherwise its longest
    /// beginning that fits with `…` after it. It is cut between characters, or, when the first
    /// character alone is too long (a letter carrying many combining marks), between code points.
    public static func fitted(_ text: String, limit: Int) -> String {
        func cost<S: StringProtocol>(_ part: S) -> Int { TOTP.uriComponent(String(part)).utf8.count }
        if cost(text) <= limit { return text }
        let ellipsis = "…"
        let budget = limit - cost(ellipsis)
        var kept = "", used = 0
        for character in text {
            let next = cost(String(character))
            if used + next > budget { break }
            kept.append(character)
            used += next
        }
        if kept.isEmpty {
            var scalars = String.UnicodeScalarView()
            for scalar in text.unicodeScalars {
                let next = cost(String(scalar))
                if used + next > budget { break }
                scalars.append(scalar)
                used += next
            }
            kept = String(scalars)
        }
        return kept + ellipsis
    }
}
