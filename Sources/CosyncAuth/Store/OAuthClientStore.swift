import Foundation
import Logging
import PostgresNIO

extension JSONValue: PostgresCodable {}

/// SQL of `oauth_clients`, the registered clients of an app's issuer.
enum OAuthClientStore {
    static let columns = """
        id, app_ref, client_id, name, kind, auth_method, secret_hash, jwks, jwks_uri, redirect_uris, post_logout_redirect_uris,
        grant_types, scopes, access_token_seconds, refresh_sliding_seconds, refresh_absolute_seconds, refresh_grace_seconds,
        dpop_required, created_at, updated_at
        """

    static func decode(_ row: PostgresRow) throws -> OAuthClient {
        let c = row.makeRandomAccess()
        let kind = try c[4].decode(String.self), method = try c[5].decode(String.self)
        guard let kindValue = OAuthClient.Kind(rawValue: kind) else { throw StoreError.unknownValue(column: "oauth_clients.kind", value: kind) }
        guard let methodValue = OAuthClient.AuthMethod(rawValue: method) else {
            throw StoreError.unknownValue(column: "oauth_clients.auth_method", value: method)
        }
        // A grant type this binary does not know is not offered (a newer node may have added one).
        let grants = try c[11].decode([String].self).compactMap(OAuthGrantType.init(rawValue:))
        return OAuthClient(
            ref: try c[0].decode(UUID.self), appRef: try c[1].decode(Int64.self), clientId: try c[2].decode(String.self),
            name: try c[3].decode(String.self), kind: kindValue, authMethod: methodValue, secretHash: try c[6].decode(Data?.self),
            jwks: try c[7].decode(JSONValue?.self), jwksURI: try c[8].decode(String?.self), redirectURIs: try c[9].decode([String].self),
            postLogoutRedirectURIs: try c[10].decode([String].self), grantTypes: grants, scopes: try c[12].decode([String].self),
            accessTokenSeconds: try c[13].decode(Int.self), refreshSlidingSeconds: try c[14].decode(Int.self),
            refreshAbsoluteSeconds: try c[15].decode(Int.self), refreshGraceSeconds: try c[16].decode(Int.self),
            dpopRequired: try c[17].decode(Bool.self), createdAt: try c[18].decode(Date.self), updatedAt: try c[19].decode(Date.self))
    }

    /// The client `clientId` of the app, if any.
    static func find(_ db: PostgresConnection, appRef: Int64, clientId: String, logger: Logger) async throws -> OAuthClient? {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM oauth_clients WHERE app_ref = \(appRef) AND client_id = \(clientId)", logger: logger)
        for try await row in rows { return try decode(row) }
        return nil
    }

    /// The client with row id `ref`, if it still exists.
    static func find(_ db: PostgresConnection, ref: UUID, logger: Logger) async throws -> OAuthClient? {
        let rows = try await db.query("SELECT \(unescaped: columns) FROM oauth_clients WHERE id = \(ref)", logger: logger)
        for try await row in rows { return try decode(row) }
        return nil
    }

    /// The app's clients, oldest first (an app has few).
    static func list(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> [OAuthClient] {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM oauth_clients WHERE app_ref = \(appRef) ORDER BY created_at, id LIMIT 1000", logger: logger)
        var clients: [OAuthClient] = []
        for try await row in rows { clients.append(try decode(row)) }
        return clients
    }

    static func insert(_ db: PostgresConnection, _ c: OAuthClient, logger: Logger) async throws {
        try await db.query(
            """
            INSERT INTO oauth_clients (id, app_ref, client_id, name, kind, auth_method, secret_hash, jwks, jwks_uri, redirect_uris,
                post_logout_redirect_uris, grant_types, scopes, access_token_seconds, refresh_sliding_seconds, refresh_absolute_seconds,
                refresh_grace_seconds, dpop_required)
            VALUES (\(c.ref), \(c.appRef), \(c.clientId), \(c.name), \(c.kind.rawValue), \(c.authMethod.rawValue), \(c.secretHash), \(c.jwks),
                \(c.jwksURI), \(c.redirectURIs), \(c.postLogoutRedirectURIs), \(c.grantTypes.map(\.rawValue)), \(c.scopes),
                \(c.accessTokenSeconds), \(c.refreshSlidingSeconds), \(c.refreshAbsoluteSeconds), \(c.refreshGraceSeconds), \(c.dpopRequired))
            """, logger: logger)
    }
}

extension OAuthClientStore {
    /// The client `clientId` of the app, locked for a change in the caller's transaction.
    static func lock(_ db: PostgresConnection, appRef: Int64, clientId: String, logger: Logger) async throws -> OAuthClient? {
        let rows = try await db.query(
            "SELECT \(unescaped: columns) FROM oauth_clients WHERE app_ref = \(appRef) AND client_id = \(clientId) FOR UPDATE", logger: logger)
        for try await row in rows { return try decode(row) }
        return nil
    }

    /// How many clients the app has.
    static func count(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> Int {
        let rows = try await db.query("SELECT count(*)::int FROM oauth_clients WHERE app_ref = \(appRef)", logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }

    /// Writes every changeable column of `c` (the row `c.ref`) and stamps `updated_at`; the row as stored,
    /// or nil when it is gone.
    static func update(_ db: PostgresConnection, _ c: OAuthClient, logger: Logger) async throws -> OAuthClient? {
        let rows = try await db.query(
            """
            UPDATE oauth_clients SET name = \(c.name), auth_method = \(c.authMethod.rawValue), secret_hash = \(c.secretHash),
                jwks = \(c.jwks), jwks_uri = \(c.jwksURI), redirect_uris = \(c.redirectURIs),
                post_logout_redirect_uris = \(c.postLogoutRedirectURIs), grant_types = \(c.grantTypes.map(\.rawValue)), scopes = \(c.scopes),
                access_token_seconds = \(c.accessTokenSeconds), refresh_sliding_seconds = \(c.refreshSlidingSeconds),
                refresh_absolute_seconds = \(c.refreshAbsoluteSeconds), refresh_grace_seconds = \(c.refreshGraceSeconds),
                dpop_required = \(c.dpopRequired), updated_at = now()
            WHERE id = \(c.ref) AND app_ref = \(c.appRef)
            RETURNING \(unescaped: columns)
            """, logger: logger)
        for try await row in rows { return try decode(row) }
        return nil
    }

    /// Replaces the secret's hash of the client `ref`; the row as stored, or nil when it is gone.
    static func setSecret(_ db: PostgresConnection, ref: UUID, secretHash: Data, logger: Logger) async throws -> OAuthClient? {
        let rows = try await db.query(
            """
            UPDATE oauth_clients SET secret_hash = \(secretHash), updated_at = now() WHERE id = \(ref)
            RETURNING \(unescaped: columns)
            """, logger: logger)
        for try await row in rows { return try decode(row) }
        return nil
    }

    /// Deletes the client `clientId` of the app (its codes, grants and refresh tokens go with it, by
    /// the foreign keys); the row id it had, or nil when there was none.
    static func delete(_ db: PostgresConnection, appRef: Int64, clientId: String, logger: Logger) async throws -> UUID? {
        let rows = try await db.query(
            "DELETE FROM oauth_clients WHERE app_ref = \(appRef) AND client_id = \(clientId) RETURNING id", logger: logger)
        for try await id in rows.decode(UUID.self) { return id }
        return nil
    }
}
