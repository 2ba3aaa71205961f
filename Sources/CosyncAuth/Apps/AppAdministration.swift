import Foundation
import Logging
import NIOPosix
import PostgresNIO

/// Errors of app administration, mapped to HTTP statuses by the admin API.
public enum AdminFailure: Error, Equatable, CustomStringConvertible {
    case notFound(String)
    case invalid(FieldError)
    case badRequest(code: String, message: String)
    case conflict(code: String, message: String)

    public var description: String {
        switch self {
        case .notFound(let what): "\(what) not found"
        case .invalid(let error): error.description
        case .badRequest(_, let message), .conflict(_, let message): message
        }
    }
}

/// What the admin API shows of an app. Never the private key, the app secret or a credential.
public struct AppView: Sendable {
    public let appId: String
    public let state: AppState
    public let appToken: String?
    public let rawPublicKey: String?
    public let createdAt: Date
    public let updatedAt: Date
    public var product: AppProduct = .cosyncAuth

}

/// Creating, reading, changing and deleting apps (tenants), and rotating their credentials. Used by
/// the admin REST API and by the `cosyncauth app` commands alike.
public struct AppAdministration: Sendable {
    public let client: PostgresClient
    public let box: SecretBox
    public let serverKeys: ServerKeyRing
    public let logger: Logger
    /// The apps the end-user API resolves, by token and by id (see `AppCache`). Every change made here
    /// drops the app from it once committed; other nodes drop it on the notification.
    public let cache: AppCache
    /// Signalled when a creation takes a key from the pool: wakes this node's `KeyPoolFiller`.
    public let keyPoolTaken = WorkSignal()

    public init(client: PostgresClient, box: SecretBox, serverKeys: ServerKeyRing, logger: Logger, cache: AppCache = AppCache()) {
        self.client = client
        self.box = box
        self.serverKeys = serverKeys
        self.logger = logger
        self.cache = cache
    }

    public struct Created: Sendable {
        public let app: AppView
        public let appSecret: String
    }

    // MARK: create

    public func create(_ input: [String: JSONValue], actor: String) async throws -> Created {
        guard input["name"] != nil else {
            throw AdminFailure.invalid(FieldError("name", "required", "is required"))
        }
        var input = input
        var product = AppProduct.cosyncAuth
        if let value = input.removeValue(forKey: "product") {
            guard let text = value.stringValue, let chosen = AppProduct(rawValue: text) else {
                throw AdminFailure.invalid(FieldError("product", "invalid_value", "must be one of cosyncAuth, appKey"))
            }
            product = chosen
        }
        let state: AppState
        do {
            state = try AppState(name: "").applying(input)
        } catch {
            throw AdminFailure.invalid(error)
        }
        let appSecret = Secrets.token(prefix: "cas_")
        let appId = Secrets.hexIdentifier()
        let appToken = try await serverKeys.sign(AppTokenClaims(appId: appId))
        let credentialsSealed = try sealCredentials(state.credentials, appId: appId)
        let tokenSealed = try box.seal(appToken, purpose: .appToken(appId: appId))

        let (row, key): (App, AppKeyPair) = try await client.transaction(logger: logger) { db in
            // The app's own RSA key pair: one generated ahead (KeyPoolFiller), or, with the pool empty,
            // one generated now (tens of milliseconds of CPU, on NIO's thread pool).
            let key: AppKeyPair
            if let pooled = try await AppKeyPair.pooled(db, logger: logger) {
                key = pooled
            } else {
                key = try await AppKeyPair.generate(box: box)
            }
            let row = try await AppStore.insertApp(
                db, appId: appId, name: state.name, status: state.status.rawValue, settings: state.settings,
                appSecretHash: Secrets.sha256(appSecret), credentialsSealed: credentialsSealed, product: product, logger: logger)
            try await AppStore.insertAppToken(
                db, ref: row.ref, tokenHash: Secrets.sha256(appToken), tokenSealed: tokenSealed, origin: "issued",
                logger: logger)
            try await AppStore.insertAppKey(
                db, ref: row.ref, kid: key.kid, publicKeyPEM: key.publicKeyPEM, privateKeySealed: key.privateKeySealed,
                logger: logger)
            try await AuditLog.record(
                db, appRef: row.ref, appId: appId, actor: actor, action: "app.create",
                detail: ["name": .string(state.name), "product": .string(product.rawValue), "fields": .array(input.keys.sorted().map { .string($0) })],
                logger: logger)
            return (row, key)
        }
        // After the commit: the filler counts the pool without the key this creation took.
        keyPoolTaken.signal()
        let view = AppView(
            appId: appId, state: state, appToken: appToken, rawPublicKey: key.rawPublicKey, createdAt: row.createdAt,
            updatedAt: row.updatedAt, product: product)
        return Created(app: view, appSecret: appSecret)
    }

