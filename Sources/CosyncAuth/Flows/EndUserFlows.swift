import Foundation
import Logging
import PostgresNIO

/// Settings of the end-user flows that are not per app.
public struct FlowSettings: Sendable {
    public var signupCodeLifetime: Int = 24 * 3600
    public var inviteCodeLifetime: Int = 24 * 3600
    public var resetCodeLifetime: Int = 3600
    /// Life of a login-token and of its SMS code (<doc:EndUserAPI> §7.4).
    public var loginCodeLifetime: Int = 600
    /// Life of a phone-verification code.
    public var phoneCodeLifetime: Int = 30 * 60
    /// True with the twilio SMS transport: an app without Twilio credentials cannot send SMS, so
    /// the requests that would send one fail up front (E500) and change nothing.
    public var smsNeedsProviderCredentials = false
    public var maxCodeAttempts: Int = 5
    /// Failed-login counters reset after this long without a failure.
    public var throttleWindow: Int = 15 * 60
    /// The longest a lockout lasts.
    public var maxLockout: Int = 15 * 60
    /// Wrong second-factor codes of a user are counted over this window (across login-tokens);
    /// from 2 × maxCodeAttempts on, loginComplete is locked like a login (30 s doubling, ≤ maxLockout).
    public var secondFactorWindow: Int = 24 * 3600
    /// SMS one phone number may receive per hour (on top of the app's smsDailyLimit).
    public var smsPerNumberPerHour: Int = 5
    /// A client address may fail this many times more than one handle before it is locked.
    public var addressThresholdFactor: Int = 5
    /// A handle as a whole (failures from several addresses) locks at this many times maxLoginAttempts.
    public var handleThresholdFactor: Int = 3
    /// Signup and invite e-mails (new codes and re-sends) per handle and hour.
    public var codeMailsPerHandlePerHour: Int = 5
    /// forgotPassword requests per account and hour, and per client address and hour.
    public var resetMailsPerAccountPerHour: Int = 5
    public var resetRequestsPerAddressPerHour: Int = 30
    public init() {}
}

/// The tokens a successful login-type call returns.
public struct IssuedTokens: Sendable, Equatable {
    public let jwt: String
    public let accessToken: String
    public var signedUserToken: String?
}

public enum LoginOutcome: Sendable, Equatable {
    case tokens(IssuedTokens)
    case secondFactor(loginToken: String)
}

/// The end-user flows (<doc:EndUserAPI> §5, <doc:EndUserAPI> §6). Each method takes decoded fields and returns a result
/// or throws an `EndUserError`; none knows about HTTP.
public struct EndUserFlows: Sendable {
    public let client: PostgresClient
    public let apps: AppAdministration
    public let tokens: TokenIssuer
    public let hasher: PasswordHasher
    public let outbox: Outbox
    public let social: SocialTokenVerifier
    public let settings: FlowSettings
    public let logger: Logger
    var box: SecretBox { apps.box }

    public init(
        client: PostgresClient, apps: AppAdministration, tokens: TokenIssuer, hasher: PasswordHasher, outbox: Outbox,
        social: SocialTokenVerifier, settings: FlowSettings, logger: Logger
    ) {
        self.client = client
        self.apps = apps
        self.tokens = tokens
        self.hasher = hasher
        self.outbox = outbox
        self.social = social
        self.settings = settings
        self.logger = logger
    }

    // MARK: gates

    /// `suspended` → 402, `migrated` → 413.
    func requireActive(_ app: App) throws(EndUserError) {
        switch app.status {
        case "active": return
        case "migrated": throw .appMigrated
        default: throw .appSuspended
        }
    }

    func requireActiveUser(_ user: User) throws(EndUserError) {
        guard user.status == "active" else { throw .userSuspended }
    }

    // MARK: tokens

    /// Builds the user JWT (`invalidMetadata` when a required field has no value), opens a session
    /// (`method`, and the request's `ClientOrigin`) and signs the access token that names it.
    func issueTokens(app: App, user: User, method: SessionMethod, jwtFailure: EndUserError = .invalidMetadata) async throws -> IssuedTokens {
        let claims: [String: JSONValue]
        do {
            claims = try Metadata.userJWTClaims(user: user, settings: app.settings)
        } catch {
            throw jwtFailure
        }
        let jwt = try await tokens.userJWT(claims: claims, appRef: app.ref)
        let sessionId = UUID()
        let hours = app.settings.userJWTExpiration
        let opened = try await Telemetry.sql("insert session") {
            try await client.withConnection {
                try await SessionStore.insert(
                    $0, id: sessionId, appRef: app.ref, userId: user.id, tokenVersion: user.tokenVersion, method: method,
                    origin: ClientOrigin.current, lifetimeSeconds: tokens.accessTokenSeconds(userJWTExpirationHours: hours), logger: logger)
            }
        }
        // The user's sessions were ended (or the user suspended or deleted) while this sign-in ran.
        guard opened else { throw EndUserError.invalidCredentials }
        let access = try await tokens.accessToken(user: user, appId: app.appId, userJWTExpirationHours: hours, sessionId: sessionId)
        return IssuedTokens(jwt: jwt, accessToken: access, signedUserToken: nil)
    }

