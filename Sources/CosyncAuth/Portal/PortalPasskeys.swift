import Foundation
import Logging
import PostgresNIO

/// The Portal's relying party for passkeys: its RP ID and the one origin its pages run on
/// (`COSYNC_PORTAL_RP_ID`, `COSYNC_PORTAL_ORIGIN`; by default the public URL's host and origin).
public struct PortalRelyingParty: Sendable, Equatable {
    public let id: String
    public let origin: String

    public init(id: String, origin: String) {
        self.id = id
        self.origin = origin
    }

    /// The relying party of a configuration, or nil when the settings do not make one (an RP ID that
    /// does not cover the origin's host: the configuration check refuses that at start).
    public static func of(_ configuration: ServerConfiguration) -> PortalRelyingParty? {
        guard let origin = configuration.portalOrigin ?? BrowserPasskey.origin(of: configuration.publicURL),
            let host = URLComponents(string: origin)?.host?.lowercased(), !host.isEmpty
        else { return nil }
        let id = configuration.portalRPID ?? host
        guard host == id || host.hasSuffix("." + id) else { return nil }
        return PortalRelyingParty(id: id, origin: origin)
    }
}

extension ServerConfiguration {
    /// `COSYNC_PORTAL_RP_ID`: a lower-case host name (no scheme, port or path), e.g. `example.com`.
    public static func parsePortalRPID(_ text: String) throws -> String {
        let id = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard (1...253).contains(id.utf8.count), !id.hasPrefix("."), !id.hasSuffix("."), !id.contains(".."),
            id.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "." })
        else { throw ConfigurationError("COSYNC_PORTAL_RP_ID", "must be a host name such as example.com (no scheme, port or path)") }
        return id
    }

    /// `COSYNC_PORTAL_ORIGIN`: `https://host[:port]` (or `http://` on a loopback host), without a path.
    public static func parsePortalOrigin(_ text: String) throws -> String {
        var value = text.trimmingCharacters(in: .whitespaces)
        while value.hasSuffix("/") { value.removeLast() }
        guard let components = URLComponents(string: value), components.path.isEmpty, components.query == nil,
            let origin = BrowserPasskey.origin(of: value), origin == value.lowercased()
        else { throw ConfigurationError("COSYNC_PORTAL_ORIGIN", "must be an origin such as https://auth.example.com (no path)") }
        return origin
    }

    /// The RP ID must be the origin's host or a parent domain of it.
    public func checkPortalRelyingParty() throws {
        guard portalRPID != nil || portalOrigin != nil else { return }
        guard PortalRelyingParty.of(self) != nil else {
            throw ConfigurationError(
                "COSYNC_PORTAL_RP_ID", "must be the host of COSYNC_PORTAL_ORIGIN (or of COSYNC_PUBLIC_URL) or a parent domain of it")
        }
    }
}

/// One passkey of a Portal account, as the account page lists it.
public struct PortalPasskey: Sendable, Equatable {
    public let id: UUID
    public let name: String
    public let createdAt: Date
    public let lastUsedAt: Date?
}

/// Why a passkey ceremony of the Portal was refused (besides `PortalError`s: `locked`, `notFound`).
public enum PortalPasskeyError: Error, Equatable, Sendable {
    /// The Portal has no relying party (see `PortalRelyingParty.of`).
    case unavailable
    /// The challenge is unknown, used, expired or from another browser: start again.
    case expired
    /// The response did not verify, or names no passkey of a live account.
    case refused
    /// The authenticator holds a passkey registered already.
    case exists
    /// The passkey is the account's last way to sign in.
    case lastFactor
}

/// Passkeys of Portal accounts (issue 23): enrolment after an invitation, more passkeys on the account
/// page, sign-in (discoverable: no e-mail needed) and fresh sign-in. Responses are checked by the
/// server's WebAuthn verifier (`WebAuthn.verifyRegistration`, `verifyAssertion`) against the Portal's
/// relying party; challenges are single use (`PortalPasskeyStore.takeChallenge`) and bound to the
/// browser, ticket or session that asked.
///
/// Limits: before an assertion is verified, one attempt is reserved in `portal_throttle` for the
/// client address; the account is charged only for failures after a verified signature (see
/// `checkAssertion`). Sign-in options take a slot of the address too. A sign-in by passkey is a full
/// sign-in (`provenBy` "passkey").
public final class PortalPasskeys: Sendable {
    let accounts: PortalAccounts
    public let relyingParty: PortalRelyingParty?

