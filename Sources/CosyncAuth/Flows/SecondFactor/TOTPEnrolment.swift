import Foundation
import PostgresNIO

// `POST setTwoFactorGoogleVerification`: TOTP on or off.

/// The reply of `setTwoFactorGoogleVerification(true)`.
public struct AuthenticatorSetup: Sendable, Equatable {
    public let googleSecretKey: String
    /// The otpauth URI as a QR code PNG (the edge answers it as a data URI).
    public let qrPNG: [UInt8]
}

extension EndUserFlows {
    /// `POST setTwoFactorGoogleVerification` (<doc:EndUserAPI> §5.19, §6.6): enabling makes a new secret every time,
    /// sealed at rest, answers it with a QR PNG of the otpauth URI, and e-mails both (template
    /// `qrCode`, PNG attached). Disabling keeps the secret, as legacy did.
    public func setTwoFactorGoogleVerification(caller: AuthenticatedCaller, fields: Fields) async throws -> AuthenticatorSetup? {
        let (app, user) = (caller.app, caller.user)
        try requireActive(app)
        guard app.settings.twoFactorVerification == .google else { throw EndUserError.googleTwoFactorDisabled }
        guard Self.wantsOn(fields) else {
            try await client.transaction(logger: logger) { db in
                try await lockCaller(db, app: app, userId: user.id)
                try await UserStore.setTwoFactor(db, userId: user.id, google: false, logger: logger)
                try await audit(db, app: app, handle: user.handle, action: "setTwoFactorGoogleVerification", detail: ["enabled": .bool(false)])
                try await Events.record(db, app: app, type: .userSecondFactorDisabled, user: user, data: ["factor": .string("google")], logger: logger)
            }
            return nil
        }
        let secret = TOTP.newSecret()
        let displayKey = TOTP.displayKey(secret)
        let issuer = app.settings.googleAppName.isEmpty ? app.name : app.settings.googleAppName
        let uri = TOTP.provisioningURI(issuer: issuer, account: user.handle, secret: secret)
        let png = try QRCode.png(for: uri, scale: 6)
        let sealed = try box.seal(TOTP.base32(secret), purpose: .totp(userId: user.id))
        try await client.transaction(logger: logger) { db in
            try await lockCaller(db, app: app, userId: user.id)
            try await UserStore.setTOTP(db, userId: user.id, sealed: sealed, logger: logger)
            if user.handle.contains("@") {
                try await outbox.email(
                    db, app: app, template: "qrCode", locale: user.locale, to: user.handle,
                    values: ["CODE": displayKey, "HANDLE": user.handle], attachment: (name: "QRCode.png", data: png), logger: logger)
            }
            try await audit(db, app: app, handle: user.handle, action: "setTwoFactorGoogleVerification", detail: ["enabled": .bool(true)])
            try await Events.record(db, app: app, type: .userSecondFactorEnabled, user: user, data: ["factor": .string("google")], logger: logger)
        }
        return AuthenticatorSetup(googleSecretKey: displayKey, qrPNG: png)
    }
}