    /// `signed-user-token` (<doc:EndUserAPI> §7.5): metaData as a JSON string indented by 10 spaces, or "".
    func signedUserToken(app: App, user: User, code: String, senderHandle: String? = nil, senderUserId: String? = nil) async throws -> String {
        var claims: [String: JSONValue] = [
            "handle": .string(user.handle), "appId": .string(app.appId), "code": .int(Int(code) ?? 0),
            "metaData": .string(user.metaData.isEmpty ? "" : Self.legacyIndentedJSON(.object(user.metaData))),
        ]
        if let senderHandle { claims["senderHandle"] = .string(senderHandle) }
        if let senderUserId { claims["senderUserId"] = .string(senderUserId) }
        return try await tokens.signedUserToken(claims: claims, appRef: app.ref)
    }

    static func legacyIndentedJSON(_ value: JSONValue, depth: Int = 0) -> String {
        let pad = String(repeating: " ", count: 10 * (depth + 1))
        let closePad = String(repeating: " ", count: 10 * depth)
        switch value {
        case .object(let object) where !object.isEmpty:
            let items = object.keys.sorted().map { key in
                "\(pad)\(quote(key)): \(legacyIndentedJSON(object[key] ?? .null, depth: depth + 1))"
            }
            return "{\n" + items.joined(separator: ",\n") + "\n\(closePad)}"
        case .array(let array) where !array.isEmpty:
            return "[\n" + array.map { pad + legacyIndentedJSON($0, depth: depth + 1) }.joined(separator: ",\n") + "\n\(closePad)]"
        default:
            return (try? String(decoding: JSONCoding.encode(value), as: UTF8.self)) ?? "null"
        }
    }

    static func quote(_ key: String) -> String {
        (try? String(decoding: JSONCoding.encode(JSONValue.string(key)), as: UTF8.self)) ?? "\"\""
    }

    // MARK: codes and passwords

    func sealCode(_ code: String, purpose: String) throws -> Data { try box.seal(code, purpose: purpose) }

    /// Constant-time comparison of a submitted code with a sealed one.
    func codeMatches(_ given: String, sealed: Data?, purpose: String) -> Bool {
        guard let sealed, let stored = try? box.openString(sealed, purpose: purpose) else { return false }
        return Secrets.constantTimeEquals(Data(given.utf8), Data(stored.utf8))
    }

    /// Verifies an md5-hex password against a stored hash: bcrypt, or a legacy raw 32-hex MD5 (which
    /// is then upgraded to bcrypt).
    func verifyPassword(_ md5: String, user: User) async throws -> Bool {
        guard let stored = user.passwordHash else { return false }
        let legacy = stored.hasPrefix(PasswordHasher.legacyDigestPrefix)
        if PasswordHasher.isMD5Hex(stored) || legacy {
            let given = legacy ? PasswordHasher.legacyDigest(md5Hex: md5) : md5
            guard Secrets.constantTimeEquals(Data(given.utf8), Data(stored.utf8)) else { return false }
            let upgraded = try await hasher.hash(md5Hex: md5, tenant: String(user.appRef))
            try await client.withConnection {
                try await UserStore.upgradePasswordHash($0, userId: user.id, from: stored, to: upgraded, logger: logger)
            }
            return true
        }
        return try await hasher.verify(md5Hex: md5, hash: stored, tenant: String(user.appRef))
    }

    func audit(_ db: PostgresConnection, app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async throws {
        var all = detail
        all["handle"] = .string(handle)
        try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: "user", action: action, status: status, detail: all, logger: logger)
    }

    func audit(app: App, handle: String, action: String, status: String = "success", detail: [String: JSONValue] = [:]) async {
        try? await client.withConnection { db in
            try await audit(db, app: app, handle: handle, action: action, status: status, detail: detail)
        }
    }

    /// Inserts a user, mapping a handle clash to `handleAlreadyRegistered`.
    func insertUser(
        _ db: PostgresConnection, app: App, handle: String, passwordHash: String?, locale: String, metadata: [String: JSONValue]
    ) async throws -> User {
        do {
            let user = try await UserStore.insert(
                db, appRef: app.ref, handle: handle, userName: nil, passwordHash: passwordHash, locale: locale, metaData: metadata,
                logger: logger)
            try await Events.record(db, app: app, type: .userCreated, user: user, logger: logger)
            return user
        } catch let error as PSQLError where error.uniqueViolationConstraint != nil {
            throw EndUserError.handleAlreadyRegistered
        }
    }
}