    // MARK: read

    public func row(appId: String) async throws -> App {
        guard let row = try await currentApp(appId: appId) else { throw AdminFailure.notFound("app") }
        return row
    }

    /// The app as stored now (one primary-key read, never the cache), or nil. The admin API's
    /// `AppAuthenticator` resolves its app here, once per request: an operator's decision must not
    /// rest on a node's cache that another node's change has not reached yet.
    public func currentApp(appId: String) async throws -> App? {
        guard Self.isAppId(appId) else { return nil }
        return try await client.withConnection { try await AppStore.app($0, appId: appId, logger: logger) }
    }

    /// The view of an app outside the admin routes (the CLI, AppKey): resolves it, then `view(app:)`.
    public func view(appId: String) async throws -> AppView {
        try await view(app: try await row(appId: appId))
    }

    /// The view of the app the admin API resolved (`AppAuthenticator`).
    public func view(app: App) async throws -> AppView {
        try await client.withConnection { db in try await view(of: app, db: db) }
    }

    func view(of row: App, db: PostgresConnection) async throws -> AppView {
        let tokenSealed = try await AppStore.currentAppTokenSealed(db, ref: row.ref, logger: logger)
        let keys = try await AppStore.keys(db, ref: row.ref, logger: logger)
        let token = try tokenSealed.map { try box.openString($0, purpose: .appToken(appId: row.appId)) }
        let signing = keys.first(where: \.active)
        return AppView(
            appId: row.appId, state: try state(of: row), appToken: token,
            rawPublicKey: signing.map { Data($0.publicKeyPEM.utf8).base64EncodedString() },
            createdAt: row.createdAt, updatedAt: row.updatedAt, product: row.product)
    }

    func state(of row: App) throws -> AppState {
        AppState(
            name: row.name, status: row.status, settings: row.settings,
            credentials: try openCredentials(row.credentialsSealed, appId: row.appId))
    }

    public struct Page: Sendable {
        public let apps: [AppView]
        public let nextCursor: String?
    }

    /// Newest first, keyset-paginated. The list omits `appToken` and `rawPublicKey` (GET one app for them).
    public func list(query: String?, limit: Int, cursor: String?) async throws -> Page {
        let before = try Cursor.intOrNil(cursor)
        let rows = try await client.withConnection { db in
            try await AppStore.listApps(db, namePrefix: query, before: before, limit: limit + 1, logger: logger)
        }
        let page = rows.prefix(limit)
        let apps = try page.map { row in
            AppView(
                appId: row.appId, state: try state(of: row), appToken: nil, rawPublicKey: nil, createdAt: row.createdAt,
                updatedAt: row.updatedAt, product: row.product)
        }
        let next = rows.count > limit ? page.last.map { Cursor.encode($0.ref) } : nil
        return Page(apps: apps, nextCursor: next)
    }

    // MARK: update

    /// PATCH of the app the admin API resolved. The settings are read-modify-written, so the row is
    /// read once more, locked, inside the transaction (the resolved one may be older).
    public func update(app: App, patch: [String: JSONValue], actor: String) async throws -> AppView {
        try await update(appId: app.appId, patch: patch, actor: actor)
    }

    /// The same by id (the CLI and tests): one read, the locked one.
    public func update(appId: String, patch: [String: JSONValue], actor: String) async throws -> AppView {
        guard Self.isAppId(appId) else { throw AdminFailure.notFound("app") }
        let (view, ref): (AppView, Int64) = try await client.transaction(logger: logger) { db in
            guard let row = try await AppStore.app(db, appId: appId, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("app")
            }
            let current = try state(of: row)
            let next: AppState
            do {
                next = try current.applying(patch)
            } catch let error as FieldError {
                throw AdminFailure.invalid(error)
            }
            let sealed = try sealCredentials(next.credentials, appId: appId)
            let updated = try await AppStore.updateApp(
                db, ref: row.ref, name: next.name, status: next.status.rawValue, settings: next.settings,
                credentialsSealed: sealed, logger: logger)
            try await AuditLog.record(
                db, appRef: row.ref, appId: appId, actor: actor, action: "app.update",
                detail: ["fields": .array(patch.keys.sorted().map { .string($0) })], logger: logger)
            try await Events.record(db, app: updated, type: .appUpdated, userId: nil, data: ["fields": .array(patch.keys.sorted().map { .string($0) })], logger: logger)
            return (try await self.view(of: updated, db: db), row.ref)
        }
        cache.invalidate(ref: ref)
        return view
    }

