import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing

/// Issue 13: embedded migrations, refusing a newer schema, `doctor`, readiness and the availability gate.
@Suite("Operations: migrations, doctor, readiness")
struct OperationsTests {
    @Test("the migrations built into the binary are the sql/ files, byte for byte")
    func embeddedMigrationsMatchFiles() throws {
        let files = try TestEnvironment.migrator().migrations
        let embedded = Migrator.embedded
        #expect(embedded.map(\.version) == files.map(\.version))
        #expect(embedded.map(\.name) == files.map(\.name))
        for (built, file) in zip(embedded, files) {
            var text = file.sql
            while text.hasSuffix("\n") { text.removeLast() }
            #expect(built.sql == text, "migration \(file.version) differs: run tools/embed-migrations.sh")
        }
        #expect(Migrator.builtIn().latestVersion == files.last?.version)
    }

    @Test("dry-run lists what is missing; a database at a newer version is refused by migrate, dry-run and readiness")
    func newerSchemaRefused() async throws {
        let services = try await TestEnvironment.services()
        let (_, client, runner) = try await LegacyImportTests.scratchDatabase(services, "ops_newer")
        defer { runner.cancel() }
        let migrator = Migrator.builtIn()
        let all = try await migrator.pending(client, logger: services.logger)
        #expect(all.map(\.version) == migrator.migrations.map(\.version), "an empty database lacks every migration")
        try await migrator.migrate(client, logger: services.logger)
        let none = try await migrator.pending(client, logger: services.logger)
        #expect(none.isEmpty)

        let future = migrator.latestVersion + 1
        try await client.query("INSERT INTO schema_migrations (version, name) VALUES (\(future), 'from_the_future')", logger: services.logger)
        await #expect {
            try await migrator.migrate(client, logger: services.logger)
        } throws: { error in
            guard case Migrator.Failure.databaseNewer(let database, let binary) = error else { return false }
            return database == future && binary == migrator.latestVersion
        }
        await #expect(throws: Migrator.Failure.self) { try await migrator.pending(client, logger: services.logger) }
        // Nothing was applied or removed by the refusals.
        let count = try await TestEnvironment.value("SELECT count(*)::int FROM schema_migrations", as: Int.self, on: client)
        #expect(count == migrator.migrations.count + 1)
    }

    @Test("doctor opens the sealed values with the right master key and names them with a wrong one")
    func doctor() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withAPI { api in _ = try await api.createApp("Doctor") }
        let good = try await Doctor(client: services.client, box: services.configuration.secretBox, migrator: services.migrator, logger: services.logger).run()
        #expect(good.allSatisfy { $0.ok }, "\(good.map { "\($0.name): \($0.detail)" })")
        #expect(good.contains { $0.name == "app signing keys" && $0.detail.contains("opened") })

        let otherKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let wrong = try await Doctor(
            client: services.client, box: try ServerConfiguration.parseMasterKey(otherKey), migrator: services.migrator,
            logger: services.logger
        ).run()
        #expect(wrong.first { $0.name == "schema version" }?.ok == true)
        for kind in ["server keys", "app signing keys", "app tokens"] {
            let check = wrong.first { $0.name == kind }
            #expect(check?.ok == false && check?.detail.contains("COSYNC_MASTER_KEY") == true, "\(kind): \(check?.detail ?? "missing")")
        }
    }

    @Test("database unreachable: API requests answer 503 at once with Retry-After; draining: readyz 503, requests still served")
    func availabilityGate() async throws {
        let node = try await TestEnvironment.services().withOwnState()
        let app = Application(router: buildRouter(services: node))
        try await app.test(.router) { client in
            let api = API(client: client)
            let created = try await api.createApp("Gate")
            let token = created.string("appToken")
            let getApplication: HTTPFields = [.init("app-token")!: token]
            #expect(try await api.call(.get, "/readyz").object["status"] == .string("ready"))

            node.state.setDatabaseUp(false)
            let started = ContinuousClock.now
            let refused = try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: getApplication)
            #expect(refused.status == .serviceUnavailable && refused.headers[.retryAfter] != nil, "\(refused.status) \(refused.text)")
            #expect(refused.object["code"] == .int(503))
            #expect(try await api.call(.get, "/admin/v1/apps").status == .serviceUnavailable)
            #expect(ContinuousClock.now - started < .seconds(1))
            #expect(try await api.call(.get, "/healthz").status == .ok, "liveness does not depend on the database")
            let ready = try await api.call(.get, "/readyz")
            #expect(ready.status == .serviceUnavailable && ready.object["status"] == .string("database_unavailable"))

            node.state.setDatabaseUp(true)
            #expect(try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: getApplication).status == .ok)

            node.state.startDraining()
            let draining = try await api.call(.get, "/readyz")
            #expect(draining.status == .serviceUnavailable && draining.object["status"] == .string("draining"))
            #expect(try await api.call(.get, "/api/appuser/getApplication", token: nil, headers: getApplication).status == .ok,
                    "a draining node keeps serving until its listener closes")
        }
    }

    @Test("the database monitor marks PostgreSQL down within seconds when it cannot connect, and up again when it can; a failing probe connection alone is not an outage")
    func databaseMonitor() async throws {
        let services = try await TestEnvironment.services()
        let unreachable = try DatabaseURL("postgres://postgres@127.0.0.1:1/none?sslmode=disable")
        let deadPool = PostgresClient(configuration: unreachable.clientConfiguration(maxConnections: 1), backgroundLogger: services.logger)
        let deadPoolRunner = Task { await deadPool.run() }
        defer { deadPoolRunner.cancel() }

        func watch(_ monitor: DatabaseMonitor, until done: @escaping @Sendable () -> Bool, seconds: Int = 6) async throws {
            let running = Task { await monitor.probeLoopForTests() }
            defer { running.cancel() }
            let started = ContinuousClock.now
            while !done(), ContinuousClock.now - started < .seconds(seconds) { try await Task.sleep(for: .milliseconds(50)) }
        }

        let state = ServerState()
        // Neither the probe nor the pool can reach PostgreSQL: down.
        try await watch(DatabaseMonitor(
            database: unreachable, client: deadPool, state: state, logger: services.logger,
            interval: .milliseconds(200), probeTimeout: .milliseconds(500)), until: { !state.isDatabaseUp })
        #expect(!state.isDatabaseUp, "an unreachable database is noticed")

        // Back: up again.
        try await watch(DatabaseMonitor(
            database: services.configuration.database, client: services.client, state: state, logger: services.logger,
            interval: .milliseconds(200), probeTimeout: .seconds(2)), until: { state.isDatabaseUp })
        #expect(state.isDatabaseUp, "a reachable database is noticed")

        // The probe's own connection fails (as when PostgreSQL is at max_connections) but the pool
        // answers: not an outage, the node keeps serving.
        let probeOnly = DatabaseMonitor(
            database: unreachable, client: services.client, state: state, logger: services.logger,
            interval: .milliseconds(200), probeTimeout: .milliseconds(500))
        let running = Task { await probeOnly.probeLoopForTests() }
        try await Task.sleep(for: .seconds(2))
        running.cancel()
        #expect(state.isDatabaseUp, "a failing probe connection with a working pool is not an outage")
    }
}
