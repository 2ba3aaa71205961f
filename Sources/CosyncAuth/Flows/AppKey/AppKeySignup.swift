import Foundation
import PostgresNIO

extension AppKeyFlows {
    /// A signup handle (<doc:AppKeyAPI> §1.4): e-mail or phone per the app's `handleType`, else E617.
    func signupHandle(_ raw: String, app: App) throws(AppKeyError) -> AppKeyHandle {
        guard let handle = AppKeyHandle.parse(raw, userNames: false) else { throw .invalidHandleFormat }
        switch (handle, app.settings.handleType) {
        case (.email, .email), (.email, .both), (.phone, .phone), (.phone, .both): return handle
        default: throw .invalidHandleFormat
        }
    }

    /// The names of a signup: `displayName`, or both `firstName` and `lastName` (→ display name).
    static func names(_ fields: AppKeyFields, required: Bool) throws(AppKeyError) -> (display: String, first: String?, last: String?)? {
        let first = fields["firstName"], last = fields["lastName"]
        let display = fields["displayName"] ?? ((first != nil && last != nil) ? "\(first ?? "") \(last ?? "")" : nil)
        guard let display else {
            if required { throw AppKeyError.missingParameter.with("missing parameter: displayName") }
            return nil
        }
        // Counted in code points, as the columns' CHECKs count them (combining marks count each).
        guard display.unicodeScalars.count <= 128, (first ?? "").unicodeScalars.count <= 128, (last ?? "").unicodeScalars.count <= 128,
            !display.unicodeScalars.contains(where: { $0.value < 0x20 })
        else { throw AppKeyError.invalidData.with("a name is longer than 128 characters") }
        return (display, first, last)
    }