    // MARK: delete

    /// Deletes the app the admin API resolved (by its id, in one statement, as `delete(appId:)`).
    public func delete(app: App, actor: String) async throws {
        try await delete(appId: app.appId, actor: actor)
    }

    public func delete(appId: String, actor: String) async throws {
        guard Self.isAppId(appId) else { throw AdminFailure.notFound("app") }
        // The deletion races every write of the app, and no one lock order serves them all: a user
        // write holds the app row (KEY SHARE, its foreign key) and then needs a webhook endpoint (its
        // event's delivery) that the deletion removed before the app row. PostgreSQL then rolls one
        // back (40P01); when that is the deletion, it is run again, at most twice more.
        var retries = 0
        while true {
            do {
                let ref: Int64 = try await client.transaction(logger: logger) { db in
                    // The app row first, locked as every change of the app locks it (`app(forUpdate:)`): a
                    // PATCH holds it and then needs the app's webhook endpoints (its app.updated deliveries),
                    // so taking the endpoints below before the app row deadlocked with it (40P01, found by
                    // the admin fuzz). The lock does not stop user writes (they only need the row to stay).
                    _ = try await AppStore.app(db, appId: appId, forUpdate: true, logger: logger)
                    // The users next, each row as a user write takes it: a user write holds its user row
                    // and then needs the app row (the foreign key of its audit or event row), so deleting
                    // the app row first and reaching the users through the cascade deadlocked with it.
                    try await UserStore.deleteAll(db, appId: appId, logger: logger)
                    // Then the webhook endpoints, each before its deliveries, as a webhook worker marking a
                    // delivery takes them (endpoint row, then delivery row): the app row's cascade could
                    // reach the deliveries through the events first and then wait for an endpoint a worker
                    // holds (40P01, found by the admin fuzz).
                    try await EventStore.deleteEndpoints(db, appId: appId, logger: logger)
                    guard let ref = try await AppStore.deleteApp(db, appId: appId, logger: logger) else {
                        throw AdminFailure.notFound("app")
                    }
                    try await AuditLog.record(db, appRef: nil, appId: appId, actor: actor, action: "app.delete", logger: logger)
                    return ref
                }
                cache.invalidate(ref: ref)
                return
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "40P01" && retries < 2 {
                retries += 1
                logger.warning("app deletion chosen as a deadlock victim: retrying", metadata: ["appId": "\(appId)", "retry": "\(retries)"])
            }
        }
    }

    // MARK: rotation

    public struct TokenRotation: Sendable {
        public let appToken: String
        public let previousTokenExpiresAt: Date?
    }

    /// Issues a new app token for the app the admin API resolved. The old one stops at once, or after
    /// `graceSeconds`. The row is read once, locked, inside the transaction (no read before it).
    public func rotateAppToken(app: App, graceSeconds: Int, actor: String) async throws -> TokenRotation {
        try await rotateAppToken(appId: app.appId, graceSeconds: graceSeconds, actor: actor)
    }

    /// The same by id (tests): the one read is the locked one.
    public func rotateAppToken(appId: String, graceSeconds: Int, actor: String) async throws -> TokenRotation {
        let token = try await serverKeys.sign(AppTokenClaims(appId: appId))
        let sealed = try box.seal(token, purpose: .appToken(appId: appId))
        let ref: Int64 = try await client.transaction(logger: logger) { db in
            guard let row = try await AppStore.app(db, appId: appId, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("app")
            }
            try await AppStore.retireCurrentAppToken(db, ref: row.ref, graceSeconds: graceSeconds, logger: logger)
            try await AppStore.insertAppToken(
                db, ref: row.ref, tokenHash: Secrets.sha256(token), tokenSealed: sealed, origin: "issued", logger: logger)
            try await AuditLog.record(
                db, appRef: row.ref, appId: appId, actor: actor, action: "app.token.rotate",
                detail: ["gracePeriodSeconds": .int(graceSeconds)], logger: logger)
            return row.ref
        }
        cache.invalidate(ref: ref)
        return TokenRotation(
            appToken: token, previousTokenExpiresAt: graceSeconds > 0 ? Date().addingTimeInterval(Double(graceSeconds)) : nil)
    }

    /// Issues a new app secret for the app the admin API resolved; the old one stops at once. The row
    /// is read once, locked, inside the transaction.
    public func rotateAppSecret(app: App, actor: String) async throws -> String {
        let appId = app.appId
        let secret = Secrets.token(prefix: "cas_")
        let ref: Int64 = try await client.transaction(logger: logger) { db in
            guard let row = try await AppStore.app(db, appId: appId, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("app")
            }
            try await AppStore.setAppSecretHash(db, ref: row.ref, hash: Secrets.sha256(secret), logger: logger)
            try await AuditLog.record(db, appRef: row.ref, appId: appId, actor: actor, action: "app.secret.rotate", logger: logger)
            return row.ref
        }
        cache.invalidate(ref: ref)
        return secret
    }

    public struct KeyRotation: Sendable {
        public let app: AppView
        public let previousKeyRetiresAt: Date
    }

    /// Makes a new key pair the signing key. The old public key stays in the JWKS until every JWT it
    /// signed has expired: `userJWTExpiration` hours (or `retireAfterHours` when given).
    /// The app is the one the admin API resolved; its row is read once more, locked, inside the
    /// transaction (its current `userJWTExpiration` decides the default).
    public func rotateKeys(app: App, retireAfterHours: Int?, actor: String) async throws -> KeyRotation {
        let appId = app.appId
        let key = try await NIOThreadPool.singleton.runIfActive { try RSAKeyMaterial.generate() }
        let sealed = try box.seal(key.privateKeyPEM, purpose: .appKey(kid: key.kid))
        let (rotation, ref): (KeyRotation, Int64) = try await client.transaction(logger: logger) { db in
            guard let row = try await AppStore.app(db, appId: appId, forUpdate: true, logger: logger) else {
                throw AdminFailure.notFound("app")
            }
            let hours = retireAfterHours ?? row.settings.userJWTExpiration
            try await AppStore.deactivateSigningKey(db, ref: row.ref, retireAfterHours: hours, logger: logger)
            try await AppStore.insertAppKey(
                db, ref: row.ref, kid: key.kid, publicKeyPEM: key.publicKeyPEM, privateKeySealed: sealed, logger: logger)
            try await AuditLog.record(
                db, appRef: row.ref, appId: appId, actor: actor, action: "app.keys.rotate",
                detail: ["kid": .string(key.kid), "previousKeyRetiresAfterHours": .int(hours)], logger: logger)
            let rotation = KeyRotation(
                app: try await view(of: row, db: db), previousKeyRetiresAt: Date().addingTimeInterval(Double(hours) * 3600))
            return (rotation, row.ref)
        }
        cache.invalidate(ref: ref)
        return rotation
    }

    // MARK: public keys and credentials

    /// The JWKS of an app: its signing key and the rotated-out keys not yet retired.
    /// Kept in the app cache with the app (dropped on any change of its keys, sql/0012), so the JWKS
    /// keeps answering through a database failover as getApplication does.
    public func jwks(appId: String) async throws -> [[String: String]] {
        guard let row = try await cachedApp(appId: appId) else { throw AdminFailure.notFound("app") }
        if let keys = cache.jwks(ref: row.ref) { return keys }
        let generation = cache.beginLoad()
        let keys = try await client.withConnection { try await AppStore.keys($0, ref: row.ref, logger: logger) }
        let jwks = try keys.map { try RSAKeyMaterial.jwk(publicKeyPEM: $0.publicKeyPEM, kid: $0.kid) }
        // A rotated-out key retires by time, with no notification: the copy lasts until the first retirement.
        if let generation {
            cache.storeJWKS(jwks, ref: row.ref, until: keys.compactMap(\.retiresAt).min(), generation: generation)
        }
        return jwks
    }

    /// The app whose secret this is, if any. The secret is looked up by its SHA-256 (unique index), so
    /// the database never sees or compares the secret itself.
    /// Its status comes with it, so the caller can hold a suspended app's secret to reads.
    public func app(forSecret secret: String) async throws -> (appId: String, status: String)? {
        guard !secret.isEmpty, secret.utf8.count <= 512 else { return nil }
        return try await client.withConnection {
            try await AppStore.appIdForSecretHash($0, hash: Secrets.sha256(secret), logger: logger)
        }
    }

    /// The app an app token belongs to, by exact string (through its hash): from the cache when it
    /// holds the token, else one query (whose answer the cache keeps, with the token's grace deadline).
    public func app(forToken token: String) async throws -> App? {
        guard !token.isEmpty, token.utf8.count <= 4096 else { return nil }
        let hash = Secrets.sha256(token)
        if let cached = cache.app(tokenHash: hash) { return cached }
        let generation = cache.beginLoad()
        guard let (row, expiresAt) = try await client.withConnection({
            try await AppStore.appByTokenHash($0, tokenHash: hash, logger: logger)
        }) else { return nil }
        if let generation { cache.store(row, tokenHash: hash, tokenExpiresAt: expiresAt, generation: generation) }
        return row
    }

    /// The app with this id for the end-user API (an access token names it): from the cache, else one
    /// query. The admin API reads the row instead (`currentApp`).
    public func cachedApp(appId: String) async throws -> App? {
        guard Self.isAppId(appId) else { return nil }
        if let cached = cache.app(appId: appId) { return cached }
        let generation = cache.beginLoad()
        guard let row = try await client.withConnection({ try await AppStore.app($0, appId: appId, logger: logger) }) else { return nil }
        if let generation { cache.store(row, generation: generation) }
        return row
    }

    func sealCredentials(_ credentials: ProviderCredentials, appId: String) throws -> Data? {
        guard !credentials.isEmpty else { return nil }
        return try box.seal(try JSONCoding.encode(credentials), purpose: .appCredentials(appId: appId))
    }

    func openCredentials(_ sealed: Data?, appId: String) throws -> ProviderCredentials {
        guard let sealed else { return ProviderCredentials() }
        return try JSONDecoder().decode(
            ProviderCredentials.self, from: try box.open(sealed, purpose: .appCredentials(appId: appId)))
    }

    public static func isAppId(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// Keyset cursors: the last row's sort key, in a form the OpenAPI document states exactly (its
/// `cursor` patterns), and every value of that form is a valid position (a made-up one only moves
/// where the page starts, within what the caller may list anyway):
/// - a row id (apps, messages, logs, webhook attempts): 1-18 ASCII digits;
/// - a text (users: the last lower-cased handle): base64url of its UTF-8, without padding; any
///   base64url text decodes (leftover bits are dropped, invalid UTF-8 becomes U+FFFD, NUL is removed);
/// - a time and an id (signups, invites): `<microseconds since 1970>_<uuid>`, the time clamped to the
///   dates PostgreSQL stores.
public enum Cursor {
    public static func encode(_ id: Int64) -> String { String(id) }
    public static func decodeInt(_ text: String) -> Int64? {
        guard (1...18).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }
    public static func encode(text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    static let invalid = AdminFailure.badRequest(code: "invalid_cursor", message: "cursor is not one this server issues")

    /// The id of an optional cursor; another form is a 400.
    static func intOrNil(_ text: String?) throws -> Int64? {
        guard let text else { return nil }
        guard let id = decodeInt(text) else { throw invalid }
        return id
    }

    /// The text of an optional cursor; another form is a 400.
    static func textOrNil(_ text: String?) throws -> String? {
        guard let text else { return nil }
        guard let value = decodeText(text) else { throw invalid }
        return value
    }

    /// Base64url without padding, every value decoding: 6 bits a character, whole bytes kept.
    public static func decodeText(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for c in text.utf8 {
            let value: UInt8
            switch c {
            case 0x41...0x5A: value = c - 0x41
            case 0x61...0x7A: value = c - 0x61 + 26
            case 0x30...0x39: value = c - 0x30 + 52
            case 0x2D: value = 62
            case 0x5F: value = 63
            default: return nil
            }
            buffer = (buffer << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
            buffer &= (1 << UInt32(bits)) - 1
        }
        // PostgreSQL text cannot hold U+0000; any other character is a position like another.
        return String(String(decoding: bytes, as: UTF8.self).unicodeScalars.filter { $0 != "\u{0}" }.map(Character.init))
    }

    /// `<microseconds>_<uuid>`: the position of a row by creation time and id.
    public static func encode(micros: Int64, id: UUID) -> String { "\(micros)_\(id.uuidString.lowercased())" }

    /// The time and id of an optional time cursor; another form is a 400. A time outside the dates
    /// PostgreSQL stores is clamped to the nearest one (the page is then empty or starts at the newest).
    static func timeOrNil(_ text: String?) throws -> (Date, UUID)? {
        guard let text else { return nil }
        let parts = text.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2, let sign = parts[0].utf8.first else { throw invalid }
        let digits = sign == UInt8(ascii: "-") ? parts[0].dropFirst() : parts[0]
        guard (1...18).contains(digits.utf8.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let micros = Int64(parts[0]), parts[1].utf8.count == 36, let id = UUID(uuidString: String(parts[1]))
        else { throw invalid }
        let range = Date.storableRange
        let date = min(max(Date(timeIntervalSince1970: Double(micros) / 1_000_000), range.lowerBound), range.upperBound)
        return (date, id)
    }
}
