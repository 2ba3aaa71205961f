import Foundation
import Logging
import PostgresNIO

/// SQL of `server_keys`, the deployment-wide signing key (`ServerKeyRing`), and only here.
enum ServerKeyStore {
    /// Inserts an active key unless one exists (another node may have made it first).
    static func insertIfAbsent(
        _ db: PostgresConnection, kid: String, publicKeyPEM: String, privateKeySealed: Data, logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO server_keys (kid, public_key_pem, private_key_sealed, active)
            VALUES (\(kid), \(publicKeyPEM), \(privateKeySealed), true)
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// The active key: its kid and its sealed private key.
    static func active(_ db: PostgresConnection, logger: Logger) async throws -> (kid: String, sealed: Data)? {
        let rows = try await db.query(
            "SELECT kid, private_key_sealed FROM server_keys WHERE active", logger: logger)
        for try await (kid, sealed) in rows.decode((String, Data).self) { return (kid, sealed) }
        return nil
    }

    /// The newest `limit` sealed private keys, each with the label it was sealed under (`cosyncauth doctor`).
    static func sealedSample(_ db: PostgresConnection, limit: Int, logger: Logger) async throws -> [(label: String, sealed: Data)] {
        let rows = try await db.query(
            "SELECT 'server-key:' || kid, private_key_sealed FROM server_keys ORDER BY created_at DESC LIMIT \(limit)", logger: logger)
        var found: [(label: String, sealed: Data)] = []
        for try await (label, sealed) in rows.decode((String, Data).self) { found.append((label, sealed)) }
        return found
    }
}
