import Foundation
import Logging
import PostgresNIO

extension AppSettings: PostgresCodable {}

/// One row of `apps`, as stored (credentials still sealed).
public struct App: Sendable {
    public let ref: Int64
    public let appId: String
    public let name: String
    public let status: AppStatus
    public let settings: AppSettings
    public let appSecretHash: Data
    public let credentialsSealed: Data?
    public let createdAt: Date
    public let updatedAt: Date
    /// The API this app serves; chosen at creation, never changed.
    public var product: AppProduct = .cosyncAuth
}

/// Whether an app serves: `suspended` apps answer 402 and `migrated` apps 413 on the end-user API
/// (the legacy wire names `suspended` "inactive"). A value the code does not know reads as suspended.
public enum AppStatus: String, Codable, Sendable, CaseIterable {
    case active, suspended, migrated

    public init(stored: String) { self = AppStatus(rawValue: stored) ?? .suspended }

    /// The name the legacy end-user wire uses (`getApplication`, AppKey `GET app`).
    public var legacyName: String { self == .suspended ? "inactive" : rawValue }
}

/// The two end-user APIs an app can serve (<doc:AppKeyAPI> §1.1).
public enum AppProduct: String, Sendable, CaseIterable, Codable {
    case cosyncAuth, appKey
}

/// SQL for apps, their tokens and their keys. Every function takes a connection, so the same code
/// runs inside a transaction or on its own.
public enum AppStore {
    static let appColumns =
        "id, app_id, name, status, settings, app_secret_hash, credentials_sealed, created_at, updated_at, product"

    static func decodeApps(_ rows: PostgresRowSequence) async throws -> [App] {
        var result: [App] = []
        for try await (ref, appId, name, status, settings, secretHash, credentials, createdAt, updatedAt, product) in rows.decode(
            (Int64, String, String, String, AppSettings, Data, Data?, Date, Date, String).self)
        {
            result.append(
                App(
                    ref: ref, appId: appId, name: name, status: AppStatus(stored: status), settings: settings, appSecretHash: secretHash,
                    credentialsSealed: credentials, createdAt: createdAt, updatedAt: updatedAt,
                    product: AppProduct(rawValue: product) ?? .cosyncAuth))
        }
        return result
    }

    public static func insertApp(
        _ db: PostgresConnection, appId: String, name: String, status: String, settings: AppSettings,
        appSecretHash: Data, credentialsSealed: Data?, product: AppProduct = .cosyncAuth, logger: Logger
    ) async throws -> App {
        let rows = try await db.query(
            """
            INSERT INTO apps (app_id, name, status, settings, app_secret_hash, credentials_sealed, product)
            VALUES (\(appId), \(name), \(status), \(settings), \(appSecretHash), \(credentialsSealed), \(product.rawValue))
            RETURNING \(unescaped: appColumns)
            """, logger: logger)
        guard let row = try await decodeApps(rows).first else { throw StoreError.noRowReturned }
        return row
    }

    /// The app; with `forUpdate`, its row locked for a change of the app (`FOR NO KEY UPDATE`: changes
    /// of one app wait for each other, while user, audit and event writes, which only need the row to
    /// stay, go on; a change of a uniquely indexed column, such as the secret's hash, still takes the
    /// stronger lock when it writes).
    public static func app(_ db: PostgresConnection, appId: String, forUpdate: Bool = false, logger: Logger) async throws -> App? {
        let lock = forUpdate ? changeLock : ""
        let rows = try await db.query(
            "SELECT \(unescaped: appColumns) FROM apps WHERE app_id = \(appId)\(unescaped: lock)", logger: logger)
        return try await decodeApps(rows).first
    }

    /// The lock every change of an app takes on its row (see `app(forUpdate:)`).
    static let changeLock = " FOR NO KEY UPDATE"

