import ArgumentParser
import CosyncAuth
import Foundation
import PostgresNIO

/// `cosyncauth bench-bare`: serves the bare Hummingbird yardstick (`buildBareBenchApplication`) on its own
/// port, on a PostgresClient built as `serve` builds its own (same URL parsing, same pool size), until it
/// is stopped. tools/bench/request-cost.sh runs it beside the server.
struct BenchBare: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-bare",
        abstract: "Serve a bare Hummingbird route pair (/healthz, /user/{id}: one primary-key SELECT) to measure the server against.")

    @OptionGroup var db: DatabaseOptions

    @Option(help: "Address to listen on") var host: String = "127.0.0.1"
    @Option(help: "Port to listen on") var port: Int = 18099

    func run() async throws {
        guard (1...65535).contains(port) else { throw ValidationError("port 1-65535") }
        try await Failure.guarded {
            let database = try db.database()
            let logger = makeLogger("cosyncauth.bench")
            let pool = try servePoolSize(database)
            let (host, port) = (self.host, self.port)
            try await withDatabase(database, logger: logger, maxConnections: pool) { client in
                try await buildBareBenchApplication(client: client, host: host, port: port, logger: logger).runService()
            }
        }
    }
}
