import Foundation
import Logging
import PostgresNIO

/// `cosyncauth doctor`: what an operator checks after a restore, a key rotation or an upgrade.
/// - the schema version matches the binary's migrations;
/// - the master key opens a sample of each kind of sealed value (server keys, app signing keys, app
///   tokens, provider credentials). A restore with the wrong key fails here instead of at the first
///   login.
public struct Doctor: Sendable {
    public struct Check: Sendable {
        public let name: String
        public let ok: Bool
        public let detail: String
    }

    let client: PostgresClient
    let box: SecretBox
    let migrator: Migrator
    let logger: Logger
    /// How many values of each kind are opened.
    let sample: Int

    public init(client: PostgresClient, box: SecretBox, migrator: Migrator, logger: Logger, sample: Int = 50) {
        self.client = client
        self.box = box
        self.migrator = migrator
        self.logger = logger
        self.sample = max(1, sample)
    }

    public func run() async throws -> [Check] {
        var checks: [Check] = []
        let applied = try await migrator.appliedVersion(client, logger: logger) ?? 0
        let known = migrator.latestVersion
        checks.append(Check(
            name: "schema version", ok: applied == known,
            detail: applied == known ? "database and binary at \(known)"
                : applied < known ? "database at \(applied), binary at \(known): run `cosyncauth migrate`"
                : "database at \(applied) is newer than this binary (\(known)): use a newer release"))
        let limit = sample
        let kinds: [(String, (PostgresConnection) async throws -> [(label: String, sealed: Data)])] = [
            ("server keys", { try await ServerKeyStore.sealedSample($0, limit: limit, logger: logger) }),
            ("app signing keys", { try await AppStore.sealedSigningKeys($0, limit: limit, logger: logger) }),
            ("app tokens", { try await AppStore.sealedTokens($0, limit: limit, logger: logger) }),
            ("provider credentials", { try await AppStore.sealedCredentials($0, limit: limit, logger: logger) }),
        ]
        for (name, read) in kinds {
            var opened = 0
            var failed: [String] = []
            let values = try await client.withConnection { try await read($0) }
            for (purpose, sealed) in values {
                if box.open(sealed, label: purpose) != nil {
                    opened += 1
                } else {
                    failed.append(String(purpose.split(separator: ":", maxSplits: 1).last ?? ""))
                }
            }
            if failed.isEmpty {
                checks.append(Check(name: name, ok: true, detail: opened == 0 ? "none stored" : "\(opened) opened with the master key"))
            } else {
                checks.append(Check(
                    name: name, ok: false,
                    detail: "\(failed.count) of \(opened + failed.count) do not open with this master key (first: \(failed.prefix(3).joined(separator: ", "))); is COSYNC_MASTER_KEY the key this database was sealed with?"))
            }
        }
        return checks
    }
}
