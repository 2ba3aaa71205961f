import ArgumentParser
import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

@main
struct CosyncAuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cosyncauth",
        abstract: "CosyncAuth: a multi-tenant authentication server for mobile apps, on PostgreSQL.",
        subcommands: [
            Serve.self, Migrate.self, AppCommand.self, ImportLegacyCommand.self, OperatorTokenCommand.self, PortalOperatorCommand.self,
            DoctorCommand.self, BenchBcrypt.self, BenchPasskey.self, BenchPKSelect.self, BenchToken.self, BenchSeedApps.self, BenchBare.self,
        ],
        defaultSubcommand: Serve.self)
}

/// Settings shared by the commands: flags win over environment variables.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "PostgreSQL URL (env DATABASE_URL), e.g. postgres://user@127.0.0.1:5432/cosyncauth")
    var databaseURL: String?

    @Option(name: .customLong("sql-dir"), help: "Read the NNNN_name.sql migrations from this folder instead of those built into the binary (env COSYNC_SQL_DIR; for development)")
    var sqlDir: String?

    func database() throws -> DatabaseURL {
        try ServerConfiguration.parseDatabaseURL(databaseURL ?? Environment.value("DATABASE_URL"))
    }

    /// The migrations built into the binary, unless a folder is named.
    func migrator() throws -> Migrator {
        guard let dir = sqlDir ?? Environment.value("COSYNC_SQL_DIR") else { return Migrator.builtIn() }
        do {
            return try Migrator(directory: URL(fileURLWithPath: dir))
        } catch let failure as Migrator.Failure {
            throw ConfigurationError("COSYNC_SQL_DIR", failure.description)
        }
    }
}

struct SecretOptions: ParsableArguments {
    @Option(name: .customLong("master-key"), help: "32-byte key sealing secrets at rest, as base64 or hex (env COSYNC_MASTER_KEY). Prefer the env var.")
    var masterKey: String?

    func box() throws -> SecretBox { try ServerConfiguration.parseMasterKey(masterKey ?? Environment.value("COSYNC_MASTER_KEY")) }
}

enum Environment {
    static func value(_ name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
        return value
    }
}

/// The connection pool size `serve` uses (ServerConfiguration's), for the bench commands that measure
/// against it: read through a configuration with a throwaway master key (nothing is sealed with it).
func servePoolSize(_ database: DatabaseURL) throws -> Int {
    ServerConfiguration(
        database: database, operatorToken: nil, secretBox: try SecretBox(masterKey: Data(count: 32).base64EncodedString()),
        publicURL: "http://localhost"
    ).databaseMaxConnections
}

/// Runs `body` with a running PostgresClient; maps configuration and connection problems to a
/// one-line error and exit code 2 (never a stack trace).
func withDatabase<T: Sendable>(
    _ database: DatabaseURL, logger: Logger, maxConnections: Int = 20,
    _ body: @Sendable @escaping (PostgresClient) async throws -> T
) async throws -> T {
    let client = PostgresClient(configuration: database.clientConfiguration(maxConnections: maxConnections), backgroundLogger: logger)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            await client.run()
            return nil
        }
        defer { group.cancelAll() }
        // Let the pool start before the first query (avoids PostgresNIO's "run() not called" warning).
        try await Task.sleep(for: .milliseconds(20))
        do {
            try await withDeadline(.seconds(15)) { try await client.query("SELECT 1", logger: logger); return true }
        } catch {
            throw ConfigurationError(
                "DATABASE_URL", "cannot connect to PostgreSQL at \(database.host):\(database.port)/\(database.database) (\(Failure.summary(error)))")
        }
        return try await body(client)
    }
}

enum Failure {
    static func summary(_ error: any Error) -> String { describeForOperator(error) }

    /// Runs a command body: a bad setting prints `cosyncauth: <setting>: <problem>` and exits 2.
    static func guarded(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("cosyncauth: \(error.description)\n".utf8))
            throw ExitCode(2)
        } catch let error as SecretBox.Failure {
            FileHandle.standardError.write(Data("cosyncauth: COSYNC_MASTER_KEY: \(error.description)\n".utf8))
            throw ExitCode(2)
        } catch let error as Migrator.Failure {
            FileHandle.standardError.write(Data("cosyncauth: migrate: \(error.description)\n".utf8))
            throw ExitCode(1)
        } catch let error as AdminFailure {
            FileHandle.standardError.write(Data("cosyncauth: \(error.description)\n".utf8))
            throw ExitCode(1)
        } catch let error as PSQLError {
            // PSQLError's own text is deliberately generic: the SQLSTATE and the server's message instead.
            FileHandle.standardError.write(Data("cosyncauth: database error: \(describeForOperator(error))\n".utf8))
            throw ExitCode(1)
        }
    }
}