    public static let challengeSeconds = 5 * 60
    static let timeoutMilliseconds = 120_000
    static let provenBy = "passkey"
    static let maxNameLength = 100

    public init(accounts: PortalAccounts, relyingParty: PortalRelyingParty?) {
        self.accounts = accounts
        self.relyingParty = relyingParty
    }

    var client: PostgresClient { accounts.client }
    var logger: Logger { accounts.logger }

    func rp() throws(PortalPasskeyError) -> WebAuthnRelyingParty {
        guard let relyingParty else { throw .unavailable }
        return WebAuthnRelyingParty(id: relyingParty.id, allowedOrigins: [relyingParty.origin], userVerification: .preferred)
    }

    static func binding(_ kind: String, _ value: String) -> Data { Secrets.sha256("portal-passkey:\(kind):\(value)") }

    static func userHandle(_ accountId: UUID) -> [UInt8] {
        withUnsafeBytes(of: accountId.uuid) { Array($0) }
    }

    static func descriptor(_ row: PortalPasskeyStore.PasskeyRow) -> JSONValue {
        .object(["type": .string("public-key"), "id": .string(Base64URL.encode(row.credentialId))])
    }

    static func newChallenge() -> String { Base64URL.encode(Secrets.randomBytes(32)) }

    // MARK: options

    /// PublicKeyCredentialCreationOptionsJSON for `account`, excluding its passkeys.
    func creationOptions(challenge: String, account: PortalStore.AccountRow, existing: [PortalPasskeyStore.PasskeyRow], rp: WebAuthnRelyingParty)
        -> JSONValue
    {
        .object([
            "challenge": .string(challenge), "rp": .object(["id": .string(rp.id), "name": .string("Cosync Portal")]),
            "user": .object([
                "id": .string(Base64URL.encode(Self.userHandle(account.id))), "name": .string(account.email),
                "displayName": .string(account.email),
            ]),
            "pubKeyCredParams": .array(WebAuthn.supportedAlgorithms.map { .object(["type": .string("public-key"), "alg": .int($0)]) }),
            "timeout": .int(Self.timeoutMilliseconds), "attestation": .string("none"),
            "excludeCredentials": .array(existing.map(Self.descriptor)),
            "authenticatorSelection": .object([
                "residentKey": .string("required"), "requireResidentKey": .bool(true), "userVerification": .string("preferred"),
            ]),
        ])
    }

    /// PublicKeyCredentialRequestOptionsJSON.
    func requestOptions(challenge: String, allow: [PortalPasskeyStore.PasskeyRow], rp: WebAuthnRelyingParty) -> JSONValue {
        .object([
            "challenge": .string(challenge), "rpId": .string(rp.id), "timeout": .int(Self.timeoutMilliseconds),
            "userVerification": .string("preferred"), "allowCredentials": .array(allow.map(Self.descriptor)),
        ])
    }

    // MARK: reading the browser's credential

    /// The challenge a response's clientDataJSON carries (the verifier compares it again).
    static func challenge(of credential: [String: JSONValue]) throws(PortalPasskeyError) -> (text: String, bytes: [UInt8]) {
        guard case .object(let response)? = credential["response"], let text = response["clientDataJSON"]?.stringValue,
            text.utf8.count <= 16_384, let raw = Base64URL.decodeLenient(text),
            let object = (try? JSONDecoder().decode(JSONValue.self, from: raw))?.objectValue,
            let challenge = object["challenge"]?.stringValue, challenge.utf8.count <= 200,
            let bytes = Base64URL.decodeLenient(challenge), bytes.count == 32
        else { throw .refused }
        return (Base64URL.encode(bytes), Array(bytes))
    }

