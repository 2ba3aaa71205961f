import Foundation
import Logging
import PostgresNIO

/// Pending signups and invites (`signups`, `invites`): a handle waiting for its code. Every query is
/// scoped by the app (`app_ref`) or by the row's id.
enum PendingStore {
    struct Pending: Sendable {
        let id: UUID
        let handle: String
        let passwordHash: String?
        let codeSealed: Data?
        let attempts: Int
        let metadata: [String: JSONValue]
        let locale: String
        let status: String
        let expiresAt: Date
        let senderHandle: String?
        let senderUserId: String?
    }

    /// The pending signup or invite of a handle (a handle has at most one pending signup); locked for
    /// the rest of the transaction unless `lock` is false.
    static func pending(
        _ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, lock: Bool = true, logger: Logger
    ) async throws -> Pending? {
        try await pendingRows(db, kind, appRef: appRef, handle: handle, lock: lock, logger: logger).first
    }

    /// Every pending row of a handle, oldest first, or only the invite of one sender (a handle has at
    /// most one pending invite per sender, <doc:EndUserAPI> §5.8 step 7); locked unless `lock` is false.
    static func pendingRows(
        _ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, sender: String? = nil, lock: Bool = true,
        logger: Logger
    ) async throws -> [Pending] {
        let senders = kind == .invites ? "sender_handle, sender_user_id" : "NULL::text, NULL::text"
        let password = kind == .signups ? "password_hash" : "NULL::text"
        let senderFilter = kind == .invites && sender != nil ? " AND lower(sender_handle) = lower($3)" : ""
        var binds = PostgresBindings()
        binds.append(appRef)
        binds.append(handle)
        if !senderFilter.isEmpty { binds.append(sender ?? "") }
        let rows = try await db.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT id, handle, \(password), code_sealed, code_attempts, metadata::text, locale, status, expires_at, \(senders)
                    FROM \(kind.rawValue)
                    WHERE app_ref = $1 AND lower(handle) = $2 AND status = 'pending'\(senderFilter)
                    ORDER BY created_at, id\(lock ? " FOR UPDATE" : "")
                    """, binds: binds), logger: logger)
        var found: [Pending] = []
        for try await c in rows.decode((UUID, String, String?, Data?, Int, String, String, String, Date, String?, String?).self) {
            let metadata = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(c.5.utf8))) ?? [:]
            found.append(Pending(
                id: c.0, handle: c.1, passwordHash: c.2, codeSealed: c.3, attempts: c.4, metadata: metadata, locale: c.6,
                status: c.7, expiresAt: c.8, senderHandle: c.9, senderUserId: c.10))
        }
        return found
    }

    static func hasVerified(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "SELECT 1 FROM \(unescaped: kind.rawValue) WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'verified' LIMIT 1",
            logger: logger)
        for try await _ in rows { return true }
        return false
    }

    static func insertSignup(
        _ db: PostgresConnection, id: UUID, appRef: Int64, handle: String, passwordHash: String, codeSealed: Data,
        metadata: [String: JSONValue], locale: String, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query(
            """
            INSERT INTO signups (id, app_ref, handle, password_hash, code_sealed, metadata, locale, expires_at)
            VALUES (\(id), \(appRef), \(handle), \(passwordHash), \(codeSealed), \(text)::jsonb, \(locale),
                    now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    static func insertInvite(
        _ db: PostgresConnection, id: UUID, appRef: Int64, handle: String, senderHandle: String, senderUserId: String, codeSealed: Data,
        metadata: [String: JSONValue], locale: String, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let text = try UserStore.metadataText(metadata)
        try await db.query(
            """
            INSERT INTO invites (id, app_ref, handle, sender_handle, sender_user_id, code_sealed, metadata, locale, expires_at)
            VALUES (\(id), \(appRef), \(handle), \(senderHandle), \(senderUserId), \(codeSealed), \(text)::jsonb, \(locale),
                    now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// Closes a dead pending signup or invite (too many wrong guesses, or expired) before a new one
    /// takes its place.
    static func markExpired(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET status = 'expired', code_sealed = NULL, updated_at = now() WHERE id = \(id)",
            logger: logger)
    }

    static func countFailedCode(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET code_attempts = code_attempts + 1, updated_at = now() WHERE id = \(id)",
            logger: logger)
    }

    /// A wrong guess at a handle's invite codes counts against every pending invite of the handle.
    static func countFailedInviteCode(_ db: PostgresConnection, appRef: Int64, handle: String, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE invites SET code_attempts = code_attempts + 1, updated_at = now()
            WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'pending'
            """, logger: logger)
    }

    /// Closes the other pending invites of a handle once one of them was accepted.
    static func closeOtherInvites(_ db: PostgresConnection, appRef: Int64, handle: String, keep id: UUID, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE invites SET status = 'expired', code_sealed = NULL, updated_at = now()
            WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'pending' AND id <> \(id)
            """, logger: logger)
    }

    static func markVerified(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, id: UUID, logger: Logger) async throws {
        try await db.query(
            "UPDATE \(unescaped: kind.rawValue) SET status = 'verified', code_sealed = NULL, updated_at = now() WHERE id = \(id)",
            logger: logger)
    }
}
