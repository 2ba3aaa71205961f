import Foundation
import JWTKit
import Logging
import PostgresNIO

/// Claims given as a JSON object, for tokens whose claims depend on data (the user JWT carries the
/// user's metadata as claims).
struct ClaimSet: JWTPayload {
    var claims: [String: JSONValue]

    init(_ claims: [String: JSONValue]) { self.claims = claims }
    init(from decoder: any Decoder) throws { claims = try [String: JSONValue](from: decoder) }
    func encode(to encoder: any Encoder) throws { try claims.encode(to: encoder) }
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The access token: the legacy shape `{handle, appId, scope:"user", iat}` plus `exp`, `uid` (the
/// user's id), `sid` (the session it belongs to) and `ver` (the user's token version). A token with a
/// `sid` lives while its session row does; `ver` still judges the tokens issued before sessions existed
/// (no `sid`), so that a password change or reset, a suspension or deleting the account revokes them.
public struct AccessTokenClaims: JWTPayload, Equatable {
    public var handle: String
    public var appId: String
    public var scope: String
    public var iat: Int
    public var exp: Int
    public var uid: String
    public var ver: Int
    public var sid: String?

    public init(handle: String, appId: String, scope: String, iat: Int, exp: Int, uid: String, ver: Int, sid: String?) {
        (self.handle, self.appId, self.scope, self.iat, self.exp, self.uid, self.ver, self.sid) = (handle, appId, scope, iat, exp, uid, ver, sid)
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try requireScope(scope, "user", expires: exp)
    }
}

/// The checks every scoped token of this server shares: the scope it was issued for, and its expiry
/// when it has one.
func requireScope(_ scope: String?, _ expected: String, expires exp: Int? = nil) throws {
    guard scope == expected else { throw JWTError.claimVerificationFailure(failedClaim: nil, reason: "scope") }
    if let exp, Double(exp) <= Date().timeIntervalSince1970 {
        throw JWTError.claimVerificationFailure(failedClaim: nil, reason: "expired")
    }
}

/// The login token of the second factor: `{handle, appId, scope:"login", iat, exp: iat + 600, jti}`.
/// The legacy server's access token: no `exp` (legacy tokens never expired), no user id.
public struct LegacyAccessTokenClaims: JWTPayload, Equatable {
    public var handle: String
    public var appId: String
    public var scope: String?

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try requireScope(scope, "user")
    }
}

public struct LoginTokenClaims: JWTPayload, Equatable {
    public var handle: String
    public var appId: String
    public var scope: String
    public var iat: Int
    public var exp: Int
    public var jti: String

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try requireScope(scope, "login", expires: exp)
    }
}