func makeLogger(_ label: String) -> Logger {
    LogSetup.bootstrapped
    var logger = Logger(label: label)
    let level = Environment.value("LOG_LEVEL").flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
    logger.logLevel = level
    return logger
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply migrations, then serve the HTTP API.")

    @OptionGroup var db: DatabaseOptions
    @OptionGroup var secrets: SecretOptions

    @Option(help: "Port to listen on (env PORT; default 8080)")
    var port: String?

    @Option(help: "Address to bind (env HOST; default 0.0.0.0)")
    var host: String?

    @Option(name: .customLong("operator-token"), help: "Operator bearer token (env COSYNC_OPERATOR_TOKEN). Without one, the server makes one on first start and prints it once.")
    var operatorToken: String?

    @Option(name: .customLong("public-url"), help: "Public base URL used in e-mailed links (env COSYNC_PUBLIC_URL; default http://localhost:PORT)")
    var publicURL: String?

    @Option(name: .customLong("metrics-host"), help: "Address of the metrics listener, which alone serves GET /metrics (env COSYNC_METRICS_HOST; default 127.0.0.1)")
    var metricsHost: String?

    @Option(name: .customLong("metrics-port"), help: "Port of the metrics listener, or off (env COSYNC_METRICS_PORT; default 9464; never the public port)")
    var metricsPort: String?

    func run() async throws {
        try await Failure.guarded {
            let port = try ServerConfiguration.parsePort(self.port ?? Environment.value("PORT"))
            var configuration = ServerConfiguration(
                database: try db.database(), port: port, host: host ?? Environment.value("HOST") ?? "0.0.0.0",
                operatorToken: try ServerConfiguration.parseOperatorToken(operatorToken ?? Environment.value("COSYNC_OPERATOR_TOKEN")),
                secretBox: try secrets.box(),
                publicURL: try ServerConfiguration.parsePublicURL(publicURL ?? Environment.value("COSYNC_PUBLIC_URL"), port: port),
                bcryptCost: try ServerConfiguration.parseBcryptCost(Environment.value("COSYNC_BCRYPT_COST")))
            try configuration.readDeliverySettings(ProcessInfo.processInfo.environment)
            configuration.metricsListener = try ServerConfiguration.parseMetricsListener(
                host: metricsHost ?? Environment.value("COSYNC_METRICS_HOST"), port: metricsPort ?? Environment.value("COSYNC_METRICS_PORT"),
                publicPort: port)
            let migrator = try db.migrator()
            let logger = makeLogger("cosyncauth")
            // Bootstrapped before any metric is made; without a listener nothing would read it.
            let registry = configuration.metricsListener == nil ? nil : MetricsRegistry.process
            let tracing = try TracingSetup.bootstrap(logger: logger)
            let settings = configuration
            try await withDatabase(settings.database, logger: logger, maxConnections: settings.databaseMaxConnections) { client in
                let (services, generated) = try await CosyncServices.prepare(
                    configuration: settings, client: client, migrator: migrator, logger: logger)
                if let generated {
                    print("operator token (shown once; only its hash is stored): \(generated)")
                }
                let app = buildApplication(services: services, logger: logger)
                // Shut down in reverse order: the drain gate first (readyz 503, keep serving for the
                // drain delay), then the application (stop accepting, finish in-flight requests, stop
                // the workers), then the metrics listener (scrapes see the drain), the tracing exporter
                // last (it flushes the final spans).
                var order: [any Service] = tracing.map { [$0] } ?? []
                if let registry, let listener = settings.metricsListener {
                    logger.notice("metrics served on their own listener", metadata: ["address": "\(listener.host):\(listener.port)"])
                    order.append(buildMetricsApplication(registry: registry, host: listener.host, port: listener.port, logger: logger))
                } else {
                    logger.notice("metrics listener off (COSYNC_METRICS_PORT=off)")
                }
                order += [app, DrainGate(state: services.state, delay: settings.shutdownDrain, logger: logger)]
                var group = ServiceGroupConfiguration(
                    services: order.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
                    gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
                group.maximumGracefulShutdownDuration = settings.shutdownDrain + settings.shutdownTimeout
                group.maximumCancellationDuration = .seconds(10)
                try await ServiceGroup(configuration: group).run()
            }
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the migrations that are missing (idempotent; safe from several nodes at once).",
        discussion: "The migrations are built into the binary. A database at a newer schema version than the binary knows is refused.")

    @OptionGroup var db: DatabaseOptions

    @Flag(name: .customLong("dry-run"), help: "List the migrations that would run, and change nothing.")
    var dryRun = false

    func run() async throws {
        try await Failure.guarded {
            let database = try db.database()
            let migrator = try db.migrator()
            let logger = makeLogger("cosyncauth.migrate")
            if dryRun {
                let pending = try await withDatabase(database, logger: logger, maxConnections: 1) { client in
                    try await migrator.pending(client, logger: logger)
                }
                if pending.isEmpty { print("database is up to date (version \(migrator.latestVersion)); nothing would run") }
                for migration in pending { print("would apply \(String(format: "%04d", migration.version))_\(migration.name)") }
                return
            }
            let applied = try await withDatabase(database, logger: logger, maxConnections: 2) { client in
                try await migrator.migrate(client, logger: logger)
            }
            print(applied.isEmpty
                ? "database is up to date (version \(migrator.latestVersion))"
                : "applied migrations \(applied.map(String.init).joined(separator: ", "))")
        }
    }
}

struct OperatorTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "operator-token", abstract: "Manage the stored operator token.", subcommands: [Reset.self])

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new stored operator token and print it (used when COSYNC_OPERATOR_TOKEN is not set).",
            discussion: "Running servers accept the new token, and refuse the old one, within 2 seconds.")
        @OptionGroup var db: DatabaseOptions

        func run() async throws {
            try await Failure.guarded {
                let database = try db.database()
                let migrator = try db.migrator()
                let logger = makeLogger("cosyncauth")
                let token = try await withDatabase(database, logger: logger, maxConnections: 2) { client in
                    try await migrator.migrate(client, logger: logger)
                    return try await OperatorToken.reset(client: client, logger: logger)
                }
                print(token)
                if Environment.value("COSYNC_OPERATOR_TOKEN") != nil {
                    FileHandle.standardError.write(Data("warning: COSYNC_OPERATOR_TOKEN is set here; servers started with it keep using it, not the stored token\n".utf8))
                }
            }
        }
    }
}
