import Foundation
import Logging
import PostgresNIO

/// The legacy server's public keys (`legacy_token_keys`) whose access tokens are still accepted after an
/// import: the importer writes them, the token issuer reads the live ones.
public enum LegacyTokenKeyStore {
    public static func upsertLegacyTokenKey(_ db: PostgresConnection, publicKeyPEM: String, acceptUntil: Date, logger: Logger) async throws {
        let fingerprint = Secrets.sha256(publicKeyPEM)
        try await db.query(
            """
            INSERT INTO legacy_token_keys (fingerprint, public_key_pem, accept_until) VALUES (\(fingerprint), \(publicKeyPEM), \(acceptUntil))
            ON CONFLICT (fingerprint) DO UPDATE SET accept_until = excluded.accept_until
            WHERE legacy_token_keys.accept_until IS DISTINCT FROM excluded.accept_until
            """, logger: logger)
    }

    /// The legacy public keys still accepted now.
    public static func liveLegacyTokenKeys(_ db: PostgresConnection, logger: Logger) async throws -> [(pem: String, until: Date)] {
        let rows = try await db.query("SELECT public_key_pem, accept_until FROM legacy_token_keys WHERE accept_until > now()", logger: logger)
        var keys: [(String, Date)] = []
        for try await (pem, until) in rows.decode((String, Date).self) { keys.append((pem, until)) }
        return keys
    }
}
