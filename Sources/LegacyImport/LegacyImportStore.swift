import CosyncAuth
import Foundation
import Logging
import PostgresNIO

/// SQL of the CosyncJWT import. Rows carry `legacy_id` and `legacy_fingerprint` (SHA-256 of the
/// source document): an upsert changes a row only when its fingerprint differs, so a rerun leaves
/// the database byte-identical. A batch of users travels by COPY into a staging table and is written by
/// one INSERT … SELECT; the small per-row keys its checks need travel as jsonb arrays (`jsonb_to_recordset`).
public enum LegacyImportStore {
    // MARK: apps

    /// The app with this appId: its ref and whether an import created it (nil: no such app).
    public static func appOrigin(_ db: PostgresConnection, appId: String, logger: Logger) async throws -> (ref: Int64, imported: Bool, fingerprint: Data?)? {
        let rows = try await db.query("SELECT id, legacy_fingerprint FROM apps WHERE app_id = \(appId)", logger: logger)
        for try await (ref, fingerprint) in rows.decode((Int64, Data?).self) { return (ref, fingerprint != nil, fingerprint) }
        return nil
    }

    /// Inserts or updates an imported app; returns its ref. Token and key rows are added when new.
    public static func upsertApp(
        _ db: PostgresConnection, appId: String, name: String, status: String, settings: AppSettings, appSecretHash: Data,
        credentialsSealed: Data?, createdAt: Date, updatedAt: Date, fingerprint: Data, logger: Logger
    ) async throws -> Int64 {
        let settingsJSON = String(decoding: try JSONCoding.encode(settings), as: UTF8.self)
        let rows = try await db.query(
            """
            INSERT INTO apps (app_id, name, status, settings, app_secret_hash, credentials_sealed, created_at, updated_at, legacy_fingerprint)
            VALUES (\(appId), \(name), \(status), \(settingsJSON)::jsonb, \(appSecretHash), \(credentialsSealed), \(createdAt), \(updatedAt), \(fingerprint))
            ON CONFLICT (app_id) DO UPDATE SET name = excluded.name, status = excluded.status, settings = excluded.settings,
                app_secret_hash = excluded.app_secret_hash, credentials_sealed = excluded.credentials_sealed,
                created_at = excluded.created_at, updated_at = excluded.updated_at, legacy_fingerprint = excluded.legacy_fingerprint
            WHERE apps.legacy_fingerprint IS DISTINCT FROM excluded.legacy_fingerprint
            RETURNING id
            """, logger: logger)
        for try await ref in rows.decode(Int64.self) { return ref }
        guard let existing = try await appOrigin(db, appId: appId, logger: logger) else { throw StoreError.noRowReturned }
        return existing.ref
    }

    /// What changed on this server in an imported app since the import last wrote it (empty: nothing):
    /// its name, status, settings, secret or credentials (`legacy_state`, sql/0006), or a current app
    /// token issued here (a rotation).
    public static func localAppChanges(_ db: PostgresConnection, ref: Int64, logger: Logger) async throws -> [String] {
        let rows = try await db.query(
            """
            SELECT a.legacy_state IS DISTINCT FROM legacy_app_state(a), a.status,
                   EXISTS (SELECT 1 FROM app_tokens t WHERE t.app_ref = a.id AND t.expires_at IS NULL AND t.origin <> 'imported')
            FROM apps a WHERE a.id = \(ref)
            """, logger: logger)
        var changes: [String] = []
        for try await (edited, status, rotated) in rows.decode((Bool, String, Bool).self) {
            if edited { changes.append("name, status, settings, secret or credentials edited; status now '\(status)'") }
            if rotated { changes.append("app token rotated") }
        }
        return changes
    }