    static func registration(_ credential: [String: JSONValue]) throws(PortalPasskeyError) -> RegistrationResponse {
        guard let id = credential["id"]?.stringValue, case .object(let response)? = credential["response"],
            let clientData = response["clientDataJSON"]?.stringValue, let attestation = response["attestationObject"]?.stringValue
        else { throw .refused }
        var transports: [String]?
        if case .array(let list)? = response["transports"] { transports = list.compactMap(\.stringValue) }
        return RegistrationResponse(
            id: id, rawId: credential["rawId"]?.stringValue, type: credential["type"]?.stringValue, clientDataJSON: clientData,
            attestationObject: attestation, transports: transports)
    }

    static func assertion(_ credential: [String: JSONValue]) throws(PortalPasskeyError) -> AssertionResponse {
        guard let id = credential["id"]?.stringValue, case .object(let response)? = credential["response"],
            let clientData = response["clientDataJSON"]?.stringValue, let authData = response["authenticatorData"]?.stringValue,
            let signature = response["signature"]?.stringValue
        else { throw .refused }
        return AssertionResponse(
            id: id, rawId: credential["rawId"]?.stringValue, type: credential["type"]?.stringValue, clientDataJSON: clientData,
            authenticatorData: authData, signature: signature, userHandle: response["userHandle"]?.stringValue)
    }

