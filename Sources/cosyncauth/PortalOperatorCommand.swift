import ArgumentParser
import CosyncAuth
import Foundation

/// `cosyncauth portal-operator --email E`: the first operator's way into the Portal, and an operator's
/// way back in after losing the password or the authenticator. Prints a one-time invite link; opening
/// it sets the password and enrols a TOTP authenticator.
struct PortalOperatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portal-operator",
        abstract: "Print a one-time link that makes (or recovers) a Portal operator account.",
        discussion: """
            Open the link in a browser within 7 days: it sets the operator's password, then enrols a TOTP \
            authenticator app. For an existing account it replaces the password and the authenticator and \
            ends its sessions. Running the command again makes the previous link stop working. The link is \
            printed, not e-mailed: treat it as a password.
            """)

    @OptionGroup var db: DatabaseOptions
    @OptionGroup var secrets: SecretOptions

    @Option(help: "The operator's e-mail address (the sign-in name)")
    var email: String

    @Option(name: .customLong("public-url"), help: "The server's public base URL (env COSYNC_PUBLIC_URL; default http://localhost:PORT)")
    var publicURL: String?

    func run() async throws {
        try await Failure.guarded {
            let port = try ServerConfiguration.parsePort(Environment.value("PORT"))
            let database = try db.database()
            let migrator = try db.migrator()
            let configuration = ServerConfiguration(
                database: database, operatorToken: nil, secretBox: try secrets.box(),
                publicURL: try ServerConfiguration.parsePublicURL(publicURL ?? Environment.value("COSYNC_PUBLIC_URL"), port: port))
            let logger = makeLogger("cosyncauth.portal")
            let email = self.email
            let link = try await withDatabase(database, logger: logger, maxConnections: 2) { client in
                let (services, _) = try await CosyncServices.prepare(
                    configuration: configuration, client: client, migrator: migrator, logger: logger)
                do {
                    let code = try await services.portal.bootstrapOperator(email: email)
                    return services.portal.inviteLink(code: code)
                } catch let error as PortalError {
                    throw ConfigurationError("--email", error.description)
                }
            }
            print(link)
            FileHandle.standardError.write(
                Data("open it within 7 days to set the password of \(email.lowercased()) and enrol an authenticator app\n".utf8))
        }
    }
}
