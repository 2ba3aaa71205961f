import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_requests`: authorization requests waiting for their user, by the SHA-256 of the
/// reference the hosted login page carries (or of a pushed request's `request_uri`).
///
/// `params` holds the request's own parameters (`AuthorizationRequest.parameters`) and three of the
/// server's, which no OAuth parameter name can take (they start with `_`): `_binding`, the SHA-256
/// (hex) of the browser cookie the request was started with; `_prefill`, the handle the form shows
/// when a signed-in user must prove itself again; `_answer`, the SHA-256 (hex) of the code issued for
/// it, once the user signed in.
enum OAuthRequestStore {
    struct Row: Sendable {
        let clientRef: UUID
        let params: [String: String]
    }

    static func decodeParams(_ value: JSONValue) -> [String: String] {
        var out: [String: String] = [:]
        for (key, item) in value.objectValue ?? [:] { if let text = item.stringValue { out[key] = text } }
        return out
    }

    static func insert(
        _ db: PostgresConnection, handleHash: Data, appRef: Int64, clientRef: UUID, params: [String: String], pushed: Bool,
        lifetimeSeconds: Int, logger: Logger
    ) async throws {
        let document = JSONValue.object(params.mapValues(JSONValue.string))
        try await db.query(
            """
            INSERT INTO oauth_requests (handle_hash, app_ref, client_ref, params, pushed, expires_at)
            VALUES (\(handleHash), \(appRef), \(clientRef), \(document), \(pushed), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// Takes a pushed request of `clientRef` for good (RFC 9126 §4: a `request_uri` is used once),
    /// while it is unexpired; nil when there is none.
    static func takePushed(_ db: PostgresConnection, handleHash: Data, appRef: Int64, clientRef: UUID, logger: Logger) async throws -> [String: String]? {
        let rows = try await db.query(
            """
            DELETE FROM oauth_requests
            WHERE handle_hash = \(handleHash) AND app_ref = \(appRef) AND client_ref = \(clientRef) AND pushed AND expires_at > now()
            RETURNING params
            """, logger: logger)
        for try await params in rows.decode(JSONValue.self) { return decodeParams(params) }
        return nil
    }

    /// A request still waiting for its user (not pushed, unexpired, not answered). `lock` holds its
    /// row until the transaction ends, so one sign-in answers it.
    static func waiting(_ db: PostgresConnection, handleHash: Data, appRef: Int64, lock: Bool, logger: Logger) async throws -> Row? {
        let rows = try await db.query(
            """
            SELECT client_ref, params FROM oauth_requests
            WHERE handle_hash = \(handleHash) AND app_ref = \(appRef) AND NOT pushed AND expires_at > now()
              AND params->>'_answer' IS NULL
            \(unescaped: lock ? "FOR UPDATE" : "")
            """, logger: logger)
        for try await (client, params) in rows.decode((UUID, JSONValue).self) { return Row(clientRef: client, params: decodeParams(params)) }
        return nil
    }

    /// Records the code a request was answered with (its SHA-256, hex).
    static func answer(_ db: PostgresConnection, handleHash: Data, codeHashHex: String, logger: Logger) async throws {
        try await db.query(
            """
            UPDATE oauth_requests SET params = params || jsonb_build_object('_answer', \(codeHashHex)::text)
            WHERE handle_hash = \(handleHash)
            """, logger: logger)
    }

    /// Takes an answered request for good when `codeHashHex` is its answer: the redirect to the client
    /// is made once.
    static func takeAnswered(_ db: PostgresConnection, handleHash: Data, appRef: Int64, codeHashHex: String, logger: Logger) async throws -> Row? {
        let rows = try await db.query(
            """
            DELETE FROM oauth_requests
            WHERE handle_hash = \(handleHash) AND app_ref = \(appRef) AND NOT pushed AND params->>'_answer' = \(codeHashHex)::text
            RETURNING client_ref, params
            """, logger: logger)
        for try await (client, params) in rows.decode((UUID, JSONValue).self) { return Row(clientRef: client, params: decodeParams(params)) }
        return nil
    }

    /// Drops up to `limit` requests that expired (housekeeping); answers how many.
    @discardableResult
    static func deleteExpired(_ db: PostgresConnection, limit: Int = 200, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            DELETE FROM oauth_requests WHERE handle_hash IN (
                SELECT handle_hash FROM oauth_requests WHERE expires_at < now() ORDER BY expires_at LIMIT \(limit))
            RETURNING 1
            """, logger: logger)
        var count = 0
        for try await _ in rows { count += 1 }
        return count
    }
}
