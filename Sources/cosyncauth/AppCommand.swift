import ArgumentParser
import CosyncAuth
import Foundation
import Logging

/// `cosyncauth app create|list|show`: the same services the admin API uses, from the shell.
struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app", abstract: "Create, list and show apps (tenants).", subcommands: [Create.self, List.self, Show.self])

    static func services(_ db: DatabaseOptions, _ secrets: SecretOptions, _ body: @Sendable @escaping (CosyncServices) async throws -> Void) async throws {
        let database = try db.database()
        let migrator = try db.migrator()
        let configuration = ServerConfiguration(
            database: database, operatorToken: nil, secretBox: try secrets.box(), publicURL: "http://localhost:8080")
        let logger = makeLogger("cosyncauth.app")
        try await withDatabase(database, logger: logger, maxConnections: 4) { client in
            let (services, _) = try await CosyncServices.prepare(
                configuration: configuration, client: client, migrator: migrator, logger: logger)
            try await body(services)
        }
    }

    static func printJSON(_ object: [String: JSONValue]) throws {
        let encoder = JSONCoding.encoder()
        encoder.outputFormatting.insert(.prettyPrinted)
        print(String(decoding: try encoder.encode(JSONValue.object(object)), as: UTF8.self))
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app and print it with its secret (shown only now).")
        @OptionGroup var db: DatabaseOptions
        @OptionGroup var secrets: SecretOptions

        @Argument(help: "The app's name")
        var name: String

        @Option(help: "Settings as a JSON object, e.g. '{\"signupFlow\":\"none\"}'")
        var settings: String?

        func run() async throws {
            try await Failure.guarded {
                var input: [String: JSONValue] = [:]
                if let settings {
                    guard let parsed = try? JSONDecoder().decode(JSONValue.self, from: Data(settings.utf8)).objectValue else {
                        throw ConfigurationError("--settings", "must be a JSON object")
                    }
                    input = parsed
                }
                input["name"] = .string(name)
                let finalInput = input
                try await AppCommand.services(db, secrets) { services in
                    let created = try await services.apps.create(finalInput, actor: "cli")
                    var object = try created.app.json()
                    object["appSecret"] = .string(created.appSecret)
                    try AppCommand.printJSON(object)
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List apps, newest first.")
        @OptionGroup var db: DatabaseOptions
        @OptionGroup var secrets: SecretOptions

        @Option(help: "Name or appId prefix") var query: String?
        @Option(help: "Page size (1-200)") var limit: Int = 50
        @Option(help: "Cursor from a previous page") var cursor: String?

        func run() async throws {
            try await Failure.guarded {
                guard (1...200).contains(limit) else { throw ConfigurationError("--limit", "must be from 1 to 200") }
                try await AppCommand.services(db, secrets) { services in
                    let page = try await services.apps.list(query: query, limit: limit, cursor: cursor)
                    for app in page.apps {
                        print("\(app.appId)  \(app.state.status.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0))  \(app.state.name)")
                    }
                    if let next = page.nextCursor { print("next page: --cursor \(next)") }
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one app and its settings.")
        @OptionGroup var db: DatabaseOptions
        @OptionGroup var secrets: SecretOptions
        @Argument(help: "The appId") var appId: String

        func run() async throws {
            try await Failure.guarded {
                try await AppCommand.services(db, secrets) { services in
                    try AppCommand.printJSON(try await services.apps.view(appId: appId).json())
                }
            }
        }
    }
}
