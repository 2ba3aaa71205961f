import CosyncAuth
import Foundation
import Logging
import PostgresNIO
import Testing

/// Migrations from several nodes at once, and SQL errors as operators see them.
@Suite("Concurrent migrations and operator-visible SQL errors", .serialized)
struct OperationsHardeningTests {
    /// `count` clients (one per "node") on a new, empty database of the test cluster, already connected.
    static func emptyDatabase(_ services: CosyncServices, nodes count: Int) async throws -> (url: String, clients: [PostgresClient], runners: [Task<Void, Never>]) {
        let (url, first, firstRunner) = try await LegacyImportTests.scratchDatabase(services, "migrate_race")
        var clients = [first]
        var runners = [firstRunner]
        for _ in 1..<count {
            let client = PostgresClient(configuration: try DatabaseURL(url).clientConfiguration(maxConnections: 2), backgroundLogger: services.logger)
            runners.append(Task { await client.run() })
            clients.append(client)
        }
        for client in clients { try await client.query("SELECT 1", logger: services.logger) }
        return (url, clients, runners)
    }

    @Test("4 nodes migrating an empty database at the same moment all succeed, and each migration is applied once")
    func concurrentMigrations() async throws {
        let services = try await TestEnvironment.services()
        let migrator = try TestEnvironment.migrator()
        let versions = migrator.migrations.map(\.version)
        // Several rounds: without the lock before the first DDL, one node of 4 fails in almost every round.
        for _ in 0..<4 {
            let (_, clients, runners) = try await Self.emptyDatabase(services, nodes: 4)
            defer { runners.forEach { $0.cancel() } }
            let outcomes = await withTaskGroup(of: Result<[Int], OperatorText>.self) { group in
                for client in clients {
                    group.addTask {
                        do { return .success(try await migrator.migrate(client, logger: services.logger)) } catch {
                            return .failure(OperatorText(text: describeForOperator(error)))
                        }
                    }
                }
                var all: [Result<[Int], OperatorText>] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
            let failures = outcomes.compactMap { if case .failure(let f) = $0 { f.text } else { nil } }
            #expect(failures.isEmpty, "\(failures)")
            let applied = outcomes.flatMap { (try? $0.get()) ?? [] }.sorted()
            #expect(applied == versions, "every migration applied by exactly one node")
            let recorded = try await TestEnvironment.value(
                "SELECT count(*)::int FROM schema_migrations", as: Int.self, on: clients[0])
            #expect(recorded == versions.count)
        }
    }

    struct OperatorText: Error { let text: String }

    @Test("a PostgreSQL error is described with its SQLSTATE and the server's message, never the values")
    func operatorDescription() async throws {
        let services = try await TestEnvironment.services()
        try await services.client.withConnection { db in
            _ = try await db.query("CREATE TEMP TABLE operator_error_probe (id int PRIMARY KEY)", logger: services.logger)
            _ = try await db.query("INSERT INTO operator_error_probe VALUES (\(424_242))", logger: services.logger)
            do {
                _ = try await db.query("INSERT INTO operator_error_probe VALUES (\(424_242))", logger: services.logger)
                Issue.record("the duplicate insert should fail")
            } catch {
                let text = describeForOperator(error)
                #expect(text.contains("SQLSTATE 23505"), "\(text)")
                #expect(text.contains(#"duplicate key value violates unique constraint "operator_error_probe_pkey""#), "\(text)")
                #expect(!text.contains("424242"), "the row's values stay out: \(text)")
                // What PostgresNIO prints on its own says none of it.
                #expect(!"\(error)".contains("23505"))
            }
        }
    }

    @Test("the CLI prints the SQLSTATE and the server's message of a failing statement")
    func cliShowsSQLState() async throws {
        let services = try await TestEnvironment.services()
        let (url, clients, runners) = try await Self.emptyDatabase(services, nodes: 1)
        defer { runners.forEach { $0.cancel() } }
        // A schema_migrations table of another shape: the migrator's first query on it fails.
        try await clients[0].query("CREATE TABLE schema_migrations (x int)", logger: services.logger)
        let process = Process()
        process.executableURL = LegacyFixture.root.appendingPathComponent(".build/debug/cosyncauth")
        process.arguments = ["migrate"]
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = url
        env["LOG_LEVEL"] = "error"
        process.environment = env
        let stderr = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = stderr
        try process.run()
        let output = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus != 0)
        #expect(output.contains("SQLSTATE 42703") && output.contains(#"column "version" does not exist"#), "\(output)")
        #expect(!output.contains("Generic description"), "\(output)")
    }
}