    /// The legacy app token, matched by hash like every app token; kept as the current token.
    public static func addImportedToken(_ db: PostgresConnection, ref: Int64, tokenHash: Data, tokenSealed: Data, logger: Logger) async throws {
        let rows = try await db.query("SELECT 1 FROM app_tokens WHERE token_hash = \(tokenHash)", logger: logger)
        for try await _ in rows { return }
        try await db.query("UPDATE app_tokens SET expires_at = now() WHERE app_ref = \(ref) AND expires_at IS NULL", logger: logger)
        try await db.query(
            "INSERT INTO app_tokens (token_hash, app_ref, token_sealed, origin) VALUES (\(tokenHash), \(ref), \(tokenSealed), 'imported')",
            logger: logger)
    }

    /// The legacy key pair as the signing key of an app imported for the first time. An app that has
    /// any key here keeps its keys: a re-import never revives a key rotated out or revoked on this
    /// server (a legacy app never changed its key pair, so there is nothing newer to bring).
    public static func addImportedKey(_ db: PostgresConnection, ref: Int64, kid: String, publicKeyPEM: String, privateKeySealed: Data, logger: Logger) async throws {
        let rows = try await db.query("SELECT 1 FROM app_keys WHERE app_ref = \(ref) LIMIT 1", logger: logger)
        for try await _ in rows { return }
        try await db.query(
            """
            INSERT INTO app_keys (kid, app_ref, public_key_pem, private_key_sealed, active)
            VALUES (\(kid), \(ref), \(publicKeyPEM), \(privateKeySealed), true)
            """, logger: logger)
    }

    // MARK: checkpoints

