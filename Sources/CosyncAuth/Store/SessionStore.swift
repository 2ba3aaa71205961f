import Foundation
import Logging
import PostgresNIO

/// SQL of sessions. Ending a session is deleting its row; `ON DELETE CASCADE` ends them with their user.
public enum SessionStore {
    /// A session's last proof; NULL (a row of a node from before migration 0014) reads as its sign-in.
    static let proofColumns = "COALESCE(proven_by, method), COALESCE(proven_at, created_at)"
    static let columns = "id, user_id, method, \(proofColumns), client_address, user_agent, created_at, last_seen_at, expires_at"

    static func decode(_ rows: PostgresRowSequence) async throws -> [Session] {
        var sessions: [Session] = []
        for try await c in rows.decode((UUID, UUID, String, String, Date, String?, String?, Date, Date, Date).self) {
            sessions.append(Session(
                id: c.0, userId: c.1, method: try method(c.2, column: "sessions.method"),
                lastProof: AuthProof(method: .signIn(try method(c.3, column: "sessions.proven_by")), at: c.4, source: .session),
                clientAddress: c.5, userAgent: c.6, createdAt: c.7, lastSeenAt: c.8, expiresAt: c.9))
        }
        return sessions
    }

    /// A stored method name as the enum; one this server does not know is a `StoreError`.
    static func method(_ stored: String, column: String) throws -> SessionMethod {
        guard let method = SessionMethod(rawValue: stored) else { throw StoreError.unknownValue(column: column, value: stored) }
        return method
    }

