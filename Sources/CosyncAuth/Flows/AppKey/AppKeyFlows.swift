import Foundation
import JWTKit
import Logging
import PostgresNIO

/// Settings of the AppKey flows that are not per app.
public struct AppKeyFlowSettings: Sendable {
    /// Challenges (signup, login, verify, anonymous, addPasskey) one handle may be issued per hour
    /// from one client address. Counted per handle and address: a quota per handle alone let anyone
    /// lock a chosen user out of passkey sign-in for an hour by asking for its challenges.
    public var challengesPerHandlePerHour = 60
    /// Signup and anonymous challenges one client address may be issued per hour over all handles:
    /// bounds the rows one address can make for handles nobody owns yet. Login, verify and
    /// addPasskey challenges name an existing account and are not counted here, so a flood from a
    /// shared address (a NAT) cannot keep that address's users from signing in.
    public var newAccountChallengesPerAddressPerHour = 1000
    /// Code e-mails/SMS of AppKey signups per handle and client address and hour. Over all addresses,
    /// the handle gets `firstCodesPerHandlePerHour` first codes (one per address) and
    /// `handleCeilingFactor` × `codesPerHandlePerHour` further ones.
    public var codesPerHandlePerHour = 5
    public var handleCeilingFactor = 4
    public var firstCodesPerHandlePerHour = 100
    public var maxCodeAttempts = 5
    /// The `timeout` advertised in WebAuthn options, in milliseconds.
    public var advertisedTimeout = 60_000
    public init() {}
}

/// The AppKey end-user flows (<doc:AppKeyAPI> §4): the passkey product's strategy, in Kratos's sense.
/// Each method takes the resolved app or caller (`AppKeyResolver` turns the request's credentials into
/// them first) and the decoded fields of one request, and returns a typed result (AppKeyResults.swift),
/// or throws an `AppKeyError`. None knows about HTTP or the JSON of the wire.
///
/// It names what it uses: the shared sign-in methods (`PasskeyMethod`, `CodeChallenge`,
/// `SessionGrant`), the shared step pieces (`UserAudit`, `Accounts`, `SocialIdentities`), and a few
/// services; not the whole of `EndUserFlows`, which only hands these over (`init(flows:)`).
public struct AppKeyFlows: Sendable {
    public let settings: AppKeyFlowSettings
    let client: PostgresClient
    let tokens: TokenIssuer
    let logger: Logger
    /// The app's administration view (GET app) and the server keys (passkey-reset tokens).
    let apps: AppAdministration
    let outbox: Outbox
    let social: SocialTokenVerifier
    let sessions: SessionGrant
    let passkeys: PasskeyMethod
    let codes: CodeChallenge
    let userAudit: UserAudit
    let accounts: Accounts
    let socialIdentities: SocialIdentities
    /// SMS one phone number may receive per hour (the end-user flows' setting, shared).
    let smsPerNumberPerHour: Int

    public init(flows: EndUserFlows, settings: AppKeyFlowSettings = AppKeyFlowSettings()) {
        self.settings = settings
        self.client = flows.client
        self.tokens = flows.tokens
        self.logger = flows.logger
        self.apps = flows.apps
        self.outbox = flows.outbox
        self.social = flows.social
        self.sessions = flows.sessions
        self.passkeys = flows.passkeys
        self.codes = flows.codes
        self.userAudit = flows.userAudit
        self.accounts = flows.accounts
        self.socialIdentities = flows.socialIdentities
        self.smsPerNumberPerHour = flows.settings.smsPerNumberPerHour
    }

    // MARK: the user answer (<doc:AppKeyAPI> §2.3, §2.4)

    /// The user with its profile and passkeys, and the session keys: `accessToken` (when given) and,
    /// with `withJWT`, a freshly signed JWT.
    func userResult(app: App, user: User, accessToken: String?, withJWT: Bool = true, valid: Bool? = nil) async throws -> AppKeyUserResult {
        let (profile, passkeys) = try await client.withConnection { db in
            (try await PasskeyStore.profile(db, userId: user.id, logger: logger),
             try await PasskeyStore.list(db, appRef: app.ref, userId: user.id, logger: logger))
        }
        var jwt: String?
        if withJWT { jwt = try await userJWT(app: app, user: user) }
        return AppKeyUserResult(
            appId: app.appId, user: user, profile: profile, passkeys: passkeys, accessToken: accessToken, jwt: jwt, valid: valid)
    }

