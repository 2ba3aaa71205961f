import Foundation
import NIOSSL
import PostgresNIO

/// Parses `DATABASE_URL` (`postgres://user:password@host:port/database?sslmode=disable|prefer|require`)
/// into a PostgresClient configuration.
public struct DatabaseURL: Sendable {
    public let host: String
    public let port: Int
    public let username: String
    public let password: String?
    public let database: String
    public let sslMode: String

    public init(_ text: String, setting: String = "DATABASE_URL") throws {
        guard let url = URLComponents(string: text),
            let scheme = url.scheme, ["postgres", "postgresql"].contains(scheme)
        else {
            throw ConfigurationError(setting, "must look like postgres://user:password@host:port/database")
        }
        guard let host = url.host, !host.isEmpty else { throw ConfigurationError(setting, "has no host") }
        guard let user = url.user, !user.isEmpty else { throw ConfigurationError(setting, "has no user name") }
        let database = String(url.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else { throw ConfigurationError(setting, "has no database name") }
        let port = url.port ?? 5432
        guard (1...65535).contains(port) else { throw ConfigurationError(setting, "has a bad port") }
        let mode = url.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        guard ["disable", "prefer", "require"].contains(mode) else {
            throw ConfigurationError(setting, "sslmode must be disable, prefer or require")
        }
        self.host = host
        self.port = port
        self.username = user.removingPercentEncoding ?? user
        self.password = url.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database.removingPercentEncoding ?? database
        self.sslMode = mode
    }

    /// `sslmode`, except that `prefer` (the default) on a loopback host means no TLS.
    var effectiveSSLMode: String {
        if sslMode == "prefer", ["127.0.0.1", "localhost", "::1"].contains(host) { return "disable" }
        return sslMode
    }

    public func clientConfiguration(maxConnections: Int = 20) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch effectiveSSLMode {
        case "disable": tls = .disable
        case "require": tls = .require(.makeClientConfiguration())
        default: tls = .prefer(.makeClientConfiguration())
        }
        var config = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        config.options.maximumConnections = maxConnections
        config.options.additionalStartupParameters = [("application_name", applicationName)]
        return config
    }

    /// Names this process's pool connections in `pg_stat_activity` (the pool metrics count them).
    public var applicationName: String { Self.processApplicationName }

    static let processApplicationName: String = {
        let host = ProcessInfo.processInfo.hostName.prefix(32)
        return "cosyncauth \(host) \(ProcessInfo.processInfo.processIdentifier)"
    }()

    /// A single connection's settings, outside the pool (the database monitor's probe).
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch effectiveSSLMode {
        case "disable": tls = .disable
        case "require": tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        default: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var config = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        config.options.connectTimeout = .seconds(2)
        config.options.additionalStartupParameters = [("application_name", "\(applicationName) monitor")]
        return config
    }
}