    public static func checkpoint(_ db: PostgresConnection, source: String, collection: String, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "SELECT rows_done FROM legacy_import_checkpoints WHERE source = \(source) AND collection = \(collection)", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    public static func setCheckpoint(_ db: PostgresConnection, source: String, collection: String, rowsDone: Int, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO legacy_import_checkpoints (source, collection, rows_done) VALUES (\(source), \(collection), \(rowsDone))
            ON CONFLICT (source, collection) DO UPDATE SET rows_done = excluded.rows_done
            """, logger: logger)
    }

    // MARK: users

    /// Existing rows that an incoming batch collides with on a unique key. `keys` is a jsonb array of
    /// `{app_ref, handle, user_name, phone, provider, social}` (lower-cased where the index is).
    public struct Collision: Sendable {
        public let kind: String  // handle | userName | phone | social
        public let appRef: Int64
        public let key: String
        public let legacyId: String?
        public let updatedAt: Date
        /// An imported row changed on this server since the import wrote it.
        public let locallyChanged: Bool
    }

    public static func userCollisions(_ db: PostgresConnection, keys: String, logger: Logger) async throws -> [Collision] {
        let rows = try await db.query(
            """
            WITH k AS (SELECT * FROM jsonb_to_recordset(\(keys)::jsonb) AS k(app_ref bigint, handle text, user_name text, phone text, provider text, social text))
            SELECT 'handle', u.app_ref, lower(u.handle), u.legacy_id, u.updated_at,
                   u.legacy_id IS NOT NULL AND u.legacy_state IS DISTINCT FROM legacy_user_state(u)
                FROM users u JOIN k ON u.app_ref = k.app_ref AND lower(u.handle) = k.handle
            UNION ALL
            SELECT 'userName', u.app_ref, lower(u.user_name), u.legacy_id, u.updated_at, false FROM users u JOIN k ON u.app_ref = k.app_ref AND lower(u.user_name) = k.user_name
            UNION ALL
            SELECT 'phone', u.app_ref, u.phone, u.legacy_id, u.updated_at, false FROM users u JOIN k ON u.app_ref = k.app_ref AND u.phone = k.phone AND u.phone_verified
            UNION ALL
            SELECT 'social', u.app_ref, u.login_provider || ':' || u.social_user_id, u.legacy_id, u.updated_at, false FROM users u
                JOIN k ON u.app_ref = k.app_ref AND u.login_provider = k.provider AND u.social_user_id = k.social
            """, logger: logger)
        var found: [Collision] = []
        for try await (kind, ref, key, legacyId, updatedAt, changed) in rows.decode((String, Int64, String, String?, Date, Bool).self) {
            found.append(Collision(kind: kind, appRef: ref, key: key, legacyId: legacyId, updatedAt: updatedAt, locallyChanged: changed))
        }
        return found
    }

    /// Imported users of a batch that this server changed since the import wrote them, and deleted
    /// ones (tombstones, sql/0006). `rows`: jsonb `[{app_ref, legacy_id, fingerprint}]` (fingerprint in
    /// base64); a row whose fingerprint is the stored one is left out (the import would not touch it).
    /// Keyed "app_ref|legacy_id"; the value is what happened ("deleted", or the row's status).
    public static func localUserChanges(_ db: PostgresConnection, rows: String, logger: Logger) async throws -> [String: (deleted: Bool, status: String)] {
        let result = try await db.query(
            """
            WITH k AS (SELECT * FROM jsonb_to_recordset(\(rows)::jsonb) AS k(app_ref bigint, legacy_id text, fingerprint text))
            SELECT k.app_ref, k.legacy_id, true, '' FROM k
                JOIN legacy_import_tombstones t ON t.app_ref = k.app_ref AND t.collection = 'users' AND t.legacy_id = k.legacy_id AND t.reason = 'deleted'
                WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.app_ref = k.app_ref AND u.legacy_id = k.legacy_id)
            UNION ALL
            SELECT k.app_ref, k.legacy_id, false, u.status FROM k JOIN users u ON u.app_ref = k.app_ref AND u.legacy_id = k.legacy_id
                WHERE u.legacy_fingerprint IS DISTINCT FROM decode(k.fingerprint, 'base64') AND u.legacy_state IS DISTINCT FROM legacy_user_state(u)
            """, logger: logger)
        var found: [String: (deleted: Bool, status: String)] = [:]
        for try await (ref, legacyId, deleted, status) in result.decode((Int64, String, Bool, String).self) {
            found["\(ref)|\(legacyId)"] = (deleted, status)
        }
        return found
    }

    /// Forgets that imported users were deleted here (an import that re-creates them with
    /// --overwrite-local-changes). `ids`: jsonb `[{app_ref, legacy_id}]`.
    public static func clearUserTombstones(_ db: PostgresConnection, ids: String, logger: Logger) async throws {
        try await db.query(
            """
            DELETE FROM legacy_import_tombstones t USING jsonb_to_recordset(\(ids)::jsonb) AS k(app_ref bigint, legacy_id text)
            WHERE t.app_ref = k.app_ref AND t.collection = 'users' AND t.legacy_id = k.legacy_id
            """, logger: logger)
    }

    /// Deletes imported users (by legacy id) that newer rows replace. `ids`: jsonb `[{app_ref, legacy_id}]`.
    /// These deletes leave no tombstone (`cosync.import_delete`, for the rest of the transaction).
    public static func deleteImportedUsers(_ db: PostgresConnection, ids: String, logger: Logger) async throws {
        try await db.query("SELECT set_config('cosync.import_delete', 'on', true)", logger: logger)
        try await db.query(
            """
            DELETE FROM users u USING jsonb_to_recordset(\(ids)::jsonb) AS k(app_ref bigint, legacy_id text)
            WHERE u.app_ref = k.app_ref AND u.legacy_id = k.legacy_id
            """, logger: logger)
    }

    /// The columns of a batch of users as `upsertUsers` receives it, in order: one line a row in
    /// COPY's text format (see LegacyImport's UserRow for the fields; `totp` and `fingerprint` are
    /// base64, `metadata` JSON text, or `\N` for '{}').
    public static let userBatchColumns = [
        "id", "app_ref", "handle", "user_name", "password_hash", "locale", "status", "login_provider", "social_user_id", "metadata",
        "phone", "phone_verified", "two_factor_phone", "two_factor_google", "totp", "last_login", "created_at", "updated_at",
        "legacy_id", "fingerprint", "jwt_subject",
    ]

    /// Upserts a batch of users: the rows (`batch`, COPY text lines of `userBatchColumns`) are copied
    /// into a session-local staging table that empties at every commit, then one INSERT … SELECT
    /// writes them (COPY moves a batch at a fraction of the cost of parsing it from one jsonb value).
    /// `keys`: jsonb `[{app_ref, legacy_id}]` of the same rows, for their identities.
    public static func upsertUsers(_ db: PostgresConnection, batch: ByteBuffer, keys: String, logger: Logger) async throws {
        try await db.query(
            """
            CREATE TEMP TABLE IF NOT EXISTS legacy_import_users (
                id uuid, app_ref bigint, handle text, user_name text, password_hash text, locale text, status text, login_provider text,
                social_user_id text, metadata jsonb, phone text, phone_verified boolean, two_factor_phone boolean, two_factor_google boolean,
                totp text, last_login timestamptz, created_at timestamptz, updated_at timestamptz, legacy_id text, fingerprint text,
                jwt_subject text
            ) ON COMMIT DELETE ROWS
            """, logger: logger)
        // Empty here: its rows go at every commit, and a rollback takes back the copy.
        try await db.copyFrom(table: "legacy_import_users", columns: userBatchColumns, logger: logger) { writer in
            try await writer.write(batch)
        }
        try await db.query(
            """
            INSERT INTO users (id, app_ref, handle, user_name, password_hash, locale, status, login_provider, social_user_id, metadata,
                               phone, phone_verified, two_factor_phone, two_factor_google, totp_secret_sealed, last_login,
                               created_at, updated_at, legacy_id, legacy_fingerprint, jwt_subject)
            SELECT r.id, r.app_ref, r.handle, r.user_name, r.password_hash, r.locale, r.status, r.login_provider, r.social_user_id,
                   coalesce(r.metadata, '{}'::jsonb), r.phone, r.phone_verified, r.two_factor_phone, r.two_factor_google,
                   decode(r.totp, 'base64'), r.last_login, r.created_at, r.updated_at, r.legacy_id, decode(r.fingerprint, 'base64'), r.jwt_subject
            FROM legacy_import_users r
            ON CONFLICT (app_ref, legacy_id) WHERE legacy_id IS NOT NULL DO UPDATE SET
                handle = excluded.handle, user_name = excluded.user_name, password_hash = excluded.password_hash, locale = excluded.locale,
                status = excluded.status, login_provider = excluded.login_provider, social_user_id = excluded.social_user_id,
                metadata = excluded.metadata, phone = excluded.phone, phone_verified = excluded.phone_verified,
                two_factor_phone = excluded.two_factor_phone, two_factor_google = excluded.two_factor_google,
                totp_secret_sealed = excluded.totp_secret_sealed, last_login = excluded.last_login, created_at = excluded.created_at,
                updated_at = excluded.updated_at, legacy_fingerprint = excluded.legacy_fingerprint, jwt_subject = excluded.jwt_subject
            WHERE users.legacy_fingerprint IS DISTINCT FROM excluded.legacy_fingerprint
            """, logger: logger)
        try await IdentityStore.syncImported(db, keys: keys, logger: logger)
    }

    public static func userExists(_ db: PostgresConnection, appRef: Int64, handle: String, logger: Logger) async throws -> Bool {
        let rows = try await db.query("SELECT 1 FROM users WHERE app_ref = \(appRef) AND lower(handle) = \(handle)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    // MARK: reset codes

    /// The user a legacy reset code belongs to: `identifier` (lower-cased) is the handle or the user
    /// name the user typed, matched as `forgotPassword` matches it.
    public static func userForReset(_ db: PostgresConnection, appRef: Int64, identifier: String, logger: Logger) async throws -> UUID? {
        let rows = try await db.query(
            """
            SELECT id FROM users WHERE app_ref = \(appRef) AND (lower(handle) = \(identifier) OR lower(user_name) = \(identifier))
            ORDER BY (lower(handle) = \(identifier)) DESC LIMIT 1
            """, logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }

    /// Whether an earlier import carried this legacy reset code, and whether its row is still there.
    public static func carriedResetCode(_ db: PostgresConnection, appRef: Int64, legacyId: String, logger: Logger) async throws -> (carried: Bool, present: Bool) {
        let rows = try await db.query(
            """
            SELECT EXISTS (SELECT 1 FROM legacy_import_tombstones WHERE app_ref = \(appRef) AND collection = 'resetpasswords' AND legacy_id = \(legacyId)),
                   EXISTS (SELECT 1 FROM reset_codes WHERE app_ref = \(appRef) AND legacy_id = \(legacyId))
            """, logger: logger)
        for try await row in rows.decode((Bool, Bool).self) { return row }
        return (false, false)
    }

    /// Carries a legacy reset code (valid until `expiresAt`) and remembers it was carried, so a later
    /// import never brings it back once it is used or expired.
    public static func insertLegacyResetCode(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, identifier: String, codeSealed: Data, expiresAt: Date, createdAt: Date,
        legacyId: String, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO reset_codes (app_ref, user_id, identifier, code_sealed, expires_at, created_at, legacy_id)
            VALUES (\(appRef), \(userId), \(identifier), \(codeSealed), \(expiresAt), \(createdAt), \(legacyId))
            ON CONFLICT (app_ref, legacy_id) WHERE legacy_id IS NOT NULL DO NOTHING
            """, logger: logger)
        try await db.query(
            """
            INSERT INTO legacy_import_tombstones (app_ref, collection, legacy_id, reason) VALUES (\(appRef), 'resetpasswords', \(legacyId), 'carried')
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    // MARK: signups and invites

    /// A pending signup or invite of the handle that is not this legacy row.
    public static func otherPending(
        _ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, handle: String, legacyId: String, logger: Logger
    ) async throws -> (legacyId: String?, updatedAt: Date)? {
        let rows = try await db.query(
            """
            SELECT legacy_id, updated_at FROM \(unescaped: kind.rawValue)
            WHERE app_ref = \(appRef) AND lower(handle) = \(handle) AND status = 'pending' AND legacy_id IS DISTINCT FROM \(legacyId)
            """, logger: logger)
        for try await (id, updatedAt) in rows.decode((String?, Date).self) { return (id, updatedAt) }
        return nil
    }

    public static func deleteImported(_ db: PostgresConnection, _ kind: AppRecordStore.Kind, appRef: Int64, legacyId: String, logger: Logger) async throws {
        try await db.query("DELETE FROM \(unescaped: kind.rawValue) WHERE app_ref = \(appRef) AND legacy_id = \(legacyId)", logger: logger)
    }

    public static func upsertSignup(
        _ db: PostgresConnection, id: UUID, appRef: Int64, handle: String, passwordHash: String?, codeSealed: Data?, metadata: String,
        locale: String, status: String, expiresAt: Date, createdAt: Date, updatedAt: Date, legacyId: String, fingerprint: Data, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO signups (id, app_ref, handle, password_hash, code_sealed, metadata, locale, status, expires_at, created_at, updated_at,
                                 legacy_id, legacy_fingerprint)
            SELECT \(id), \(appRef), \(handle), \(passwordHash), \(codeSealed), \(metadata)::jsonb, \(locale), \(status), \(expiresAt),
                    \(createdAt), \(updatedAt), \(legacyId), \(fingerprint)
            WHERE NOT EXISTS (
                SELECT 1 FROM legacy_import_tombstones WHERE app_ref = \(appRef) AND collection = 'signups' AND legacy_id = \(legacyId))
            ON CONFLICT (app_ref, legacy_id) WHERE legacy_id IS NOT NULL DO UPDATE SET handle = excluded.handle,
                password_hash = excluded.password_hash, code_sealed = excluded.code_sealed, metadata = excluded.metadata,
                locale = excluded.locale, status = excluded.status, expires_at = excluded.expires_at, created_at = excluded.created_at,
                updated_at = excluded.updated_at, legacy_fingerprint = excluded.legacy_fingerprint
            WHERE signups.legacy_fingerprint IS DISTINCT FROM excluded.legacy_fingerprint AND signups.status = 'pending'
            """, logger: logger)
    }

    public static func upsertInvite(
        _ db: PostgresConnection, id: UUID, appRef: Int64, handle: String, senderHandle: String, senderUserId: String, codeSealed: Data?,
        metadata: String, locale: String, status: String, expiresAt: Date, createdAt: Date, updatedAt: Date, legacyId: String,
        fingerprint: Data, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO invites (id, app_ref, handle, sender_handle, sender_user_id, code_sealed, metadata, locale, status, expires_at,
                                 created_at, updated_at, legacy_id, legacy_fingerprint)
            SELECT \(id), \(appRef), \(handle), \(senderHandle), \(senderUserId), \(codeSealed), \(metadata)::jsonb, \(locale), \(status),
                    \(expiresAt), \(createdAt), \(updatedAt), \(legacyId), \(fingerprint)
            WHERE NOT EXISTS (
                SELECT 1 FROM legacy_import_tombstones WHERE app_ref = \(appRef) AND collection = 'invites' AND legacy_id = \(legacyId))
            ON CONFLICT (app_ref, legacy_id) WHERE legacy_id IS NOT NULL DO UPDATE SET handle = excluded.handle,
                sender_handle = excluded.sender_handle, sender_user_id = excluded.sender_user_id, code_sealed = excluded.code_sealed,
                metadata = excluded.metadata, locale = excluded.locale, status = excluded.status, expires_at = excluded.expires_at,
                created_at = excluded.created_at, updated_at = excluded.updated_at, legacy_fingerprint = excluded.legacy_fingerprint
            WHERE invites.legacy_fingerprint IS DISTINCT FROM excluded.legacy_fingerprint AND invites.status = 'pending'
            """, logger: logger)
    }

    // MARK: templates

    public static func template(
        _ db: PostgresConnection, appRef: Int64, name: String, locale: String, logger: Logger
    ) async throws -> (updatedAt: Date, subject: String, html: String, replyTo: String, link: String)? {
        let rows = try await db.query(
            """
            SELECT updated_at, subject, html, reply_to, locale_link_text FROM email_templates
            WHERE app_ref = \(appRef) AND template = \(name) AND locale = \(locale)
            """, logger: logger)
        for try await row in rows.decode((Date, String, String, String, String).self) { return row }
        return nil
    }

    /// Newest `updatedAt` wins among duplicates; an unchanged row is left alone.
    public static func upsertTemplate(
        _ db: PostgresConnection, appRef: Int64, template: String, locale: String, subject: String, html: String, replyTo: String,
        localeLinkText: String, updatedAt: Date, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO email_templates (app_ref, template, locale, subject, html, reply_to, locale_link_text, updated_at)
            VALUES (\(appRef), \(template), \(locale), \(subject), \(html), \(replyTo), \(localeLinkText), \(updatedAt))
            ON CONFLICT (app_ref, template, locale) DO UPDATE SET subject = excluded.subject, html = excluded.html,
                reply_to = excluded.reply_to, locale_link_text = excluded.locale_link_text, updated_at = excluded.updated_at
            WHERE email_templates.updated_at < excluded.updated_at
            """, logger: logger)
    }

    // MARK: report

    /// Stores report entries (a jsonb array of `{collection, legacyId, action, reason, …}`); an entry
    /// already stored by an earlier run of the same source is kept once.
    public static func insertReport(_ db: PostgresConnection, source: String, entries: String, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO legacy_import_report (source, collection, legacy_id, action, reason, entry)
            SELECT \(source), e->>'collection', coalesce(e->>'legacyId', ''), e->>'action', e->>'reason', e
            FROM jsonb_array_elements(\(entries)::jsonb) AS e
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// Calls `body` with each entry of the source's report, in the order they were made; returns the count.
    public static func reportEntries(_ db: PostgresConnection, source: String, logger: Logger, _ body: (String) throws -> Void) async throws -> Int {
        let rows = try await db.query("SELECT entry::text FROM legacy_import_report WHERE source = \(source) ORDER BY seq", logger: logger)
        var count = 0
        for try await text in rows.decode(String.self) {
            try body(text)
            count += 1
        }
        return count
    }

    // MARK: legacy access tokens
}
