import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_upstream_providers`: the OpenID providers an app signs users in through.
enum OAuthUpstreamProviderStore {
    static let columns = """
        id, app_ref, name, discovery_url, issuer, authorization_endpoint, token_endpoint, jwks_uri, token_auth_method, client_id,
        client_secret_sealed, scopes, audiences, enabled, created_at, updated_at
        """

    static func decode(_ row: PostgresRow) throws -> UpstreamProvider {
        let c = row.makeRandomAccess()
        let method = try c[8].decode(String.self)
        guard let auth = UpstreamProvider.TokenAuthMethod(rawValue: method) else {
            throw StoreError.unknownValue(column: "oauth_upstream_providers.token_auth_method", value: method)
        }
        return UpstreamProvider(
            id: try c[0].decode(UUID.self), appRef: try c[1].decode(Int64.self), name: try c[2].decode(String.self),
            discoveryURL: try c[3].decode(String.self), issuer: try c[4].decode(String.self), authorizationEndpoint: try c[5].decode(String.self),
            tokenEndpoint: try c[6].decode(String.self), jwksURI: try c[7].decode(String.self), tokenAuthMethod: auth,
            clientId: try c[9].decode(String.self), clientSecretSealed: try c[10].decode(Data?.self), scopes: try c[11].decode([String].self),
            audiences: try c[12].decode([String].self), enabled: try c[13].decode(Bool.self), createdAt: try c[14].decode(Date.self),
            updatedAt: try c[15].decode(Date.self))
    }

    static func decodeAll(_ rows: PostgresRowSequence) async throws -> [UpstreamProvider] {
        var providers: [UpstreamProvider] = []
        for try await row in rows { providers.append(try decode(row)) }
        return providers
    }

    /// The app's providers, oldest first (an app has a handful).
    static func list(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> [UpstreamProvider] {
        try await decodeAll(db.query(
            "SELECT \(unescaped: columns) FROM oauth_upstream_providers WHERE app_ref = \(appRef) ORDER BY created_at, id LIMIT 1000",
            logger: logger))
    }

    static func find(_ db: PostgresConnection, appRef: Int64, id: UUID, forUpdate: Bool = false, logger: Logger) async throws -> UpstreamProvider? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        return try await decodeAll(db.query(
            "SELECT \(unescaped: columns) FROM oauth_upstream_providers WHERE app_ref = \(appRef) AND id = \(id)\(unescaped: lock)",
            logger: logger)).first
    }

    /// The app's provider of `issuer` (an ID token names its provider by `iss`).
    static func find(_ db: PostgresConnection, appRef: Int64, issuer: String, logger: Logger) async throws -> UpstreamProvider? {
        try await decodeAll(db.query(
            "SELECT \(unescaped: columns) FROM oauth_upstream_providers WHERE app_ref = \(appRef) AND issuer = \(issuer)", logger: logger)).first
    }

    static func count(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> Int {
        for try await n in try await db.query(
            "SELECT count(*)::int FROM oauth_upstream_providers WHERE app_ref = \(appRef)", logger: logger).decode(Int.self) { return n }
        return 0
    }

    static func insert(_ db: PostgresConnection, _ p: UpstreamProvider, logger: Logger) async throws -> UpstreamProvider {
        let rows = try await db.query(
            """
            INSERT INTO oauth_upstream_providers (id, app_ref, name, discovery_url, issuer, authorization_endpoint, token_endpoint, jwks_uri,
                token_auth_method, client_id, client_secret_sealed, scopes, audiences, enabled)
            VALUES (\(p.id), \(p.appRef), \(p.name), \(p.discoveryURL), \(p.issuer), \(p.authorizationEndpoint), \(p.tokenEndpoint), \(p.jwksURI),
                \(p.tokenAuthMethod.rawValue), \(p.clientId), \(p.clientSecretSealed), \(p.scopes), \(p.audiences), \(p.enabled))
            RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let stored = try await decodeAll(rows).first else { throw StoreError.noRowReturned }
        return stored
    }

    /// Writes every changeable column of `p` (the caller holds the row, `find(forUpdate:)`).
    static func update(_ db: PostgresConnection, _ p: UpstreamProvider, logger: Logger) async throws -> UpstreamProvider {
        let rows = try await db.query(
            """
            UPDATE oauth_upstream_providers SET name = \(p.name), discovery_url = \(p.discoveryURL), issuer = \(p.issuer),
                authorization_endpoint = \(p.authorizationEndpoint), token_endpoint = \(p.tokenEndpoint), jwks_uri = \(p.jwksURI),
                token_auth_method = \(p.tokenAuthMethod.rawValue), client_id = \(p.clientId), client_secret_sealed = \(p.clientSecretSealed),
                scopes = \(p.scopes), audiences = \(p.audiences), enabled = \(p.enabled), updated_at = now()
            WHERE app_ref = \(p.appRef) AND id = \(p.id)
            RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let stored = try await decodeAll(rows).first else { throw StoreError.noRowReturned }
        return stored
    }

    /// Deletes one provider (its sign-ins on their way go with it); false when the app has none with that id.
    static func delete(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query("DELETE FROM oauth_upstream_providers WHERE app_ref = \(appRef) AND id = \(id) RETURNING 1", logger: logger)
        for try await _ in rows { return true }
        return false
    }
}
