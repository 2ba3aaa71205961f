import Foundation
import Logging
import PostgresNIO

/// Applies the numbered migrations (`sql/NNNN_name.sql`, embedded in the binary as
/// `Migrator.embedded`) in order, each in its own transaction, recording them in `schema_migrations`.
/// Safe to run from several nodes at once: a transaction-scoped advisory lock serialises them, and an
/// applied version is skipped. A database already at a newer version than the binary knows is refused.
public struct Migrator: Sendable {
    public struct Migration: Sendable, Equatable {
        public let version: Int
        public let name: String
        public let sql: String
    }

    public enum Failure: Error, CustomStringConvertible {
        case directoryMissing(String)
        case badFileName(String)
        case duplicateVersion(Int)
        case failed(version: Int, name: String, reason: String)
        case databaseNewer(database: Int, binary: Int)
        public var description: String {
            switch self {
            case .directoryMissing(let path):
                "no migrations found: \(path) has no NNNN_name.sql files (set COSYNC_SQL_DIR or run from the project folder)"
            case .badFileName(let name): "migration file name \(name) must look like 0001_name.sql"
            case .duplicateVersion(let version): "two migration files have version \(version)"
            case .failed(let version, let name, let reason): "migration \(version) (\(name)) failed: \(reason)"
            case .databaseNewer(let database, let binary):
                "the database schema is at version \(database), newer than this binary knows (\(binary)): run a cosyncauth release that includes migration \(database), or restore a backup taken before the upgrade"
            }
        }
    }

    public let migrations: [Migration]

    public init(migrations: [Migration]) { self.migrations = migrations.sorted { $0.version < $1.version } }

    /// The migrations built into the binary.
    public static func builtIn() -> Migrator { Migrator(migrations: embedded) }

    /// Reads every `NNNN_*.sql` file of a folder (`COSYNC_SQL_DIR`, for development).
    public init(directory: URL) throws {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var found: [Migration] = []
        for file in files.sorted() where file.hasSuffix(".sql") {
            let stem = file.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]), version > 0 else {
                throw Failure.badFileName(file)
            }
            if found.contains(where: { $0.version == version }) { throw Failure.duplicateVersion(version) }
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            found.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        guard !found.isEmpty else { throw Failure.directoryMissing(directory.path) }
        self.init(migrations: found)
    }

    /// 0x636f73796e63 = "cosync": one transaction-scoped advisory lock for every node migrating this
    /// database, taken before each step, the first DDL included.
    static let lockKey = 109_281_144_006_243

    /// Applies what is missing. Returns the versions applied by this call.
    @discardableResult
    public func migrate(_ client: PostgresClient, logger: Logger) async throws -> [Int] {
        // The lock comes before any DDL: `CREATE TABLE IF NOT EXISTS` is not safe when two sessions run
        // it at once (both pass the check; one fails on pg_type_typname_nsp_index).
        try await client.transaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            try await refuseNewerDatabase(connection, logger: logger)
        }
        var applied: [Int] = []
        for migration in migrations {
            let didApply = try await client.transaction(logger: logger) { connection -> Bool in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: logger)
                let existing = try await connection.query(
                    "SELECT 1 FROM schema_migrations WHERE version = \(migration.version)", logger: logger)
                for try await _ in existing { return false }
                do {
                    for statement in SQLScript.statements(migration.sql) {
                        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                } catch let error as PSQLError {
                    throw Failure.failed(
                        version: migration.version, name: migration.name,
                        reason: describeForOperator(error))
                }
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                    logger: logger)
                return true
            }
            if didApply {
                logger.info("applied migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
                applied.append(migration.version)
            }
        }
        return applied
    }

    /// Throws `databaseNewer` when the database holds a version above the newest this binary knows:
    /// an older binary must not serve (or migrate) a schema written for a newer one.
    func refuseNewerDatabase(_ connection: PostgresConnection, logger: Logger) async throws {
        let rows = try await connection.query("SELECT max(version) FROM schema_migrations", logger: logger)
        for try await version in rows.decode(Int?.self) {
            if let version, version > latestVersion { throw Failure.databaseNewer(database: version, binary: latestVersion) }
        }
    }

    /// The migrations not yet applied to the database, without applying anything (`migrate --dry-run`).
    /// Throws `databaseNewer` as `migrate` would.
    public func pending(_ client: PostgresClient, logger: Logger) async throws -> [Migration] {
        try await client.withConnection { connection in
            let exists = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
            var hasTable = false
            for try await flag in exists.decode(Bool.self) { hasTable = flag }
            guard hasTable else { return migrations }
            try await refuseNewerDatabase(connection, logger: logger)
            let rows = try await connection.query("SELECT version FROM schema_migrations", logger: logger)
            var applied = Set<Int>()
            for try await version in rows.decode(Int.self) { applied.insert(version) }
            return migrations.filter { !applied.contains($0.version) }
        }
    }

    /// The newest version applied to the database, or nil when none is.
    public func appliedVersion(_ client: PostgresClient, logger: Logger) async throws -> Int? {
        let rows = try await client.query(
            "SELECT max(version) FROM schema_migrations", logger: logger)
        for try await version in rows.decode(Int?.self) { return version }
        return nil
    }

    public var latestVersion: Int { migrations.last?.version ?? 0 }
}
