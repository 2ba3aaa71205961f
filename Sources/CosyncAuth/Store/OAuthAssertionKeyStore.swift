import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_assertion_keys`: the keys an app's backend signs its JWT-bearer assertions with.
enum OAuthAssertionKeyStore {
    static let columns = "id, app_ref, issuer, kid, jwk, jwks_uri, created_at"

    static func decode(_ rows: PostgresRowSequence) async throws -> [AssertionKey] {
        var keys: [AssertionKey] = []
        for try await c in rows.decode((UUID, Int64, String, String?, JSONValue?, String?, Date).self) {
            keys.append(AssertionKey(id: c.0, appRef: c.1, issuer: c.2, kid: c.3, jwk: c.4, jwksURI: c.5, createdAt: c.6))
        }
        return keys
    }

    /// The app's keys, oldest first (an app has a handful).
    static func list(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> [AssertionKey] {
        try await decode(db.query(
            "SELECT \(unescaped: columns) FROM oauth_assertion_keys WHERE app_ref = \(appRef) ORDER BY created_at, id LIMIT 1000",
            logger: logger))
    }

    /// The app's keys for assertions of `issuer`.
    static func list(_ db: PostgresConnection, appRef: Int64, issuer: String, logger: Logger) async throws -> [AssertionKey] {
        try await decode(db.query(
            """
            SELECT \(unescaped: columns) FROM oauth_assertion_keys WHERE app_ref = \(appRef) AND issuer = \(issuer)
            ORDER BY created_at, id LIMIT 100
            """, logger: logger))
    }

    static func count(_ db: PostgresConnection, appRef: Int64, logger: Logger) async throws -> Int {
        for try await n in try await db.query(
            "SELECT count(*)::int FROM oauth_assertion_keys WHERE app_ref = \(appRef)", logger: logger).decode(Int.self) { return n }
        return 0
    }

    static func insert(_ db: PostgresConnection, _ key: AssertionKey, logger: Logger) async throws -> AssertionKey {
        let rows = try await db.query(
            """
            INSERT INTO oauth_assertion_keys (id, app_ref, issuer, kid, jwk, jwks_uri)
            VALUES (\(key.id), \(key.appRef), \(key.issuer), \(key.kid), \(key.jwk), \(key.jwksURI))
            RETURNING \(unescaped: columns)
            """, logger: logger)
        guard let stored = try await decode(rows).first else { throw StoreError.noRowReturned }
        return stored
    }

    /// Deletes one key of the app; false when it has none with that id.
    static func delete(_ db: PostgresConnection, appRef: Int64, id: UUID, logger: Logger) async throws -> Bool {
        let rows = try await db.query("DELETE FROM oauth_assertion_keys WHERE app_ref = \(appRef) AND id = \(id) RETURNING 1", logger: logger)
        for try await _ in rows { return true }
        return false
    }
}