    /// Locks the app row for a change of the app, as `app(forUpdate:)` does, by its internal id;
    /// false when the app is gone.
    static func lockForChange(_ db: PostgresConnection, ref: Int64, logger: Logger) async throws -> Bool {
        let rows = try await db.query("SELECT 1 FROM apps WHERE id = \(ref)\(unescaped: changeLock)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    public static func app(_ db: PostgresConnection, ref: Int64, logger: Logger) async throws -> App? {
        let rows = try await db.query("SELECT \(unescaped: appColumns) FROM apps WHERE id = \(ref)", logger: logger)
        return try await decodeApps(rows).first
    }

    /// Apps newest first. `before` is the internal id of the last app of the previous page; `namePrefix`
    /// matches the name (case-insensitive) or the appId. With `portalAccount`, only the apps that Portal
    /// account holds a role on.
    public static func listApps(
        _ db: PostgresConnection, namePrefix: String?, before: Int64?, limit: Int, portalAccount: UUID? = nil, logger: Logger
    ) async throws -> [App] {
        let cursor = before ?? Int64.max
        if let account = portalAccount {
            let pattern = likePrefix((namePrefix ?? "").lowercased())
            let rows = try await db.query(
                """
                SELECT \(unescaped: appColumns) FROM apps
                WHERE id < \(cursor) AND id IN (SELECT app_ref FROM portal_roles WHERE account_id = \(account))
                  AND (lower(name) LIKE \(pattern) OR app_id LIKE \(pattern))
                ORDER BY id DESC LIMIT \(limit)
                """, logger: logger)
            return try await decodeApps(rows)
        }
        if let prefix = namePrefix, !prefix.isEmpty {
            let pattern = likePrefix(prefix.lowercased())
            let rows = try await db.query(
                """
                SELECT \(unescaped: appColumns) FROM apps
                WHERE id < \(cursor) AND (lower(name) LIKE \(pattern) OR app_id LIKE \(pattern))
                ORDER BY id DESC LIMIT \(limit)
                """, logger: logger)
            return try await decodeApps(rows)
        }
        let rows = try await db.query(
            "SELECT \(unescaped: appColumns) FROM apps WHERE id < \(cursor) ORDER BY id DESC LIMIT \(limit)",
            logger: logger)
        return try await decodeApps(rows)
    }

    public static func updateApp(
        _ db: PostgresConnection, ref: Int64, name: String, status: String, settings: AppSettings,
        credentialsSealed: Data?, logger: Logger
    ) async throws -> App {
        let rows = try await db.query(
            """
            UPDATE apps SET name = \(name), status = \(status), settings = \(settings),
                credentials_sealed = \(credentialsSealed), updated_at = now()
            WHERE id = \(ref) RETURNING \(unescaped: appColumns)
            """, logger: logger)
        guard let row = try await decodeApps(rows).first else { throw StoreError.noRowReturned }
        return row
    }

    /// The appId and status of the app whose secret hashes to `hash`, if any.
    public static func appIdForSecretHash(_ db: PostgresConnection, hash: Data, logger: Logger) async throws -> (appId: String, status: String)? {
        let rows = try await db.query("SELECT app_id, status FROM apps WHERE app_secret_hash = \(hash)", logger: logger)
        for try await (appId, status) in rows.decode((String, String).self) { return (appId, status) }
        return nil
    }

    public static func setAppSecretHash(_ db: PostgresConnection, ref: Int64, hash: Data, logger: Logger) async throws {
        try await db.query(
            "UPDATE apps SET app_secret_hash = \(hash), updated_at = now() WHERE id = \(ref)", logger: logger)
    }

    /// Deletes the app row; the foreign keys cascade to everything it owns. Returns the internal id.
    /// The caller takes the locks first, in the order `AppAdministration.delete` explains: the app
    /// row (`app(forUpdate:)`), the users (`UserStore.deleteAll`), the webhook endpoints
    /// (`EventStore.deleteEndpoints`).
    public static func deleteApp(_ db: PostgresConnection, appId: String, logger: Logger) async throws -> Int64? {
        let rows = try await db.query("DELETE FROM apps WHERE app_id = \(appId) RETURNING id", logger: logger)
        for try await ref in rows.decode(Int64.self) { return ref }
        return nil
    }

    // MARK: app tokens

    public static func insertAppToken(
        _ db: PostgresConnection, ref: Int64, tokenHash: Data, tokenSealed: Data, origin: String, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO app_tokens (token_hash, app_ref, token_sealed, origin)
            VALUES (\(tokenHash), \(ref), \(tokenSealed), \(origin))
            """, logger: logger)
    }

    /// Ends the current token at once (`graceSeconds` zero) or after a grace period. Every older
    /// token still in its grace period is cut to the same deadline (never extended), so a second
    /// rotation ends all of them by then, and a rotation without grace ends them all at once.
    public static func retireCurrentAppToken(_ db: PostgresConnection, ref: Int64, graceSeconds: Int, logger: Logger) async throws {
        if graceSeconds > 0 {
            try await db.query(
                """
                UPDATE app_tokens SET expires_at = LEAST(COALESCE(expires_at, 'infinity'), now() + make_interval(secs => \(graceSeconds)::int))
                WHERE app_ref = \(ref)
                """, logger: logger)
        } else {
            try await db.query("DELETE FROM app_tokens WHERE app_ref = \(ref)", logger: logger)
        }
        try await db.query("DELETE FROM app_tokens WHERE app_ref = \(ref) AND expires_at <= now()", logger: logger)
    }

    public static func currentAppTokenSealed(_ db: PostgresConnection, ref: Int64, logger: Logger) async throws -> Data? {
        let rows = try await db.query(
            "SELECT token_sealed FROM app_tokens WHERE app_ref = \(ref) AND expires_at IS NULL", logger: logger)
        for try await sealed in rows.decode(Data.self) { return sealed }
        return nil
    }

    /// The app a token belongs to, when the token is current or still in its grace period, with the
    /// end of that grace period (nil for the current token).
    public static func appByTokenHash(_ db: PostgresConnection, tokenHash: Data, logger: Logger) async throws -> (App, Date?)? {
        let rows = try await db.query(
            """
            SELECT a.id, a.app_id, a.name, a.status, a.settings, a.app_secret_hash, a.credentials_sealed,
                a.created_at, a.updated_at, a.product, t.expires_at
            FROM app_tokens t JOIN apps a ON a.id = t.app_ref
            WHERE t.token_hash = \(tokenHash) AND (t.expires_at IS NULL OR t.expires_at > now())
            """, logger: logger)
        for try await (ref, appId, name, status, settings, secretHash, credentials, createdAt, updatedAt, product, expiresAt) in rows.decode(
            (Int64, String, String, String, AppSettings, Data, Data?, Date, Date, String, Date?).self)
        {
            let row = App(
                ref: ref, appId: appId, name: name, status: AppStatus(stored: status), settings: settings, appSecretHash: secretHash,
                credentialsSealed: credentials, createdAt: createdAt, updatedAt: updatedAt,
                product: AppProduct(rawValue: product) ?? .cosyncAuth)
            return (row, expiresAt)
        }
        return nil
    }

    // MARK: app keys

    public static func insertAppKey(
        _ db: PostgresConnection, ref: Int64, kid: String, publicKeyPEM: String, privateKeySealed: Data, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO app_keys (kid, app_ref, public_key_pem, private_key_sealed, active)
            VALUES (\(kid), \(ref), \(publicKeyPEM), \(privateKeySealed), true)
            """, logger: logger)
    }