    static func loginProvider(_ user: User) -> String { user.loginProvider.isEmpty ? "handle" : user.loginProvider }

    /// The user JWT (<doc:AppKeyAPI> §2.7): RS256 with the app's key, as for CosyncAuth apps.
    func userJWT(app: App, user: User) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        let hours = max(1, app.settings.userJWTExpiration)
        var claims: [String: JSONValue] = [
            "iss": .string(outbox.publicURL), "aud": .string(app.appId), "sub": .string(AppKeyIds.wire(user.id)),
            "handle": .string(user.handle), "appId": .string(app.appId), "loginProvider": .string(Self.loginProvider(user)),
            "iat": .int(now), "exp": .int(now + hours * 3600),
        ]
        if let name = user.userName { claims["userName"] = .string(name) }
        return try await tokens.userJWT(claims: claims, appRef: app.ref)
    }

    /// Opens a session (in the caller's transaction) and signs the access token naming it
    /// (`SessionGrant`, shared with the end-user flows). A passkey ceremony names the passkey's
    /// identity; other methods open it with the user's identity of their kind.
    func openSession(_ db: PostgresConnection, app: App, user: User, method: SessionMethod, identityId: UUID? = nil) async throws -> String {
        let sessionId: UUID
        do {
            sessionId = try await sessions.open(db, app: app, user: user, method: method, identityId: identityId, origin: ClientOrigin.current)
        } catch let refused as SessionGrant.Refused {
            switch refused {
            case .userRevoked: throw AppKeyError.accountSuspended
            // The provider account or passkey it signed in with was removed meanwhile.
            case .identityGone: throw method == .passkey ? AppKeyError.passkeyNotExist : AppKeyError.accountDoesNotExist
            }
        }
        return try await sessions.accessToken(app: app, user: user, sessionId: sessionId)
    }

    // MARK: shared checks

    func audit(_ db: PostgresConnection, app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async throws {
        try await userAudit.record(db, app: app, handle: handle, action: "appkey.\(action)", status: status, detail: detail)
    }

    func audit(app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async {
        await userAudit.record(app: app, handle: handle, action: "appkey.\(action)", status: status, detail: detail)
    }

    /// A locale of the app (upper-cased), the default when absent; another → E609.
    func locale(_ raw: String?, app: App) throws(AppKeyError) -> String {
        guard let raw else { return Locales.defaultLocale }
        let code = raw.uppercased()
        guard app.settings.locales.contains(code) else { throw .invalidLocale }
        return code
    }

    /// The account-exists answer for a user holding a handle (<doc:AppKeyAPI> K3 step 2).
    static func accountExists(_ user: User) -> AppKeyError {
        switch user.loginProvider {
        case "apple": .appleAccountExists
        case "google": .googleAccountExists
        default: .handleAlreadyRegistered
        }
    }

    /// Issues one challenge for a handle, within `challengesPerHandlePerHour` for the caller's address
    /// and, for a `newAccount` ceremony (signup, anonymous), `newAccountChallengesPerAddressPerHour`
    /// for the address over all handles (all taken, or none: the caller's transaction rolls back on
    /// refusal).
    func takeChallengeQuota(_ db: PostgresConnection, app: App, handle: String, newAccount: Bool) async throws {
        let address = ClientOrigin.current.address ?? "-"
        if newAccount {
            guard try await ThrottleStore.take(
                db, appRef: app.ref, subject: "appkey-challenge-ip:\(address)", limit: settings.newAccountChallengesPerAddressPerHour,
                windowSeconds: 3600, logger: logger)
            else { throw AppKeyError.rateLimited }
        }
        guard try await ThrottleStore.take(
                db, appRef: app.ref, subject: "appkey-challenge:\(handle.lowercased()) \(address)", limit: settings.challengesPerHandlePerHour,
                windowSeconds: 3600, logger: logger)
        else { throw AppKeyError.rateLimited }
    }

    /// 32 random bytes, base64url.
    static func newChallenge() -> String { Base64URL.encode(Secrets.randomBytes(32)) }

    /// The relying party of an app; an app without an RP ID cannot run ceremonies.
    func relyingParty(_ app: App) throws(AppKeyError) -> WebAuthnRelyingParty {
        let s = app.settings
        guard !s.rpId.isEmpty else { throw AppKeyError.internalError.with("the app has no relying party (rpId) configured") }
        return WebAuthnRelyingParty(
            id: s.rpId, allowedOrigins: s.effectiveOrigins,
            userVerification: WebAuthnUserVerification(rawValue: s.userVerification.rawValue) ?? .required,
            attestation: WebAuthnAttestationPolicy(rawValue: s.attestation.rawValue) ?? .none,
            trustAnchorsDER: s.trustAnchors.compactMap { Data(base64Encoded: $0).map { Array($0) } })
    }

    func rpName(_ app: App) -> String { app.settings.rpName.isEmpty ? app.name : app.settings.rpName }

    /// The app's display id: `<name>-<first 8 of appId>`, as the passkey sheet's account name shows it.
    static func displayAppId(_ app: App) -> String {
        let slug = app.name.lowercased().filter { $0.isLetter || $0.isNumber }
        return "\(slug.isEmpty ? "app" : slug)-\(app.appId.prefix(8))"
    }

    /// The user a ceremony names: its account name shows the app (`displayAppId`).
    static func ceremonyUser(app: App, userId: UUID, handle: String, displayName: String) -> PasskeyUserEntity {
        PasskeyUserEntity(id: userId, name: "\(handle)(\(displayAppId(app)))", displayName: displayName, handle: handle)
    }

    /// Creation options (<doc:AppKeyAPI> §2.5 AKSignupChallenge): ES256, RS256, EdDSA; a discoverable
    /// credential preferred; the credProps extension asked for.
    func creationOptions(app: App, challenge: String, userId: UUID, handle: String, displayName: String, exclude: [Passkey]) throws(AppKeyError)
        -> PasskeyCreationOptions
    {
        let rp = try relyingParty(app)
        return PasskeyCreationOptions(
            challenge: challenge, rpName: rpName(app), rpId: rp.id,
            user: Self.ceremonyUser(app: app, userId: userId, handle: handle, displayName: displayName), algorithms: [-7, -257, -8],
            timeout: settings.advertisedTimeout, attestation: app.settings.attestation == .none ? "none" : "direct",
            excludeCredentials: exclude.map(PasskeyDescriptor.init), residentKey: "preferred", requireResidentKey: false,
            userVerification: app.settings.userVerification.rawValue, credProps: true)
    }

    /// The challenge value of a response's clientDataJSON, canonical (base64url of its 32 bytes);
    /// anything else → E602.
    static func challenge(ofClientData text: String) throws(AppKeyError) -> (value: String, bytes: [UInt8]) {
        guard text.utf8.count <= 16_384, let raw = Base64URL.decodeLenient(text),
            let object = (try? JSONDecoder().decode(JSONValue.self, from: raw))?.objectValue,
            let challenge = object["challenge"]?.stringValue, challenge.utf8.count <= 200,
            let bytes = Base64URL.decodeLenient(challenge), bytes.count == 32
        else { throw AppKeyError.invalidData.with("clientDataJSON carries no challenge of this server") }
        return (Base64URL.encode(bytes), Array(bytes))
    }

    /// The platform of a new passkey, best effort (<doc:AppKeyAPI> §6.2).
    static func platform(attachment: String?) -> String {
        let agent = ClientOrigin.current.userAgent ?? ""
        if agent.contains("CFNetwork") || agent.contains("Darwin") || agent.contains("iPhone") { return "iOS" }
        if agent.contains("Android") { return "Android" }
        if agent.contains("Mac OS X") { return "macOS" }
        if agent.contains("Windows") { return "Windows" }
        // Only the two values WebAuthn defines: anything else would be stored as typed, unbounded.
        if let attachment, ["platform", "cross-platform"].contains(attachment) { return attachment }
        return "unknown"
    }
}

/// A passkey-reset token (<doc:AppKeyAPI> §5.4): signed by the server key, scope `resetPasskey`, `jti` names its
/// `passkey_resets` row (single use).
public struct ResetPasskeyClaims: JWTPayload, Equatable {
    public var handle: String
    public var appId: String
    public var scope: String
    public var iat: Int
    public var exp: Int
    public var uid: String
    public var jti: String

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try requireScope(scope, "resetPasskey", expires: exp)
    }
}
