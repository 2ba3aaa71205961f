import Foundation
import Logging
import PostgresNIO

/// SQL of identities. The unique indexes hold the rules: one (kind, subject) per app, one identity of
/// each kind per user (passkeys aside).
public enum IdentityStore {
    static let columns = "id, user_id, kind, subject, email, created_at, last_used_at"

    static func decode(_ rows: PostgresRowSequence) async throws -> [Identity] {
        var found: [Identity] = []
        for try await c in rows.decode((UUID, UUID, String, String, String?, Date, Date?).self) {
            // The column's CHECK admits exactly the IdentityKind cases.
            guard let kind = IdentityKind(rawValue: c.2) else { throw StoreError.unknownValue(column: "identities.kind", value: c.2) }
            found.append(Identity(id: c.0, userId: c.1, kind: kind, subject: c.3, email: c.4, createdAt: c.5, lastUsedAt: c.6))
        }
        return found
    }

    static func insert(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, kind: IdentityKind, subject: String, email: String? = nil, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO identities (app_ref, user_id, kind, subject, email)
            VALUES (\(appRef), \(userId), \(kind.rawValue), \(subject), \(email))
            """, logger: logger)
    }

    /// Records the password identity of a user who has a password now (a reset can give one to an
    /// account that had none, e.g. an anonymous one); nothing when it exists.
    static func ensurePassword(_ db: PostgresConnection, appRef: Int64, userId: UUID, handle: String, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO identities (app_ref, user_id, kind, subject) VALUES (\(appRef), \(userId), 'password', \(handle.lowercased()))
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// The identity a new account is created with: the password's (subject: the handle, lower-cased)
    /// or, without a password, the anonymous handle's.
    static func insertInitial(_ db: PostgresConnection, user: User, logger: Logger) async throws {
        if user.passwordHash != nil {
            try await insert(db, appRef: user.appRef, userId: user.id, kind: .password, subject: user.handle.lowercased(), logger: logger)
        } else if user.handle.contains("ANON_") {
            try await insert(db, appRef: user.appRef, userId: user.id, kind: .anonymous, subject: user.handle, logger: logger)
        }
    }

    static func list(_ db: PostgresConnection, appRef: Int64, userId: UUID, logger: Logger) async throws -> [Identity] {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM identities WHERE app_ref = \(appRef) AND user_id = \(userId) ORDER BY created_at, id",
            logger: logger)
        return try await decode(rows)
    }

    /// The user holding (kind, subject) in the app.
    static func user(_ db: PostgresConnection, appRef: Int64, kind: IdentityKind, subject: String, logger: Logger) async throws -> User? {
        let rows = try await db.query(
            """
            SELECT \(unescaped: UserStore.qualifiedColumns("u")) FROM identities i JOIN users u ON u.id = i.user_id
            WHERE i.app_ref = \(appRef) AND i.kind = \(kind.rawValue) AND i.subject = \(subject)
            """, logger: logger)
        return try await UserStore.decode(rows).first
    }

    static func has(_ db: PostgresConnection, userId: UUID, kind: IdentityKind, subject: String? = nil, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            SELECT 1 FROM identities WHERE user_id = \(userId) AND kind = \(kind.rawValue)
              AND (\(subject)::text IS NULL OR subject = \(subject))
            LIMIT 1
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func delete(_ db: PostgresConnection, userId: UUID, identityId: UUID, logger: Logger) async throws -> Identity? {
        let rows = try await db.query(
            "DELETE FROM identities WHERE user_id = \(userId) AND id = \(identityId) RETURNING \(unescaped: columns)", logger: logger)
        return try await decode(rows).first
    }

    static func deleteKind(_ db: PostgresConnection, userId: UUID, kind: IdentityKind, logger: Logger) async throws {
        try await db.query("DELETE FROM identities WHERE user_id = \(userId) AND kind = \(kind.rawValue)", logger: logger)
    }

    static func count(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int FROM identities WHERE user_id = \(userId)", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    static func touch(_ db: PostgresConnection, userId: UUID, kind: IdentityKind, logger: Logger) async throws {
        try await db.query(
            "UPDATE identities SET last_used_at = now() WHERE user_id = \(userId) AND kind = \(kind.rawValue)", logger: logger)
    }

    /// Records a use of the identity of the passkey `passkeyId` (a verified assertion).
    static func touchPasskey(_ db: PostgresConnection, passkeyId: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE identities SET last_used_at = now() WHERE id = (SELECT identity_id FROM passkeys WHERE id = \(passkeyId))", logger: logger)
    }

    /// Deletes the user's passkey identities (their passkeys go with them by cascade); returns how many.
    static func deletePasskeys(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws -> Int {
        let rows = try await db.query("DELETE FROM identities WHERE user_id = \(userId) AND kind = 'passkey' RETURNING 1", logger: logger)
        var removed = 0
        for try await _ in rows { removed += 1 }
        return removed
    }

    /// The identities of imported users, after a batch of them was written (see sql/0010): the same
    /// rules as the migration's backfill, for the users named by (app_ref, legacy_id) in `keys`.
    public static func syncImported(_ db: PostgresConnection, keys: String, logger: Logger) async throws {
        try await db.query(
            """
            WITH batch AS (
                SELECT u.* FROM users u JOIN jsonb_to_recordset(\(keys)::jsonb) AS k(app_ref bigint, legacy_id text)
                  ON u.app_ref = k.app_ref AND u.legacy_id = k.legacy_id)
            INSERT INTO identities (app_ref, user_id, kind, subject, created_at)
            SELECT app_ref, id, login_provider, social_user_id, created_at FROM batch
                WHERE login_provider IN ('apple', 'google') AND social_user_id IS NOT NULL
            UNION ALL
            SELECT app_ref, id, 'anonymous', handle, created_at FROM batch
                WHERE login_provider = '' AND social_user_id IS NULL AND handle LIKE '%ANON\\_%'
            UNION ALL
            SELECT app_ref, id, 'password', lower(handle), created_at FROM batch WHERE password_hash IS NOT NULL
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }
}
