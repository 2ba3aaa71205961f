import ArgumentParser
import CosyncAuth
import Foundation
import LegacyImport
import Logging

/// `cosyncauth import-legacy DIR`: brings a CosyncJWT MongoDB export into this server (README:
/// "Migrating from CosyncJWT").
struct ImportLegacyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-legacy",
        abstract: "Import a CosyncJWT database (a folder of mongoexport files) with the same appIds, app tokens, keys and passwords.",
        discussion: """
            DIR holds one mongoexport file per collection: apps.json, users.json, signups.json, invites.json, \
            resetpasswords.json, emailtemplates.json (JSON lines or --jsonArray; canonical or relaxed Extended JSON). \
            Every app is decrypted and checked before anything is written. Batches commit with a checkpoint: rerun \
            after a crash to resume; running twice leaves the database as one run does. Importing a newer export \
            never undoes what happened here: imported apps and users changed or deleted on this server are kept \
            and reported (--overwrite-local-changes overrides). Pending reset codes are carried, valid for \
            --reset-code-minutes from the import.
            """)

    @OptionGroup var db: DatabaseOptions
    @OptionGroup var secrets: SecretOptions

    @Argument(help: "The folder of mongoexport files, or the legacy server's export .zip (lossy)")
    var directory: String

    @Option(name: .customLong("encrypt-key"), help: "The legacy server's encryptKey (env COSYNC_LEGACY_ENCRYPT_KEY); omit if it ran without one")
    var encryptKey: String?

    @Flag(name: .customLong("dry-run"), help: "Read and check everything, print what would happen, write nothing")
    var dryRun = false

    @Option(help: "Duplicate handles in an app: merge-newest (keep the newest updatedAt) or skip (keep the first)")
    var duplicates: String = "merge-newest"

    @Option(help: "Where the JSON report of refused and adjusted rows goes")
    var report: String = "import-report.json"

    @Option(name: .customLong("legacy-public-key"), help: "PEM file of the legacy server's public key: its access tokens stay valid until --legacy-tokens-until")
    var legacyPublicKey: String?

    @Option(name: .customLong("legacy-tokens-until"), help: "Cut-off date (ISO 8601, e.g. 2027-01-31) for legacy access tokens")
    var legacyTokensUntil: String?

    @Option(name: .customLong("invite-days"), help: "Days an imported pending invite stays valid (legacy invites never expired)")
    var inviteDays: Int = 30

    @Option(name: .customLong("reset-code-minutes"), help: "Minutes a carried pending reset code stays valid from the import (legacy codes never expired); default COSYNC_RESET_CODE_MINUTES, else 60")
    var resetCodeMinutes: Int?

    @Flag(name: .customLong("overwrite-local-changes"), help: "Let the export overwrite imported apps and users changed on this server since an earlier import (suspended, password changed, token rotated) and re-create deleted users; by default they are kept and reported")
    var overwriteLocalChanges = false

    @Option(name: .customLong("batch-size"), help: "Rows per transaction")
    var batchSize: Int = 2000

    func run() async throws {
        try await Failure.guarded {
            var folder = URL(fileURLWithPath: directory)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory) else {
                throw ConfigurationError("DIR", "\(directory) does not exist")
            }
            var zipNotes: [ReportEntry] = []
            var convertedFolder: URL?
            defer { if let convertedFolder { try? FileManager.default.removeItem(at: convertedFolder) } }
            if !isDirectory.boolValue {
                guard directory.lowercased().hasSuffix(".zip") else {
                    throw ConfigurationError("DIR", "\(directory) is neither a folder of mongoexport files nor a legacy export .zip")
                }
                let converted: LegacyZipExport.Result
                do {
                    converted = try LegacyZipExport.convert(zip: folder, workDirectory: FileManager.default.temporaryDirectory)
                } catch let failure as ImportFailure {
                    FileHandle.standardError.write(Data("cosyncauth: import-legacy: \(failure.description)\n".utf8))
                    throw ExitCode(1)
                }
                folder = converted.folder
                convertedFolder = converted.folder
                FileHandle.standardError.write(Data("""
                    warning: a legacy export ZIP is lossy. It does not carry:
                    \(LegacyZipExport.alwaysLost.map { "  - " + $0 }.joined(separator: "\n"))
                    Prefer a mongoexport of the legacy database (README: Migrating from CosyncJWT).

                    """.utf8))
                for (field, rows) in converted.losses.sorted(by: { $0.key < $1.key }) {
                    zipNotes.append(ReportEntry(collection: "zip", legacyId: "", appId: "", handle: nil, action: "lost",
                                                reason: "\(field): \(rows) rows held [object Object] or an unreadable value; not carried"))
                }
            }
            guard let policy = ImportOptions.DuplicatePolicy(rawValue: duplicates) else {
                throw ConfigurationError("--duplicates", "must be merge-newest or skip")
            }
            guard (1...100_000).contains(batchSize) else { throw ConfigurationError("--batch-size", "must be 1 to 100000") }
            guard (1...3650).contains(inviteDays) else { throw ConfigurationError("--invite-days", "must be 1 to 3650") }
            var options = ImportOptions(directory: folder, encryptKey: encryptKey ?? Environment.value("COSYNC_LEGACY_ENCRYPT_KEY"))
            options.dryRun = dryRun
            options.duplicates = policy
            options.batchSize = batchSize
            options.inviteValidity = Double(inviteDays) * 86400
            let resetMinutes: Int
            if let resetCodeMinutes {
                resetMinutes = resetCodeMinutes
            } else if let text = Environment.value("COSYNC_RESET_CODE_MINUTES") {
                guard let minutes = Int(text) else { throw ConfigurationError("COSYNC_RESET_CODE_MINUTES", "must be a number of minutes") }
                resetMinutes = minutes
            } else {
                resetMinutes = 60
            }
            guard (5...10080).contains(resetMinutes) else { throw ConfigurationError("--reset-code-minutes", "must be 5 to 10080") }
            options.resetCodeLifetime = Double(resetMinutes) * 60
            options.overwriteLocalChanges = overwriteLocalChanges
            options.reportURL = URL(fileURLWithPath: report)
            options.notes = zipNotes
            if let legacyPublicKey {
                guard let pem = try? String(contentsOfFile: legacyPublicKey, encoding: .utf8) else {
                    throw ConfigurationError("--legacy-public-key", "cannot read \(legacyPublicKey)")
                }
                guard let text = legacyTokensUntil, let until = Self.date(text) else {
                    throw ConfigurationError("--legacy-tokens-until", "is required with --legacy-public-key, as an ISO 8601 date")
                }
                options.legacyPublicKeyPEM = pem
                options.legacyTokensUntil = until
            }
            let database = try db.database()
            let migrator = try db.migrator()
            let box = try secrets.box()
            let logger = makeLogger("cosyncauth.import")
            let finalOptions = options
            do {
                try await withDatabase(database, logger: logger, maxConnections: 4) { client in
                    var runOptions = finalOptions
                    if runOptions.dryRun {
                        // A dry run writes nothing, migrations included.
                        let applied = try? await migrator.appliedVersion(client, logger: logger)
                        runOptions.databaseReady = applied == migrator.latestVersion
                    } else {
                        try await migrator.migrate(client, logger: logger)
                    }
                    let importer = LegacyImporter(options: runOptions, client: client, box: box, logger: logger, progress: ImportProgress())
                    let summary = try await importer.run()
                    print(summary.table())
                    if finalOptions.dryRun {
                        print("dry run: nothing was written (\(summary.reportEntries) rows would be refused or adjusted)")
                    } else {
                        print("report: \(summary.reportEntries) refused/adjusted rows in \(finalOptions.reportURL?.path ?? "")")
                    }
                }
            } catch let failure as ImportFailure {
                FileHandle.standardError.write(Data("cosyncauth: import-legacy: \(failure.description)\n".utf8))
                throw ExitCode(1)
            }
        }
    }

    static func date(_ text: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle().parse(text) { return d }
        return try? Date.ISO8601FormatStyle().year().month().day().parse(text)
    }
}
