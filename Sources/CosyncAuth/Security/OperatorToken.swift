import Foundation
import Logging
import PostgresNIO

/// The operator credential (full admin over every app). From `COSYNC_OPERATOR_TOKEN` when set;
/// otherwise the server makes one on first start, prints it once and keeps only its hash.
public struct OperatorToken: Sendable {
    let hash: Data

    public init(token: String) { self.hash = Secrets.sha256(token) }
    init(hash: Data) { self.hash = hash }

    public func matches(_ presented: String) -> Bool {
        Secrets.constantTimeEquals(Secrets.sha256(presented), hash)
    }

    static let settingKey = "operator_token_sha256"

    /// Returns the credential and, when this call generated it, the token to print once.
    public static func resolve(configured: String?, client: PostgresClient, logger: Logger) async throws -> (OperatorToken, generated: String?) {
        if let configured { return (OperatorToken(token: configured), nil) }
        if let stored = try await storedHash(client: client, logger: logger) { return (OperatorToken(hash: stored), nil) }
        let token = Secrets.token(prefix: "cop_")
        let hex = Hex.encode(Secrets.sha256(token))
        try await client.query(
            "INSERT INTO server_settings (key, value) VALUES (\(settingKey), \(hex)) ON CONFLICT (key) DO NOTHING",
            logger: logger)
        // Another node may have won the race: use whatever is stored.
        guard let stored = try await storedHash(client: client, logger: logger) else { throw StoreError.noRowReturned }
        let mine = Secrets.constantTimeEquals(stored, Secrets.sha256(token))
        return (OperatorToken(hash: stored), mine ? token : nil)
    }

    /// Replaces the stored operator token (used when COSYNC_OPERATOR_TOKEN is not configured).
    public static func reset(client: PostgresClient, logger: Logger) async throws -> String {
        let token = Secrets.token(prefix: "cop_")
        let hex = Hex.encode(Secrets.sha256(token))
        try await client.query(
            """
            INSERT INTO server_settings (key, value) VALUES (\(settingKey), \(hex))
            ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
            """, logger: logger)
        return token
    }

    static func storedHash(client: PostgresClient, logger: Logger) async throws -> Data? {
        let rows = try await client.query("SELECT value FROM server_settings WHERE key = \(settingKey)", logger: logger)
        for try await hex in rows.decode(String.self) { return Hex.decode(hex).map { Data($0) } }
        return nil
    }
}