    static func cleanName(_ name: String?) -> String {
        let trimmed = (name ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            .unicodeScalars.filter { !CharacterSet.controlCharacters.contains($0) }
        let text = String(String.UnicodeScalarView(trimmed)).prefix(maxNameLength)
        return text.isEmpty ? "Passkey added " + ISO8601.milliseconds(Date()).prefix(10) : String(text)
    }

    // MARK: registration (enrolment after an invitation, and adding one)

    /// Options to enrol a passkey with an enrolment ticket (the invitation was accepted; no second
    /// factor confirmed yet). `expired` when the ticket is not live.
    public func enrolOptions(ticket: String) async throws -> JSONValue {
        let rp = try rp()
        guard let hash = PortalAccounts.secretHash(ticket) else { throw PortalPasskeyError.expired }
        let challenge = Self.newChallenge()
        return try await client.withConnection { db in
            guard let id = try await PortalStore.ticketAccount(db, secretHash: hash, kind: "enrol", logger: logger),
                let account = try await PortalStore.account(db, id: id, logger: logger), account.status == "active"
            else { throw PortalPasskeyError.expired }
            let existing = try await PortalPasskeyStore.passkeys(db, accountId: id, logger: logger)
            try await PortalPasskeyStore.insertChallenge(
                db, challenge: challenge, purpose: "enrol", binding: Self.binding("ticket", ticket), accountId: id,
                lifetimeSeconds: Self.challengeSeconds, logger: logger)
            return creationOptions(challenge: challenge, account: account, existing: existing, rp: rp)
        }
    }

    /// Enrols the passkey of an enrolment ticket and signs the account in (the ticket is used up).
    public func enrol(ticket: String, credential: [String: JSONValue], name: String? = nil) async throws -> PortalSignIn {
        let rp = try rp()
        let challenge = try Self.challenge(of: credential)
        let binding = Self.binding("ticket", ticket)
        guard let hash = PortalAccounts.secretHash(ticket) else { throw PortalPasskeyError.expired }
        let taken = try await client.withConnection { db in
            try await PortalPasskeyStore.takeChallenge(db, challenge: challenge.text, purpose: "enrol", binding: binding, logger: logger)
        }
        guard let taken, let accountId = taken else { throw PortalPasskeyError.expired }
        let verified = try await verifyRegistration(credential, challenge: challenge.bytes, rp: rp, accountId: accountId, action: "portal.enrol")
        let cookie = PortalAccounts.newSecret()
        let name = Self.cleanName(name)
        let (session, row) = try await client.transaction(logger: logger) { db -> (PortalStore.SessionRow, PortalStore.AccountRow) in
            guard let row = try await PortalStore.account(db, id: accountId, forUpdate: true, logger: logger), row.status == "active"
            else { throw PortalPasskeyError.expired }
            guard try await PortalStore.useTicket(db, secretHash: hash, logger: logger) else { throw PortalPasskeyError.expired }
            guard try await PortalPasskeyStore.insert(
                db, accountId: accountId, credentialId: verified.credentialId, publicKey: verified.publicKeyCOSE,
                signCount: Int64(verified.signCount), backupEligible: verified.backupEligible, name: name, logger: logger)
            else { throw PortalPasskeyError.exists }
            let session = try await PortalStore.insertSession(
                db, accountId: accountId, secretHash: Secrets.sha256(cookie), provenBy: Self.provenBy, logger: logger)
            try await accounts.audit(db, actor: "portal:\(row.email)", action: "portal.enrol", detail: ["method": .string("passkey")])
            return (session, row)
        }
        return PortalSignIn(session: PortalAccounts.session(session, account: PortalAccounts.account(row)), cookie: cookie)
    }

    /// Options to add a passkey to the signed-in account.
    public func addOptions(session: PortalSession) async throws -> JSONValue {
        let rp = try rp()
        let challenge = Self.newChallenge()
        return try await client.withConnection { db in
            guard let account = try await PortalStore.account(db, id: session.account.id, logger: logger) else { throw PortalError.notFound }
            let existing = try await PortalPasskeyStore.passkeys(db, accountId: account.id, logger: logger)
            guard existing.count < 20 else { throw PortalError.conflict("This account has 20 passkeys already: remove one first.") }
            try await PortalPasskeyStore.insertChallenge(
                db, challenge: challenge, purpose: "add", binding: Self.binding("session", session.id.uuidString), accountId: account.id,
                lifetimeSeconds: Self.challengeSeconds, logger: logger)
            return creationOptions(challenge: challenge, account: account, existing: existing, rp: rp)
        }
    }

    /// Adds the passkey of an `addOptions` ceremony to the signed-in account.
    @discardableResult
    public func add(session: PortalSession, credential: [String: JSONValue], name: String? = nil) async throws -> PortalPasskey {
        let rp = try rp()
        let challenge = try Self.challenge(of: credential)
        let taken = try await client.withConnection { db in
            try await PortalPasskeyStore.takeChallenge(
                db, challenge: challenge.text, purpose: "add", binding: Self.binding("session", session.id.uuidString), logger: logger)
        }
        guard let taken, taken == session.account.id else { throw PortalPasskeyError.expired }
        let verified = try await verifyRegistration(
            credential, challenge: challenge.bytes, rp: rp, accountId: session.account.id, action: "portal.passkey.add")
        let name = Self.cleanName(name)
        return try await client.transaction(logger: logger) { db -> PortalPasskey in
            guard try await PortalPasskeyStore.insert(
                db, accountId: session.account.id, credentialId: verified.credentialId, publicKey: verified.publicKeyCOSE,
                signCount: Int64(verified.signCount), backupEligible: verified.backupEligible, name: name, logger: logger)
            else { throw PortalPasskeyError.exists }
            try await accounts.audit(db, actor: session.auditActor, action: "portal.passkey.add", detail: ["name": .string(name)])
            let rows = try await PortalPasskeyStore.passkeys(db, accountId: session.account.id, logger: logger)
            guard let row = rows.first(where: { $0.credentialId == verified.credentialId }) else { throw StoreError.noRowReturned }
            return PortalPasskey(id: row.id, name: row.name, createdAt: row.createdAt, lastUsedAt: row.lastUsedAt)
        }
    }

    func verifyRegistration(
        _ credential: [String: JSONValue], challenge: [UInt8], rp: WebAuthnRelyingParty, accountId: UUID, action: String
    ) async throws -> VerifiedRegistration {
        do {
            return try WebAuthn.verifyRegistration(try Self.registration(credential), expectedChallenge: challenge, rp: rp)
        } catch {
            let email = try? await client.withConnection { db in try await PortalStore.account(db, id: accountId, logger: logger)?.email }
            let reason = (error as? WebAuthnError)?.message ?? "unreadable response"
            await accounts.auditAlone(
                actor: "portal:\(email.flatMap { $0 } ?? accountId.uuidString)", action: action,
                detail: ["method": .string("passkey"), "reason": .string(reason)])
            throw PortalPasskeyError.refused
        }
    }

    // MARK: the account's passkeys

    public func list(session: PortalSession) async throws -> [PortalPasskey] {
        try await client.withConnection { db in
            try await PortalPasskeyStore.passkeys(db, accountId: session.account.id, logger: logger).map {
                PortalPasskey(id: $0.id, name: $0.name, createdAt: $0.createdAt, lastUsedAt: $0.lastUsedAt)
            }
        }
    }

    /// Removes one of the signed-in account's passkeys; refused (`lastFactor`) when it is the account's
    /// last way to sign in (no confirmed TOTP and no other passkey). `notFound` for another's.
    public func remove(session: PortalSession, passkeyId: UUID) async throws {
        try await client.transaction(logger: logger) { db in
            switch try await PortalPasskeyStore.remove(db, id: passkeyId, accountId: session.account.id, logger: logger) {
            case .notFound: throw PortalError.notFound
            case .lastFactor: throw PortalPasskeyError.lastFactor
            case .removed(let name):
                try await accounts.audit(db, actor: session.auditActor, action: "portal.passkey.remove", detail: ["name": .string(name)])
            }
        }
    }

    // MARK: sign-in and fresh sign-in

    /// Options for a sign-in: always discoverable (an empty `allowCredentials`; the browser offers the
    /// passkeys it holds for the Portal). No e-mail is read, so the answer tells nothing about any
    /// account. The challenge is bound to the browser key.
    ///
    /// A browser has one sign-in challenge at a time (a new one replaces it), so rows pile up only
    /// with new browser keys: a call that adds a row (no live challenge of this browser replaced)
    /// reserves one of `optionsPerAddress` slots of the client address in `portal_throttle` (`locked`
    /// beyond them, 30 s doubling as for a password); a sign-in that succeeds gives a slot back, so
    /// only ceremonies left unfinished count. A browser asking again costs nothing.
    public func signInOptions(browserKey: String, address: String? = nil) async throws -> JSONValue {
        let rp = try rp()
        let challenge = Self.newChallenge()
        let limits = accounts.limits
        return try await client.transaction(logger: logger) { db in
            let replaced = try await PortalPasskeyStore.insertChallenge(
                db, challenge: challenge, purpose: "sign-in", binding: Self.binding("browser", browserKey), accountId: nil,
                lifetimeSeconds: Self.challengeSeconds, logger: logger)
            // Refused: the transaction rolls the new row back.
            if !replaced, let subject = Self.optionsSubject(address) {
                guard try await ThrottleStore.reserve(
                    db, scope: .portal, subject: subject, threshold: Self.optionsPerAddress, windowSeconds: limits.throttleWindow,
                    maxLockSeconds: limits.maxLockout, logger: logger)
                else {
                    throw PortalError.locked(
                        retryAfterSeconds: max(1, try await ThrottleStore.lockedSeconds(db, scope: .portal, subjects: [subject], logger: logger)))
                }
            }
            return requestOptions(challenge: challenge, allow: [], rp: rp)
        }
    }

    /// Sign-in challenges of new browsers an address may leave unfinished per throttle window.
    static let optionsPerAddress = PortalAccounts.maxLoginAttempts * 4

    static func optionsSubject(_ address: String?) -> String? { address.map { "passkey-options:\($0)" } }

    /// A sign-in with a passkey: a new session proven by "passkey".
    public func signIn(credential: [String: JSONValue], browserKey: String, address: String? = nil) async throws -> PortalSignIn {
        let (row, _) = try await checkAssertion(
            credential, purpose: "sign-in", binding: Self.binding("browser", browserKey), accountId: nil, address: address,
            action: "portal.sign-in")
        let cookie = PortalAccounts.newSecret()
        let session = try await client.transaction(logger: logger) { db -> PortalStore.SessionRow in
            let session = try await PortalStore.insertSession(
                db, accountId: row.id, secretHash: Secrets.sha256(cookie), provenBy: Self.provenBy, logger: logger)
            if let subject = Self.optionsSubject(address) {
                try await ThrottleStore.release(db, scope: .portal, subject: subject, threshold: Self.optionsPerAddress, logger: logger)
            }
            try await accounts.audit(db, actor: "portal:\(row.email)", action: "portal.sign-in", detail: ["method": .string("passkey")])
            return session
        }
        return PortalSignIn(session: PortalAccounts.session(session, account: PortalAccounts.account(row)), cookie: cookie)
    }

    /// Options for a fresh sign-in inside a session: the account's passkeys.
    public func reauthOptions(session: PortalSession) async throws -> JSONValue {
        let rp = try rp()
        let challenge = Self.newChallenge()
        return try await client.withConnection { db in
            let allow = try await PortalPasskeyStore.passkeys(db, accountId: session.account.id, logger: logger)
            guard !allow.isEmpty else { throw PortalPasskeyError.refused }
            try await PortalPasskeyStore.insertChallenge(
                db, challenge: challenge, purpose: "reauth", binding: Self.binding("session", session.id.uuidString),
                accountId: session.account.id, lifetimeSeconds: Self.challengeSeconds, logger: logger)
            return requestOptions(challenge: challenge, allow: allow, rp: rp)
        }
    }

    /// A fresh sign-in with one of the session's account's passkeys: `provenAt` becomes now.
    public func reauthenticate(session: PortalSession, credential: [String: JSONValue], address: String? = nil) async throws -> PortalSession {
        _ = try await checkAssertion(
            credential, purpose: "reauth", binding: Self.binding("session", session.id.uuidString), accountId: session.account.id,
            address: address, action: "portal.reauth")
        let proven = try await client.transaction(logger: logger) { db -> PortalStore.SessionRow in
            guard let proven = try await PortalStore.proveSession(db, id: session.id, provenBy: Self.provenBy, logger: logger) else {
                throw PortalError.invalidCredentials
            }
            try await accounts.audit(db, actor: session.auditActor, action: "portal.reauth", detail: ["method": .string("passkey")])
            return proven
        }
        return PortalAccounts.session(proven, account: session.account)
    }

    /// The assertion check shared by sign-in and fresh sign-in: the challenge is taken (single use);
    /// one attempt is reserved for the address; the verifier runs; the counter moves forward. A
    /// success gives the address's reservation back and clears the account's count.
    ///
    /// Which limit counts a failure. A credential id is no secret (a browser sends it with every
    /// assertion, and anyone who saw one can repeat it), so an assertion naming an account's passkey
    /// proves nothing until its signature verifies. Counting such failures against the account would
    /// let a stranger lock its passkey sign-in from anywhere, while guessing a signature is hopeless
    /// anyway. So: every attempt is reserved against the client address (before anything is
    /// checked), and only the address is charged for unknown passkeys, bad signatures, suspended or
    /// other accounts. The account is charged only for a failure after a signature that verified (the
    /// counter went back, or the user handle names another account): only a holder of the passkey's
    /// key (or a clone of it) can cause those, and the account's lock then stops the clone. A lock of
    /// the account holds against every assertion for it, the right one included.
    func checkAssertion(
        _ credential: [String: JSONValue], purpose: String, binding: Data, accountId expected: UUID?, address: String?, action: String
    ) async throws -> (PortalStore.AccountRow, PortalPasskeyStore.PasskeyRow) {
        let rp = try rp()
        let challenge = try Self.challenge(of: credential)
        let assertion = try Self.assertion(credential)
        let credentialId: [UInt8]
        do { credentialId = try WebAuthn.credentialId(of: assertion) } catch { throw PortalPasskeyError.refused }
        let limits = accounts.limits
        let addressSubject = address.map { "passkey-address:\($0)" }
        let addressThreshold = PortalAccounts.maxLoginAttempts * 4
        let (row, passkey) = try await client.transaction(logger: logger) {
            db -> (PortalStore.AccountRow?, PortalPasskeyStore.PasskeyRow?) in
            guard let taken = try await PortalPasskeyStore.takeChallenge(db, challenge: challenge.text, purpose: purpose, binding: binding, logger: logger),
                taken == expected
            else { throw PortalPasskeyError.expired }
            if let addressSubject {
                guard try await ThrottleStore.reserve(
                    db, scope: .portal, subject: addressSubject, threshold: addressThreshold, windowSeconds: limits.throttleWindow,
                    maxLockSeconds: limits.maxLockout, logger: logger)
                else {
                    throw PortalError.locked(
                        retryAfterSeconds: max(1, try await ThrottleStore.lockedSeconds(db, scope: .portal, subjects: [addressSubject], logger: logger)))
                }
            }
            guard let passkey = try await PortalPasskeyStore.passkey(db, credentialId: credentialId, logger: logger),
                let row = try await PortalStore.account(db, id: passkey.accountId, logger: logger)
            else { return (nil, nil) }
            let subject = Self.accountSubject(row.id)
            let locked = try await ThrottleStore.lockedSeconds(db, scope: .portal, subjects: [subject], logger: logger)
            guard locked == 0 else { throw PortalError.locked(retryAfterSeconds: max(1, locked)) }
            return (row, passkey)
        }
        func refuse(_ actor: String, _ reason: String) async -> PortalPasskeyError {
            await accounts.auditAlone(actor: actor, action: action, detail: ["method": .string("passkey"), "reason": .string(reason)])
            return .refused
        }
        guard let row, let passkey else { throw await refuse("portal:unknown", "unknown passkey") }
        let actor = "portal:\(row.email)"
        let accountSubject = Self.accountSubject(row.id)
        guard expected == nil || expected == row.id else { throw await refuse(actor, "a passkey of another account") }
        guard row.status == "active" else { throw await refuse(actor, "account suspended") }
        let verified: VerifiedAssertion
        do {
            verified = try WebAuthn.verifyAssertion(
                assertion, expectedChallenge: challenge.bytes, rp: rp,
                credential: StoredCredential(
                    credentialId: passkey.credentialId, publicKeyCOSE: passkey.publicKey, signCount: UInt32(clamping: passkey.signCount),
                    backupEligible: passkey.backupEligible))
        } catch {
            throw await refuse(actor, error.message)
        }
        // A failure after a verified signature: charged to the account too (see above).
        func refuseVerified(_ reason: String) async throws -> PortalPasskeyError {
            try await client.withConnection { db in
                _ = try await ThrottleStore.reserve(
                    db, scope: .portal, subject: accountSubject, threshold: PortalAccounts.maxLoginAttempts,
                    windowSeconds: limits.throttleWindow, maxLockSeconds: limits.maxLockout, logger: logger)
            }
            return await refuse(actor, reason)
        }
        if let handle = verified.userHandle, handle != Self.userHandle(row.id) {
            throw try await refuseVerified("the user handle names another account")
        }
        if verified.counterRegressed { throw try await refuseVerified("the signature counter did not move forward (a cloned authenticator?)") }
        try await client.transaction(logger: logger) { db in
            guard try await PortalPasskeyStore.recordUse(db, id: passkey.id, signCount: Int64(verified.signCount), logger: logger) else {
                throw PortalPasskeyError.refused
            }
            try await ThrottleStore.clear(db, scope: .portal, subject: accountSubject, logger: logger)
            if let addressSubject {
                try await ThrottleStore.release(db, scope: .portal, subject: addressSubject, threshold: addressThreshold, logger: logger)
            }
        }
        return (row, passkey)
    }

    static func accountSubject(_ accountId: UUID) -> String { "passkey:\(accountId.uuidString.lowercased())" }
}

extension CosyncServices {
    /// The Portal accounts' passkeys, with the relying party of this configuration.
    public var portalPasskeys: PortalPasskeys {
        PortalPasskeys(accounts: portal, relyingParty: PortalRelyingParty.of(configuration))
    }
}