/// Signs the tokens of the end-user API: user JWTs with the app's own key (RS256, no `kid`, as the
/// SDKs' `isValidJWT` expects), access and login tokens with the server key.
public actor TokenIssuer {
    let client: PostgresClient
    let box: SecretBox
    let serverKeys: ServerKeyRing
    let logger: Logger
    public let accessTokenLifetime: TimeInterval
    /// Parsed app signing keys by kid (a kid names one immutable key, so entries never go stale).
    var appKeys: [String: JWTKeyCollection] = [:]
    /// The imported legacy server keys still accepted: reloaded when the app cache's listener announces a
    /// change (sql/0020), and at least once a minute (the net when no listener runs, as in the CLI).
    var legacyKeys: (keys: JWTKeyCollection?, loadedAt: Date, generation: UInt64?) = (nil, .distantPast, nil)

    /// Which kid signs for which app (dropped with the app on every key rotation, see `AppCache`).
    let cache: AppCache?

    public init(
        client: PostgresClient, box: SecretBox, serverKeys: ServerKeyRing, accessTokenLifetime: TimeInterval, logger: Logger,
        cache: AppCache? = nil
    ) {
        self.client = client
        self.box = box
        self.serverKeys = serverKeys
        self.accessTokenLifetime = accessTokenLifetime
        self.logger = logger
        self.cache = cache
    }

    /// The collection holding the app's active signing key: no query when the cache knows the kid.
    func signingKeys(appRef: Int64) async throws -> JWTKeyCollection {
        if let kid = cache?.signingKid(ref: appRef), let cached = appKeys[kid] { return cached }
        let generation = cache?.beginLoad()
        let keys = try await client.withConnection { try await AppStore.keys($0, ref: appRef, logger: logger) }
        guard let active = keys.first(where: \.active) else { throw EndUserError.internalError }
        if let generation { cache?.storeSigningKid(active.kid, ref: appRef, generation: generation) }
        if let cached = appKeys[active.kid] { return cached }
        let pem = try box.openString(active.privateKeySealed, purpose: .appKey(kid: active.kid))
        let collection = JWTKeyCollection()
        await collection.add(rsa: try Insecure.RSA.PrivateKey(pem: pem), digestAlgorithm: .sha256)
        appKeys[active.kid] = collection
        return collection
    }

    public func userJWT(claims: [String: JSONValue], appRef: Int64) async throws -> String {
        try await signingKeys(appRef: appRef).sign(ClaimSet(claims))
    }

    /// `signed-user-token` for CJS ≤ 1.1.21 (<doc:EndUserAPI> §7.5): app key, `{handle, appId, code, metaData, …}`.
    public func signedUserToken(claims: [String: JSONValue], appRef: Int64) async throws -> String {
        var all = claims
        all["iat"] = .int(Int(Date().timeIntervalSince1970))
        return try await signingKeys(appRef: appRef).sign(ClaimSet(all))
    }

    /// Seconds an access token (and its session) lives: the server's lifetime, or the app's user-JWT
    /// expiry when that is longer (the setting is validated to a bounded number of hours).
    public nonisolated func accessTokenSeconds(userJWTExpirationHours: Int) -> Int {
        Int(max(accessTokenLifetime, Double(max(0, min(userJWTExpirationHours, 24 * 365 * 10))) * 3600))
    }

    public func accessToken(user: User, appId: String, userJWTExpirationHours: Int, sessionId: UUID) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        return try await serverKeys.sign(
            AccessTokenClaims(
                handle: user.handle, appId: appId, scope: "user", iat: now,
                exp: now + accessTokenSeconds(userJWTExpirationHours: userJWTExpirationHours),
                uid: user.id.uuidString.lowercased(), ver: user.tokenVersion, sid: sessionId.uuidString.lowercased()))
    }

    public func verifyAccessToken(_ token: String) async -> AccessTokenClaims? {
        try? await serverKeys.verify(token, as: AccessTokenClaims.self)
    }

    /// An access token of the legacy CosyncJWT server (`{handle, appId, scope:"user", iat}`, RS256
    /// by its server key, no expiry), while an imported legacy public key is within its cut-off.
    public func verifyLegacyAccessToken(_ token: String) async -> LegacyAccessTokenClaims? {
        let announced = legacyKeys.generation.map { cache?.legacyKeysCurrent(since: $0) == false } ?? false
        if announced || Date().timeIntervalSince(legacyKeys.loadedAt) > 60 {
            let generation = cache?.legacyKeysGeneration
            let loaded = try? await client.withConnection { try await LegacyTokenKeyStore.liveLegacyTokenKeys($0, logger: logger) }
            var collection: JWTKeyCollection?
            if let loaded, !loaded.isEmpty {
                let keys = JWTKeyCollection()
                for (pem, _) in loaded {
                    if let key = try? Insecure.RSA.PublicKey(pem: pem) {
                        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: Secrets.sha256(pem).base64EncodedString()))
                    }
                }
                collection = keys
            }
            legacyKeys = (collection, Date(), generation)
        }
        guard let keys = legacyKeys.keys else { return nil }
        return try? await keys.verify(token, as: LegacyAccessTokenClaims.self, iteratingKeys: true)
    }

    /// The login-token (<doc:EndUserAPI> §7.4): `{handle, appId, scope:"login", iat, exp: iat+600, jti}`, where `jti`
    /// names the login challenge that makes it single-use.
    public func loginToken(handle: String, appId: String, challenge: UUID) async throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        return try await serverKeys.sign(
            LoginTokenClaims(handle: handle, appId: appId, scope: "login", iat: now, exp: now + 600, jti: challenge.uuidString.lowercased()))
    }

    public func verifyLoginToken(_ token: String) async -> LoginTokenClaims? {
        try? await serverKeys.verify(token, as: LoginTokenClaims.self)
    }
}
