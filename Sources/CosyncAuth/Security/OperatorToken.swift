import Foundation
import Logging
import PostgresNIO

/// The operator credential (full admin over every app). From `COSYNC_OPERATOR_TOKEN` when set;
/// otherwise the server makes one on first start, prints it once and keeps only its hash in
/// `server_settings`. A stored token is re-read at most every `refreshInterval` (2 s), so
/// `cosyncauth operator-token reset` takes effect on every running node within seconds, with one
/// small query per interval at most.
public struct OperatorToken: Sendable {
    enum Source: Sendable {
        case configured(Data)
        case stored(StoredOperatorHash)
    }
    let source: Source

    public init(token: String) { self.source = .configured(Secrets.sha256(token)) }
    init(stored: StoredOperatorHash) { self.source = .stored(stored) }

    public func matches(_ presented: String) async -> Bool {
        let hash: Data?
        switch source {
        case .configured(let configured): hash = configured
        case .stored(let stored): hash = await stored.current()
        }
        guard let hash else { return false }
        return Secrets.constantTimeEquals(Secrets.sha256(presented), hash)
    }

    static let settingKey = "operator_token_sha256"

    /// Returns the credential and, when this call generated it, the token to print once.
    public static func resolve(configured: String?, client: PostgresClient, logger: Logger) async throws -> (OperatorToken, generated: String?) {
        if let configured { return (OperatorToken(token: configured), nil) }
        if let stored = try await storedHash(client: client, logger: logger) {
            return (OperatorToken(stored: StoredOperatorHash(client: client, logger: logger, hash: stored)), nil)
        }
        let token = Secrets.token(prefix: "cop_")
        let hex = Hex.encode(Secrets.sha256(token))
        try await client.withConnection { try await ServerSettingsStore.insertIfAbsent($0, key: settingKey, value: hex, logger: logger) }
        // Another node may have won the race: use whatever is stored.
        guard let stored = try await storedHash(client: client, logger: logger) else { throw StoreError.noRowReturned }
        let mine = Secrets.constantTimeEquals(stored, Secrets.sha256(token))
        return (OperatorToken(stored: StoredOperatorHash(client: client, logger: logger, hash: stored)), mine ? token : nil)
    }

    /// Replaces the stored operator token (used when COSYNC_OPERATOR_TOKEN is not configured).
    public static func reset(client: PostgresClient, logger: Logger) async throws -> String {
        let token = Secrets.token(prefix: "cop_")
        let hex = Hex.encode(Secrets.sha256(token))
        try await client.withConnection { try await ServerSettingsStore.set($0, key: settingKey, value: hex, logger: logger) }
        return token
    }

    static func storedHash(client: PostgresClient, logger: Logger) async throws -> Data? {
        guard let hex = try await client.withConnection({ try await ServerSettingsStore.value($0, key: settingKey, logger: logger) }) else {
            return nil
        }
        return Hex.decode(hex).map { Data($0) }
    }
}

/// The stored operator token hash, re-read from PostgreSQL when older than `refreshInterval`. A
/// failed re-read keeps the last known hash (a database outage does not lock the operator out of a
/// token that was valid a moment ago) and is retried at the next interval.
actor StoredOperatorHash {
    let client: PostgresClient
    let logger: Logger
    let refreshInterval: Duration
    var hash: Data?
    var loadedAt: ContinuousClock.Instant

    init(client: PostgresClient, logger: Logger, hash: Data, refreshInterval: Duration = .seconds(2)) {
        self.client = client
        self.logger = logger
        self.hash = hash
        self.refreshInterval = refreshInterval
        self.loadedAt = .now
    }

    func current() async -> Data? {
        if ContinuousClock.now - loadedAt >= refreshInterval {
            loadedAt = .now
            do {
                hash = try await OperatorToken.storedHash(client: client, logger: logger)
            } catch {
                logger.warning("could not re-read the operator token; keeping the last one", metadata: ["error": "\(describeForOperator(error))"])
            }
        }
        return hash
    }
}
