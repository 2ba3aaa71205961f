import Foundation
import Logging
import PostgresNIO

/// The SQL on `users`, and only here: lookups, inserts and every write of a user row. Every query
/// is scoped by the owning app (`app_ref`) or by the user's id.
public enum UserStore {
    static let columns = """
        id, app_ref, handle, user_name, password_hash, locale, status, login_provider, social_user_id, \
        metadata::text, phone, phone_verified, two_factor_phone, two_factor_google, token_version, last_login, \
        created_at, updated_at, jwt_subject, kept_token_hash
        """

    /// `columns` with every column taken from the table alias `alias` (for joins).
    static func qualifiedColumns(_ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespacesAndNewlines))" }.joined(separator: ", ")
    }

    static func decode(_ rows: PostgresRowSequence) async throws -> [User] {
        var users: [User] = []
        for try await row in rows { users.append(try user(from: row)) }
        return users
    }

    /// One row of `columns`.
    static func user(from row: PostgresRow) throws -> User {
        let c = try row.decode(
            (UUID, Int64, String, String?, String?, String, String, String, String?, String, String?, Bool, Bool, Bool,
             Int, Date?, Date, Date, String?, Data?).self)
        let metadata = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(c.9.utf8))) ?? [:]
        return User(
            id: c.0, appRef: c.1, handle: c.2, userName: c.3, passwordHash: c.4, locale: c.5, status: UserStatus(stored: c.6),
            loginProvider: c.7, socialUserId: c.8, metaData: metadata, phone: c.10, phoneVerified: c.11,
            twoFactorPhone: c.12, twoFactorGoogle: c.13, tokenVersion: c.14, lastLogin: c.15, createdAt: c.16,
            updatedAt: c.17, jwtSubject: c.18, keptTokenHash: c.19)
    }

    static func metadataText(_ metadata: [String: JSONValue]) throws -> String {
        String(decoding: try JSONCoding.encode(JSONValue.object(metadata)), as: UTF8.self)
    }

    /// Inserts a user row, without its first identity: `UserWrites.insert` inserts both.
    static func insertRow(
        _ db: PostgresConnection, appRef: Int64, handle: String, userName: String?, passwordHash: String?,
        locale: String, metaData: [String: JSONValue], logger: Logger
    ) async throws -> User {
        let metadata = try metadataText(metaData)
        let rows = try await db.query(
            """
            INSERT INTO users (app_ref, handle, user_name, password_hash, locale, metadata)
            VALUES (\(appRef), \(handle), \(userName), \(passwordHash), \(locale), \(metadata)::jsonb)
            RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let user = try await decode(rows).first else { throw StoreError.noRowReturned }
        return user
    }

    /// Inserts an AppKey user with a chosen id (the id its signup named), signed in now. Its profile
    /// and identity are the caller's (`AppKeyFlows.insertUser`).
    static func insertAppKeyUser(
        _ db: PostgresConnection, appRef: Int64, id: UUID, handle: String, locale: String, loginProvider: String, logger: Logger
    ) async throws -> User {
        let rows = try await db.query(
            """
            INSERT INTO users (id, app_ref, handle, locale, login_provider, metadata, last_login)
            VALUES (\(id), \(appRef), \(handle), \(locale), \(loginProvider), '{}'::jsonb, now())
            RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let user = try await decode(rows).first else { throw StoreError.noRowReturned }
        return user
    }

    public static func find(_ db: PostgresConnection, appRef: Int64, id: UUID, forUpdate: Bool = false, logger: Logger) async throws -> User? {
        try await find(db, appRef: appRef, id: id, lock: forUpdate ? " FOR UPDATE" : "", logger: logger)
    }

    private static func find(_ db: PostgresConnection, appRef: Int64, id: UUID, lock: String, logger: Logger) async throws -> User? {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM users WHERE app_ref = \(appRef) AND id = \(id)\(unescaped: lock)",
            logger: logger)
        return try await decode(rows).first
    }

    /// Users ordered by handle; `query` matches a handle or user-name prefix, or is the user id; `after` is the last
    /// handle of the previous page.
    public static func list(
        _ db: PostgresConnection, appRef: Int64, query: String?, after: String?, limit: Int, logger: Logger
    ) async throws -> [User] {
        let after = after ?? ""
        if let query, !query.isEmpty {
            let pattern = AppStore.likePrefix(query.lowercased())
            // A query that is a user id finds that user too (the handle order and cursor stay).
            let id = UUID(uuidString: query)
            let rows = try await db.query(
                """
                SELECT \(unescaped: columns) FROM users
                WHERE app_ref = \(appRef) AND lower(handle) > \(after)
                  AND (lower(handle) LIKE \(pattern) OR lower(user_name) LIKE \(pattern) OR id = \(id))
                ORDER BY lower(handle) LIMIT \(limit)
                """, logger: logger)
            return try await decode(rows)
        }
        let rows = try await db.query(
            """
            SELECT \(unescaped: columns) FROM users WHERE app_ref = \(appRef) AND lower(handle) > \(after)
            ORDER BY lower(handle) LIMIT \(limit)
            """, logger: logger)
        return try await decode(rows)
    }

    public static func update(_ db: PostgresConnection, user: User, logger: Logger) async throws -> User {
        let metadata = try metadataText(user.metaData)
        let rows = try await db.query(
            """
            UPDATE users SET user_name = \(user.userName), locale = \(user.locale), status = \(user.status.rawValue),
                metadata = \(metadata)::jsonb, token_version = \(user.tokenVersion), kept_token_hash = \(user.keptTokenHash),
                updated_at = now()
            WHERE app_ref = \(user.appRef) AND id = \(user.id) RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let updated = try await decode(rows).first else { throw StoreError.noRowReturned }
        return updated
    }

    /// Removes the password (its identity was detached): password logins fail from now on, and the
    /// session-less tokens end.
    static func clearPassword(_ db: PostgresConnection, id: UUID, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE users SET password_hash = NULL, token_version = token_version + 1, kept_token_hash = NULL, updated_at = now()
            WHERE id = \(id)
            """, logger: logger)
    }

    /// An anonymous account becomes permanent: new handle, and a password hash or a provider. Its
    /// sessions stay; the token version moves on, so that an anonymous sign-in still running with the
    /// old handle opens no session (`SessionGrant.open`).
    static func upgrade(
        _ db: PostgresConnection, id: UUID, handle: String, passwordHash: String?, loginProvider: String, logger: Logger
    ) async throws -> User {
        let rows = try await db.query(
            """
            UPDATE users SET handle = \(handle), password_hash = \(passwordHash), login_provider = \(loginProvider),
                token_version = token_version + 1, kept_token_hash = NULL, updated_at = now()
            WHERE id = \(id) RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let user = try await decode(rows).first else { throw StoreError.noRowReturned }
        return user
    }

    /// Moves a user's token version on, which ends its session-less access tokens; false when the
    /// user does not exist. It does not end sessions: `UserWrites.revokeAll` does both, in order.
    static func bumpTokenVersion(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE users SET token_version = token_version + 1, kept_token_hash = NULL
            WHERE app_ref = \(appRef) AND id = \(id) RETURNING id
            """, logger: logger)
        var found = false
        for try await _ in rows { found = true }
        return found
    }

    public static func delete(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> String? {
        let rows = try await db.query(
            "DELETE FROM users WHERE app_ref = \(appRef) AND id = \(id) RETURNING handle", logger: logger)
        for try await handle in rows.decode(String.self) { return handle }
        return nil
    }

    /// Deletes every user of the app `appId`, each row as a user write takes it (an app's deletion
    /// runs it before it deletes the app row: `AppAdministration.delete`).
    static func deleteAll(_ db: PostgresConnection, appId: String, logger: Logger) async throws {
        try await db.query(
            "DELETE FROM users WHERE app_ref = (SELECT id FROM apps WHERE app_id = \(appId))", logger: logger)
    }

    // MARK: lookups and the end-user writes

    /// The user whose handle or user name is `identifier` (lower-cased). Every password login runs
    /// it: a prepared statement (parsed and planned once per connection) unless it locks.
    static func user(_ db: PostgresConnection, appRef: Int64, handleOrUserName identifier: String, forUpdate: Bool = false, logger: Logger) async throws -> User? {
        if !forUpdate {
            for try await user in try await db.execute(ByIdentifier(appRef: appRef, identifier: identifier), logger: logger) { return user }
            return nil
        }
        let rows = try await db.query(
            """
            SELECT \(unescaped: columns) FROM users
            WHERE app_ref = \(appRef) AND (lower(handle) = \(identifier) OR lower(user_name) = \(identifier))
            ORDER BY (lower(handle) = \(identifier)) DESC LIMIT 1 FOR UPDATE
            """, logger: logger)
        return try await decode(rows).first
    }

    struct ByIdentifier: PostgresPreparedStatement {
        static let sql = """
            SELECT \(UserStore.columns) FROM users
            WHERE app_ref = $1 AND (lower(handle) = $2 OR lower(user_name) = $2)
            ORDER BY (lower(handle) = $2) DESC LIMIT 1
            """
        typealias Row = User
        let appRef: Int64
        let identifier: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(appRef)
            bindings.append(identifier)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> User { try UserStore.user(from: row) }
    }

    static func user(_ db: PostgresConnection, appRef: Int64, handle: String, exact: Bool = false, forUpdate: Bool = false, logger: Logger) async throws -> User? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        // The exact form also names lower(handle), so both use the (app_ref, lower(handle)) index
        // (a bare `handle = $2` scanned every user of the app).
        let condition = exact ? "lower(handle) = lower($2) AND handle = $2" : "lower(handle) = lower($2)"
        var binds = PostgresBindings()
        binds.append(appRef)
        binds.append(handle)
        let rows = try await db.query(
            PostgresQuery(unsafeSQL: "SELECT \(columns) FROM users WHERE app_ref = $1 AND \(condition)\(lock)", binds: binds),
            logger: logger)
        return try await decode(rows).first
    }

    /// The imported user (one with a `legacy_id`) of a handle: the only kind a legacy access token
    /// can name. One query.
    static func importedUser(_ db: PostgresConnection, appRef: Int64, handle: String, logger: Logger) async throws -> User? {
        let rows = try await db.query(
            """
            SELECT \(unescaped: columns) FROM users
            WHERE app_ref = \(appRef) AND lower(handle) = lower(\(handle)) AND legacy_id IS NOT NULL
            """, logger: logger)
        return try await decode(rows).first
    }

    /// Locks the user row (`FOR NO KEY UPDATE`, held to the end of the transaction) if the user is
    /// still there, active, at `tokenVersion`; false when not (deleted, suspended or revoked since the
    /// caller was resolved). A transaction that writes rows hanging off the user (passkeys, sessions,
    /// profiles, challenges) takes this lock first:
    /// - an account deletion locks the user row before its cascade reaches those rows, so taking them
    ///   in the other order can deadlock (40P01);
    /// - a child row inserted for a user deleted meanwhile fails its foreign key (23503); with the
    ///   lock held, the deletion waits, or has happened and this answers false.
    static func lockLive(_ db: PostgresConnection, appRef: Int64, userId: UUID, tokenVersion: Int, logger: Logger) async throws -> Bool {
        let current = try await db.query(
            """
            SELECT 1 FROM users
            WHERE id = \(userId) AND app_ref = \(appRef) AND token_version = \(tokenVersion) AND status = 'active'
            FOR NO KEY UPDATE
            """, logger: logger)
        for try await _ in current { return true }
        return false
    }

    /// The user, its row locked (`FOR NO KEY UPDATE`) for the rest of the transaction, as it is now;
    /// nil when the user is gone. A write that follows a lookup made outside its transaction takes it
    /// first, so a user deleted (or suspended) since is refused instead of "updated" (zero rows), and
    /// no child row fails its foreign key.
    static func lockExisting(_ db: PostgresConnection, appRef: Int64, userId: UUID, logger: Logger) async throws -> User? {
        try await find(db, appRef: appRef, id: userId, lock: " FOR NO KEY UPDATE", logger: logger)
    }

    /// Marks the user row changed (a change stored beside it, such as its AppKey profile).
    static func touchUpdatedAt(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("UPDATE users SET updated_at = now() WHERE id = \(userId)", logger: logger)
    }

    static func touchLastLogin(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("UPDATE users SET last_login = now() WHERE id = \(userId)", logger: logger)
    }

    /// Sets the password. The token version moves on, which ends the session-less tokens, except the
    /// one whose hash is `keepTokenHash` (the caller's, when it has no session). `disableSecondFactor`
    /// (a reset) also turns 2FA off. False when the app has no such user. The one writer of a
    /// password; `UserWrites.setPassword` also drops the login challenges and ends the sessions.
    static func setPassword(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, hash: String, disableSecondFactor: Bool, keepTokenHash: Data?, logger: Logger
    ) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE users SET password_hash = \(hash), token_version = token_version + 1, kept_token_hash = \(keepTokenHash),
                two_factor_phone = two_factor_phone AND NOT \(disableSecondFactor),
                two_factor_google = two_factor_google AND NOT \(disableSecondFactor),
                totp_secret_sealed = CASE WHEN \(disableSecondFactor) THEN NULL ELSE totp_secret_sealed END,
                totp_last_step = CASE WHEN \(disableSecondFactor) THEN 0 ELSE totp_last_step END,
                updated_at = now()
            WHERE app_ref = \(appRef) AND id = \(userId) RETURNING id
            """, logger: logger)
        var found = false
        for try await _ in rows { found = true }
        return found
    }

    /// Replaces a legacy raw-MD5 hash with bcrypt after a successful login (no token revocation).
    static func upgradePasswordHash(_ db: PostgresConnection, userId: UUID, from old: String, to new: String, logger: Logger) async throws {
        try await db.query(
            "UPDATE users SET password_hash = \(new) WHERE id = \(userId) AND password_hash = \(old)", logger: logger)
    }

    static func setMetadata(_ db: PostgresConnection, userId: UUID, metadata: [String: JSONValue], logger: Logger) async throws {
        let text = try metadataText(metadata)
        try await db.query("UPDATE users SET metadata = \(text)::jsonb, updated_at = now() WHERE id = \(userId)", logger: logger)
    }

    static func setLocale(_ db: PostgresConnection, userId: UUID, locale: String, logger: Logger) async throws {
        try await db.query("UPDATE users SET locale = \(locale), updated_at = now() WHERE id = \(userId)", logger: logger)
    }

    /// Sets the user name once; false when the user already had one.
    static func setUserName(_ db: PostgresConnection, userId: UUID, userName: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "UPDATE users SET user_name = \(userName), updated_at = now() WHERE id = \(userId) AND user_name IS NULL RETURNING id",
            logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// True when `name` is a user name or a handle in the app.
    static func identifierTaken(_ db: PostgresConnection, appRef: Int64, name: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            SELECT 1 FROM users WHERE app_ref = \(appRef) AND (lower(user_name) = \(name) OR lower(handle) = \(name)) LIMIT 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }
}
