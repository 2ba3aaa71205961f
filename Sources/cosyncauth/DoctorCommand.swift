import ArgumentParser
import CosyncAuth
import Foundation

struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check that the schema matches this binary and that the master key opens the stored secrets.",
        discussion: "Run it after a restore or an upgrade. Exit code 0 when every check passes, 1 when one fails, 2 on a bad setting.")

    @OptionGroup var db: DatabaseOptions
    @OptionGroup var secrets: SecretOptions

    func run() async throws {
        try await Failure.guarded {
            let database = try db.database()
            let box = try secrets.box()
            let migrator = try db.migrator()
            let logger = makeLogger("cosyncauth.doctor")
            let checks = try await withDatabase(database, logger: logger, maxConnections: 2) { client in
                try await Doctor(client: client, box: box, migrator: migrator, logger: logger).run()
            }
            for check in checks { print("\(check.ok ? "ok  " : "FAIL") \(check.name): \(check.detail)") }
            if checks.contains(where: { !$0.ok }) { throw ExitCode(1) }
        }
    }
}
