import Foundation
import Logging
import PostgresNIO

/// SQL for users. Every query is scoped by the owning app (`app_ref`).
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
        for try await row in rows {
            let c = try row.decode(
                (UUID, Int64, String, String?, String?, String, String, String, String?, String, String?, Bool, Bool, Bool,
                 Int, Date?, Date, Date, String?, Data?).self)
            let metadata = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(c.9.utf8))) ?? [:]
            users.append(
                User(
                    id: c.0, appRef: c.1, handle: c.2, userName: c.3, passwordHash: c.4, locale: c.5, status: c.6,
                    loginProvider: c.7, socialUserId: c.8, metaData: metadata, phone: c.10, phoneVerified: c.11,
                    twoFactorPhone: c.12, twoFactorGoogle: c.13, tokenVersion: c.14, lastLogin: c.15, createdAt: c.16,
                    updatedAt: c.17, jwtSubject: c.18, keptTokenHash: c.19))
        }
        return users
    }

    static func metadataText(_ metadata: [String: JSONValue]) throws -> String {
        String(decoding: try JSONCoding.encode(JSONValue.object(metadata)), as: UTF8.self)
    }

    public static func insert(
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
        try await IdentityStore.insertInitial(db, user: user, logger: logger)
        return user
    }

    public static func find(_ db: PostgresConnection, appRef: Int64, id: UUID, forUpdate: Bool = false, logger: Logger) async throws -> User? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM users WHERE app_ref = \(appRef) AND id = \(id)\(unescaped: lock)",
            logger: logger)
        return try await decode(rows).first
    }

    /// Users ordered by handle; `query` matches a handle or user-name prefix; `after` is the last
    /// handle of the previous page.
    public static func list(
        _ db: PostgresConnection, appRef: Int64, query: String?, after: String?, limit: Int, logger: Logger
    ) async throws -> [User] {
        let after = after ?? ""
        if let query, !query.isEmpty {
            let pattern = AppStore.likePrefix(query.lowercased())
            let rows = try await db.query(
                """
                SELECT \(unescaped: columns) FROM users
                WHERE app_ref = \(appRef) AND lower(handle) > \(after)
                  AND (lower(handle) LIKE \(pattern) OR lower(user_name) LIKE \(pattern))
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
            UPDATE users SET user_name = \(user.userName), locale = \(user.locale), status = \(user.status),
                metadata = \(metadata)::jsonb, token_version = \(user.tokenVersion), kept_token_hash = \(user.keptTokenHash),
                updated_at = now()
            WHERE app_ref = \(user.appRef) AND id = \(user.id) RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let updated = try await decode(rows).first else { throw StoreError.noRowReturned }
        return updated
    }

    /// Sets the password hash and ends every session and access token of the user.
    public static func setPasswordHash(_ db: PostgresConnection, appRef: Int64, id: UUID, hash: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE users SET password_hash = \(hash), token_version = token_version + 1, kept_token_hash = NULL, updated_at = now()
            WHERE app_ref = \(appRef) AND id = \(id) RETURNING id
            """, logger: logger)
        for try await _ in rows {
            try await SessionStore.deleteAll(db, userId: id, logger: logger)
            return true
        }
        return false
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
    /// old handle opens no session (`SessionStore.insert`).
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

    /// Ends every session and access token of a user (sign out everywhere, suspension); returns the
    /// ended sessions, or nil when the user does not exist.
    public static func revokeAll(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> [UUID]? {
        let rows = try await db.query(
            """
            UPDATE users SET token_version = token_version + 1, kept_token_hash = NULL
            WHERE app_ref = \(appRef) AND id = \(id) RETURNING id
            """, logger: logger)
        for try await _ in rows { return try await SessionStore.deleteAll(db, userId: id, logger: logger) }
        return nil
    }

    public static func delete(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> String? {
        let rows = try await db.query(
            "DELETE FROM users WHERE app_ref = \(appRef) AND id = \(id) RETURNING handle", logger: logger)
        for try await handle in rows.decode(String.self) { return handle }
        return nil
    }
}