    /// Inserts a session, proven by `method` now, only while the identity it signed in with still
    /// exists; false when that identity is gone (a detach or passkey removal committed meanwhile). The
    /// caller holds the user row (`SessionGrant.open` locks it first, see there).
    ///
    /// The session records the identity that opened it: `identityId` when the caller knows it (a
    /// passkey's), else the user's one identity of the method's kind (`SessionMethod.identityKind`).
    /// Removing that identity ends the session (`deleteOpenedBy`, and the foreign key's cascade). Only
    /// a password-kind sign-in of a user with no password identity on record (none is made without
    /// one, but rows from before identities may lack it) opens an unbound session.
    static func insert(
        _ db: PostgresConnection, id: UUID, appRef: Int64, userId: UUID, method: SessionMethod, identityId: UUID? = nil,
        origin: ClientOrigin, lifetimeSeconds: Int, logger: Logger
    ) async throws -> Bool {
        let kind = method.identityKind?.rawValue
        let mayBeUnbound = identityId == nil && method.identityKind == .password
        let rows = try await db.query(
            """
            WITH opener AS (
                SELECT i.id FROM identities i
                WHERE i.user_id = \(userId)
                  AND (i.id = \(identityId) OR (\(identityId)::uuid IS NULL AND i.kind = \(kind) AND i.kind <> 'passkey')))
            INSERT INTO sessions (id, app_ref, user_id, method, proven_by, proven_at, identity_id, client_address, user_agent, expires_at)
            SELECT \(id), \(appRef), \(userId), \(method.rawValue), \(method.rawValue), now(), (SELECT id FROM opener), \(origin.address), \(origin.userAgent),
                   now() + make_interval(secs => \(lifetimeSeconds)::int)
            WHERE EXISTS (SELECT 1 FROM opener) OR \(mayBeUnbound)
            RETURNING id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Ends the sessions an identity opened, before the identity goes (its caller holds the user
    /// row): those bound to it, and the user's unbound sessions (opened before sessions recorded
    /// their identity) of a method of its kind. Returns the ended ids, for the `session.revoked` event.
    static func deleteOpenedBy(_ db: PostgresConnection, userId: UUID, identityId: UUID, kind: IdentityKind, logger: Logger) async throws -> [UUID] {
        let methods = SessionMethod.allCases.filter { $0.identityKind == kind }.map(\.rawValue)
        let rows = try await db.query(
            """
            DELETE FROM sessions WHERE user_id = \(userId)
              AND (identity_id = \(identityId) OR (identity_id IS NULL AND method = ANY(\(methods))))
            RETURNING id
            """, logger: logger)
        var ended: [UUID] = []
        for try await id in rows.decode(UUID.self) { ended.append(id) }
        return ended
    }

    /// The user of a live session and the session's last proof, in one statement: the session must
    /// exist, belong to the app and to `userId`, and not have expired. `last_seen_at` is written only
    /// when it is 5 minutes old, so a busy client does not write on every request.
    static func liveUser(_ db: PostgresConnection, sessionId: UUID, appRef: Int64, userId: UUID, logger: Logger) async throws
        -> (user: User, proof: AuthProof)?
    {
        for try await found in try await db.execute(LiveUser(sessionId: sessionId, appRef: appRef, userId: userId), logger: logger) {
            return found
        }
        return nil
    }

    /// Records a re-proof of a live session (a factor checked on it): how, and now.
    static func reprove(_ db: PostgresConnection, sessionId: UUID, by method: SessionMethod, logger: Logger) async throws {
        try await db.query(
            "UPDATE sessions SET proven_by = \(method.rawValue), proven_at = now() WHERE id = \(sessionId)", logger: logger)
    }

    /// Locks a live session of `userId` in `appRef` against its deletion (`FOR KEY SHARE`, to the end of
    /// the transaction) and answers its last proof; nil when it ended or expired. An OAuth grant is
    /// written on a session after this (and after the user row's lock, the order revocations take).
    static func lockLive(_ db: PostgresConnection, sessionId: UUID, appRef: Int64, userId: UUID, logger: Logger) async throws -> AuthProof? {
        let rows = try await db.query(
            """
            SELECT \(unescaped: proofColumns) FROM sessions
            WHERE id = \(sessionId) AND app_ref = \(appRef) AND user_id = \(userId) AND expires_at > now()
            FOR KEY SHARE
            """, logger: logger)
        for try await (by, at) in rows.decode((String, Date).self) {
            return AuthProof(method: .signIn(try method(by, column: "sessions.proven_by")), at: at, source: .session)
        }
        return nil
    }

    /// Moves a session's expiry out to `until` when that is later (never earlier): an OAuth grant's
    /// session lives as long as the grant's refresh tokens may.
    static func extend(_ db: PostgresConnection, sessionId: UUID, until: Date, logger: Logger) async throws {
        try await db.query(
            "UPDATE sessions SET expires_at = \(until) WHERE id = \(sessionId) AND expires_at < \(until)", logger: logger)
    }

    /// Every access-token request runs it: a prepared statement, parsed and planned once per connection.
    /// `last_seen_at` moves at most every 5 minutes, so nearly every call only reads.
    struct LiveUser: PostgresPreparedStatement {
        static let sql = """
            WITH seen AS (
                UPDATE sessions SET last_seen_at = now()
                WHERE id = $1 AND expires_at > now() AND last_seen_at < now() - interval '5 minutes')
            SELECT \(UserStore.qualifiedColumns("u")), COALESCE(s.proven_by, s.method), COALESCE(s.proven_at, s.created_at)
            FROM sessions s JOIN users u ON u.id = s.user_id
            WHERE s.id = $1 AND s.app_ref = $2 AND s.user_id = $3 AND s.expires_at > now()
            """
        typealias Row = (user: User, proof: AuthProof)
        let sessionId: UUID
        let appRef: Int64
        let userId: UUID

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(sessionId)
            bindings.append(appRef)
            bindings.append(userId)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let user = try UserStore.user(from: row)
            let columns = row.makeRandomAccess()
            let count = columns.count
            let by = try columns[count - 2].decode(String.self), at = try columns[count - 1].decode(Date.self)
            return (user, AuthProof(method: .signIn(try SessionStore.method(by, column: "sessions.proven_by")), at: at, source: .session))
        }
    }

    static func list(_ db: PostgresConnection, appRef: Int64, userId: UUID, logger: Logger) async throws -> [Session] {
        let rows = try await db.query(
            """
            SELECT \(unescaped: columns) FROM sessions
            WHERE app_ref = \(appRef) AND user_id = \(userId) AND expires_at > now()
            ORDER BY created_at DESC, id LIMIT 1000
            """, logger: logger)
        return try await decode(rows)
    }

    /// Ends one session; false when there was none.
    static func delete(_ db: PostgresConnection, appRef: Int64, userId: UUID, sessionId: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            "DELETE FROM sessions WHERE app_ref = \(appRef) AND user_id = \(userId) AND id = \(sessionId) RETURNING id",
            logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// Ends every session of a user but `keep`; returns the ended ids.
    @discardableResult
    static func deleteAll(_ db: PostgresConnection, userId: UUID, except keep: UUID? = nil, logger: Logger) async throws -> [UUID] {
        let rows = try await db.query(
            "DELETE FROM sessions WHERE user_id = \(userId) AND id IS DISTINCT FROM \(keep) RETURNING id", logger: logger)
        var ended: [UUID] = []
        for try await id in rows.decode(UUID.self) { ended.append(id) }
        return ended
    }

    /// Moves the sessions of identity `from` to the user's identity of kind `toKind` (an anonymous
    /// account upgraded in place keeps its sessions).
    static func rebind(_ db: PostgresConnection, userId: UUID, from: UUID, toKind: IdentityKind, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE sessions SET identity_id = (SELECT id FROM identities WHERE user_id = \(userId) AND kind = \(toKind.rawValue) AND kind <> 'passkey')
            WHERE user_id = \(userId) AND identity_id = \(from)
            """, logger: logger)
    }

    /// Removes sessions that expired more than a day ago (housekeeping; an expired row already
    /// authenticates nothing).
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            "DELETE FROM sessions WHERE expires_at < now() - interval '1 day' RETURNING 1", logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