    /// K3 `POST signup`: creation options for a new account (no code yet).
    public func signup(app: App, fields: AppKeyFields) async throws -> PasskeyCreationOptions {
        let raw = try fields.require("handle")
        guard let names = try Self.names(fields, required: true) else { throw AppKeyError.missingParameter }
        let handle = try signupHandle(raw, app: app).text
        let locale = try locale(fields["locale"], app: app)
        guard app.settings.signupEnabled else { throw AppKeyError.signupNotSupported }
        let userId = UUID()
        let challenge = Self.newChallenge()
        let options = try creationOptions(app: app, challenge: challenge, userId: userId, handle: handle, displayName: names.display, exclude: [])
        try await client.transaction(logger: logger) { db in
            if let existing = try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) {
                throw Self.accountExists(existing)
            }
            try await takeChallengeQuota(db, app: app, handle: handle, newAccount: true)
            try await ChallengeStore.insert(
                db, appRef: app.ref, challenge: challenge, purpose: .signup, handle: handle, userId: userId, displayName: names.display,
                firstName: names.first, lastName: names.last, locale: locale, lifetimeSeconds: app.settings.challengeLifetimeSeconds,
                logger: logger)
        }
        return options
    }

    /// The registration part of a *Complete request: consumes the challenge named by the response's
    /// clientDataJSON (it must be of `purpose` and pass `matches`), then verifies the response.
    /// Any verification failure is E615; the challenge stays consumed.
    func register(
        app: App, fields: AppKeyFields, purpose: ChallengePurpose, matches: @Sendable (ChallengeStore.Row) -> Bool
    ) async throws -> (row: ChallengeStore.Row, passkey: NewPasskey) {
        let id = try fields.require("id")
        let response = try fields.response()
        guard let clientData = response["clientDataJSON"]?.stringValue, let attestation = response["attestationObject"]?.stringValue else {
            throw AppKeyError.missingParameter.with("missing parameter: response.clientDataJSON / response.attestationObject")
        }
        let rp = try relyingParty(app)
        let (value, bytes) = try Self.challenge(ofClientData: clientData)
        guard let row = try await client.withConnection({ try await ChallengeStore.consume($0, appRef: app.ref, challenge: value, logger: logger) }),
            row.purpose == purpose, matches(row)
        else { throw AppKeyError.invalidData.with("unknown or expired challenge") }
        let transports = response["transports"]?.arrayValue?.compactMap(\.stringValue)
        let registration = RegistrationResponse(
            id: id, rawId: fields["rawId"], type: fields["type"], clientDataJSON: clientData, attestationObject: attestation,
            transports: transports)
        let verified: VerifiedRegistration
        do throws(WebAuthnError) {
            verified = try WebAuthn.verifyRegistration(registration, expectedChallenge: bytes, rp: rp)
        } catch {
            await audit(app: app, handle: row.handle, action: "\(purpose.rawValue).verify", status: "error", detail: ["reason": .string(error.message)])
            throw AppKeyError.invalidPasskey.with("invalid passkey: \(error.message)")
        }
        let passkey = NewPasskey(
            credentialId: verified.credentialId, publicKeyCOSE: verified.publicKeyCOSE, algorithm: verified.algorithm,
            signCount: Int64(verified.signCount), aaguid: verified.aaguid, format: verified.format,
            attestationVerified: verified.attestationVerified,
            transports: Self.transports(verified.transports),
            backupEligible: verified.backupEligible, backupState: verified.backupState, uvInitialized: verified.userVerified,
            platform: Self.platform(attachment: fields["authenticatorAttachment"]))
        if try await client.withConnection({ try await PasskeyStore.exists($0, appRef: app.ref, credentialId: passkey.credentialId, logger: logger) }) {
            throw AppKeyError.invalidPasskey.with("invalid passkey: this credential is already registered")
        }
        return (row, passkey)
    }

    /// K4 `POST signupConfirm`: verifies the new passkey, keeps the signup pending and sends its code.
    public func signupConfirm(app: App, fields: AppKeyFields) async throws -> AppKeyPendingSignup {
        let raw = try fields.require("handle")
        _ = try fields.require("id")
        _ = try fields.response()
        guard let handle = AppKeyHandle.parse(raw, userNames: false)?.text else { throw AppKeyError.invalidData.with("handle does not match") }
        let (row, passkey) = try await register(app: app, fields: fields, purpose: .signup) { $0.handle == handle }
        guard let userId = row.userId else { throw AppKeyError.invalidData }
        let code = Secrets.numericCode()
        let token = Base64URL.encode(Secrets.randomBytes(32))
        let signupId = UUID()
        let locale = row.locale ?? Locales.defaultLocale
        try await client.transaction(logger: logger) { db in
            if let existing = try await UserStore.user(db, appRef: app.ref, handle: handle, logger: logger) {
                throw Self.accountExists(existing)
            }
            // Per (handle, client address), then the handle over all addresses: an address's first code
            // of the hour against a high cap of its own, its further ones against the lower ceiling. So
            // strangers who spend the ceiling from a few addresses never keep the owner's address from
            // its code, and the mailbox still gets a bounded number.
            let address = ClientOrigin.current.address ?? "-"
            guard let slot = try await ThrottleStore.takeCounting(
                db, appRef: app.ref, subject: "appkey-code:\(handle.lowercased()) \(address)", limit: settings.codesPerHandlePerHour,
                windowSeconds: 3600, logger: logger)
            else { throw AppKeyError.rateLimited }
            let (subject, limit) = slot == 1
                ? ("appkey-code-first:\(handle.lowercased())", settings.firstCodesPerHandlePerHour)
                : ("appkey-code:\(handle.lowercased())", settings.codesPerHandlePerHour * settings.handleCeilingFactor)
            guard try await ThrottleStore.take(db, appRef: app.ref, subject: subject, limit: limit, windowSeconds: 3600, logger: logger)
            else { throw AppKeyError.rateLimited }
            try await PasskeyStore.insertSignup(
                db, appRef: app.ref, handle: handle, userId: userId, displayName: row.displayName ?? handle, firstName: row.firstName,
                lastName: row.lastName, locale: locale, passkey: passkey,
                codeSealed: try codes.seal(code, purpose: .appKeySignupCode(signupId)), tokenHash: Secrets.sha256(token),
                lifetimeSeconds: app.settings.signupCodeLifetimeSeconds, id: signupId, logger: logger)
            if handle.hasPrefix("+") {
                try await outbox.sms(
                    db, app: app, locale: locale, to: handle, values: ["CODE": code, "HANDLE": handle],
                    perNumberPerHour: smsPerNumberPerHour, logger: logger)
            } else {
                try await outbox.email(
                    db, app: app, template: "signUp", locale: locale, to: handle, values: ["HANDLE": handle, "CODE": code], logger: logger)
            }
            try await audit(db, app: app, handle: handle, action: "signupConfirm")
            try await Events.record(db, app: app, type: .signupPending, userId: nil, data: ["handle": .string(handle), "product": .string("appKey")], logger: logger)
        }
        return AppKeyPendingSignup(handle: handle, signupToken: token)
    }

    /// K5 `POST signupComplete`: the code of the pending signup → the account, its passkey, a session.
    /// `token` is the request's signup-token, resolved (`AppKeyResolver.signup`).
    public func signupComplete(token: AppKeySignupToken, fields: AppKeyFields) async throws -> AppKeyUserResult {
        let app = token.app
        let code = try fields.require("code")
        guard let (_, signup) = try await client.withConnection({ try await PasskeyStore.signup($0, tokenHash: token.tokenHash, logger: logger) })
        else { throw AppKeyError.invalidToken }
        if signup.expired {
            _ = try await client.withConnection { try await PasskeyStore.takeSignup($0, id: signup.id, logger: logger) }
            throw AppKeyError.signupExpired
        }
        // One attempt is reserved before the code is compared: concurrent guesses cannot exceed the limit.
        let maxAttempts = settings.maxCodeAttempts
        guard let attempts = try await client.withConnection({
            try await PasskeyStore.reserveAttempt($0, id: signup.id, maxAttempts: maxAttempts, logger: logger)
        }) else { throw AppKeyError.invalidToken }
        let wellFormed = code.count == 6 && code.allSatisfy { $0.isASCII && $0.isNumber }
        guard wellFormed, codes.matches(code, sealed: signup.codeSealed, purpose: .appKeySignupCode(signup.id)) else {
            if attempts >= maxAttempts {
                _ = try await client.withConnection { try await PasskeyStore.takeSignup($0, id: signup.id, logger: logger) }
            }
            await audit(app: app, handle: signup.handle, action: "signupComplete", status: "error", detail: ["reason": .string("wrong code")])
            throw AppKeyError.invalidData.with("invalid code")
        }
        let (user, accessToken) = try await client.transaction(logger: logger) { db -> (User, String) in
            // Every pending signup of the handle goes in the first statement: the account exists from
            // now on, and two completions of one handle lock those rows in the same order (one waits,
            // never a deadlock). Only the one that took its own signup goes on.
            let taken = try await PasskeyStore.takeSignups(db, appRef: app.ref, handle: signup.handle, logger: logger)
            guard taken.contains(signup.id) else {
                if let existing = try await UserStore.user(db, appRef: app.ref, handle: signup.handle, logger: logger) {
                    throw Self.accountExists(existing)
                }
                throw AppKeyError.invalidToken
            }
            if let existing = try await UserStore.user(db, appRef: app.ref, handle: signup.handle, logger: logger) {
                throw Self.accountExists(existing)
            }
            let user = try await insertUser(
                db, app: app, id: signup.userId, handle: signup.handle, locale: signup.locale, provider: "",
                profile: AppKeyProfile(
                    displayName: signup.displayName, firstName: signup.firstName, lastName: signup.lastName, isAnonymous: false,
                    requireAddPasskey: false))
            let passkeyIdentity = try await insertPasskey(db, app: app, user: user, passkey: signup.passkey, displayName: signup.displayName)
            let access = try await openSession(db, app: app, user: user, method: .passkey, identityId: passkeyIdentity)
            try await audit(db, app: app, handle: user.handle, action: "signupComplete")
            return (user, access)
        }
        return try await userResult(app: app, user: user, accessToken: accessToken)
    }

    /// Inserts an AppKey user (handle clash → 601/611/612) and records `user.created`.
    func insertUser(
        _ db: PostgresConnection, app: App, id: UUID, handle: String, locale: String, provider: String, profile: AppKeyProfile
    ) async throws -> User {
        do {
            let user = try await UserStore.insertAppKeyUser(
                db, appRef: app.ref, id: id, handle: handle, locale: locale, loginProvider: provider, logger: logger)
            if profile.isAnonymous {
                try await IdentityStore.insert(db, appRef: app.ref, userId: id, kind: .anonymous, subject: handle, logger: logger)
            }
            try await PasskeyStore.insertProfile(db, appRef: app.ref, userId: id, profile: profile, logger: logger)
            try await Events.record(db, app: app, type: .userCreated, user: user, data: ["product": .string("appKey")], logger: logger)
            return user
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw AppKeyError.handleAlreadyRegistered
        }
    }

    /// The transports stored with a passkey (and echoed in `allowCredentials`): only the values
    /// WebAuthn defines, each once; none known → `internal`, `hybrid`. Anything else was stored as sent.
    static func transports(_ given: [String]) -> [String] {
        let known = ["usb", "nfc", "ble", "smart-card", "hybrid", "internal"]
        var kept: [String] = []
        for transport in given where known.contains(transport) && !kept.contains(transport) { kept.append(transport) }
        return kept.isEmpty ? ["internal", "hybrid"] : kept
    }

    /// Inserts a verified passkey for a user (its name: `<displayName>-<platform>`) and records
    /// `passkey.added`; returns the passkey's identity. A credential registered meanwhile → E615.
    @discardableResult
    func insertPasskey(_ db: PostgresConnection, app: App, user: User, passkey: NewPasskey, displayName: String) async throws -> UUID {
        // At most 64 code points (the column counts code points; a character may carry many).
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: "\(displayName)-\(passkey.platform)".unicodeScalars.prefix(64))
        let name = String(scalars)
        let identityId: UUID
        do {
            identityId = try await PasskeyStore.insert(db, appRef: app.ref, userId: user.id, passkey: passkey, name: name, logger: logger)
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw AppKeyError.invalidPasskey.with("invalid passkey: this credential is already registered")
        }
        try await Events.record(
            db, app: app, type: .passkeyAdded, user: user, data: ["credentialId": .string(Base64URL.encode(passkey.credentialId))],
            logger: logger)
        return identityId
    }
}
