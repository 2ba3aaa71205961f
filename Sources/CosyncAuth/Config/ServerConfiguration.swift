import Foundation

/// Everything the server needs, read from flags and environment variables, validated up front.
public struct ServerConfiguration: Sendable {
    public var database: DatabaseURL
    public var port: Int
    public var host: String
    public var operatorToken: String?
    public var secretBox: SecretBox
    public var publicURL: String
    /// bcrypt cost for new password hashes. 10 in production (the legacy cost); tests may lower it.
    public var bcryptCost: Int
    public var databaseMaxConnections: Int

    public init(
        database: DatabaseURL, port: Int = 8080, host: String = "0.0.0.0", operatorToken: String?,
        secretBox: SecretBox, publicURL: String, bcryptCost: Int = 10, databaseMaxConnections: Int = 20
    ) {
        self.database = database
        self.port = port
        self.host = host
        self.operatorToken = operatorToken
        self.secretBox = secretBox
        self.publicURL = publicURL
        self.bcryptCost = bcryptCost
        self.databaseMaxConnections = databaseMaxConnections
    }

    public static func parseDatabaseURL(_ value: String?) throws -> DatabaseURL {
        guard let value, !value.isEmpty else {
            throw ConfigurationError("DATABASE_URL", "is not set (e.g. postgres://postgres@127.0.0.1:5432/cosyncauth)")
        }
        return try DatabaseURL(value)
    }

    public static func parseMasterKey(_ value: String?) throws -> SecretBox {
        guard let value, !value.isEmpty else {
            throw ConfigurationError(
                "COSYNC_MASTER_KEY",
                "is not set; it encrypts secrets at rest (32 random bytes as base64: openssl rand -base64 32)")
        }
        do {
            return try SecretBox(masterKey: value)
        } catch {
            throw ConfigurationError("COSYNC_MASTER_KEY", "must be 32 bytes, given as 64 hex characters or base64")
        }
    }

    public static func parsePort(_ value: String?, setting: String = "PORT") throws -> Int {
        guard let value, !value.isEmpty else { return 8080 }
        guard let port = Int(value), (1...65535).contains(port) else {
            throw ConfigurationError(setting, "must be a number from 1 to 65535, got '\(value)'")
        }
        return port
    }

    public static func parseOperatorToken(_ value: String?) throws -> String? {
        guard let value, !value.isEmpty else { return nil }
        guard value.count >= 24 else {
            throw ConfigurationError("COSYNC_OPERATOR_TOKEN", "is too short (at least 24 characters)")
        }
        guard value.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw ConfigurationError("COSYNC_OPERATOR_TOKEN", "must be printable ASCII without spaces")
        }
        return value
    }

    public static func parsePublicURL(_ value: String?, port: Int) throws -> String {
        guard let value, !value.isEmpty else { return "http://localhost:\(port)" }
        guard let url = URL(string: value), let scheme = url.scheme, ["http", "https"].contains(scheme),
            url.host != nil
        else {
            throw ConfigurationError("COSYNC_PUBLIC_URL", "must be an http(s) URL such as https://auth.example.com")
        }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    public static func parseBcryptCost(_ value: String?) throws -> Int {
        guard let value, !value.isEmpty else { return 10 }
        guard let cost = Int(value), (4...16).contains(cost) else {
            throw ConfigurationError("COSYNC_BCRYPT_COST", "must be a number from 4 to 16")
        }
        return cost
    }
}