    /// Makes the active key a verify-only key until `retireAfterHours` from now. The same deadline caps
    /// the older verify-only keys, so `0` (a compromised key) removes every old key at once.
    public static func deactivateSigningKey(_ db: PostgresConnection, ref: Int64, retireAfterHours: Int, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE app_keys SET active = false,
                retires_at = LEAST(COALESCE(retires_at, 'infinity'), now() + make_interval(hours => \(retireAfterHours)::int))
            WHERE app_ref = \(ref)
            """, logger: logger)
        try await db.query(
            "DELETE FROM app_keys WHERE app_ref = \(ref) AND NOT active AND retires_at <= now()", logger: logger)
    }

    public struct KeyRow: Sendable {
        public let kid: String
        public let publicKeyPEM: String
        public let privateKeySealed: Data
        public let active: Bool
        public let retiresAt: Date?
    }

    /// The signing key first, then the keys still valid for verification.
    public static func keys(_ db: PostgresConnection, ref: Int64, logger: Logger) async throws -> [KeyRow] {
        let rows = try await db.query(
            """
            SELECT kid, public_key_pem, private_key_sealed, active, retires_at FROM app_keys
            WHERE app_ref = \(ref) AND (active OR retires_at > now())
            ORDER BY active DESC, created_at DESC
            """, logger: logger)
        var keys: [KeyRow] = []
        for try await (kid, pem, sealed, active, retiresAt) in rows.decode((String, String, Data, Bool, Date?).self) {
            keys.append(KeyRow(kid: kid, publicKeyPEM: pem, privateKeySealed: sealed, active: active, retiresAt: retiresAt))
        }
        return keys
    }

    // MARK: sealed values (`cosyncauth doctor`)

    /// The newest `limit` app signing keys' sealed private keys, each with the label it was sealed under.
    static func sealedSigningKeys(_ db: PostgresConnection, limit: Int, logger: Logger) async throws -> [(label: String, sealed: Data)] {
        try await sealedValues(db.query(
            "SELECT 'app-key:' || kid, private_key_sealed FROM app_keys ORDER BY created_at DESC LIMIT \(limit)", logger: logger))
    }

    /// The newest `limit` sealed app tokens, each with the label it was sealed under.
    static func sealedTokens(_ db: PostgresConnection, limit: Int, logger: Logger) async throws -> [(label: String, sealed: Data)] {
        try await sealedValues(db.query(
            """
            SELECT 'app-token:' || a.app_id, t.token_sealed FROM app_tokens t JOIN apps a ON a.id = t.app_ref
            ORDER BY t.created_at DESC LIMIT \(limit)
            """, logger: logger))
    }

    /// The newest `limit` apps' sealed provider credentials, each with the label it was sealed under.
    static func sealedCredentials(_ db: PostgresConnection, limit: Int, logger: Logger) async throws -> [(label: String, sealed: Data)] {
        try await sealedValues(db.query(
            """
            SELECT 'app-credentials:' || app_id, credentials_sealed FROM apps WHERE credentials_sealed IS NOT NULL
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger))
    }

    static func sealedValues(_ rows: PostgresRowSequence) async throws -> [(label: String, sealed: Data)] {
        var found: [(label: String, sealed: Data)] = []
        for try await (label, sealed) in rows.decode((String, Data).self) { found.append((label, sealed)) }
        return found
    }

    /// Escapes LIKE metacharacters and appends `%`.
    static func likePrefix(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
    }
}

public enum StoreError: Error, CustomStringConvertible {
    case noRowReturned
    /// A stored value that the column's enum does not name (a newer server's row, or a hand edit).
    case unknownValue(column: String, value: String)
    public var description: String {
        switch self {
        case .noRowReturned: "the database returned no row"
        case .unknownValue(let column, let value): "\(column) holds \(value.debugDescription), which this server does not know"
        }
    }
}

extension PSQLError {
    /// SQLSTATE 23505 (unique violation), with the constraint name.
    public var uniqueViolationConstraint: String? {
        guard serverInfo?[.sqlState] == "23505" else { return nil }
        return serverInfo?[.constraintName] ?? ""
    }
}
