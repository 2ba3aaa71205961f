import CosyncAuth
import Crypto
import Foundation
import Logging
import PostgresNIO

public struct ImportOptions: Sendable {
    public enum DuplicatePolicy: String, Sendable, CaseIterable {
        /// Keep the row with the newest `updatedAt`; report the others.
        case mergeNewest = "merge-newest"
        /// Keep the first row imported; report the others.
        case skip
    }

    public var directory: URL
    public var encryptKey: String?
    public var dryRun = false
    public var duplicates: DuplicatePolicy = .mergeNewest
    public var reportURL: URL?
    public var legacyPublicKeyPEM: String?
    public var legacyTokensUntil: Date?
    public var batchSize = 2000
    /// Legacy invite codes never expired: an imported pending invite stays valid this long after
    /// the later of its legacy `updatedAt` and the import.
    public var inviteValidity: TimeInterval = 30 * 86400
    /// Legacy reset codes never expired: a carried pending code stays valid this long after the
    /// import (the server's reset-code lifetime, `COSYNC_RESET_CODE_MINUTES`, 1 hour by default).
    public var resetCodeLifetime: TimeInterval = 3600
    /// False (the default): an imported app or user changed on this server since it was imported
    /// (suspended, password or secret changed, token rotated, deleted) is kept as it is and reported.
    /// True: the export overwrites it, and deleted users are created again.
    public var overwriteLocalChanges = false
    public var now = Date()
    /// False in a dry run against a database without this server's schema: the appId conflict check
    /// is skipped (and said so).
    public var databaseReady = true
    /// Entries to put in the report before the rows' (e.g. what a ZIP export lost).
    public var notes: [ReportEntry] = []
    /// Who the audit rows name: `import` for the command, `portal:<email>` for the Portal's import.
    public var actor = "import"

    public init(directory: URL, encryptKey: String?) {
        self.directory = directory
        self.encryptKey = encryptKey
    }
}

/// What an import did, per collection.
public struct ImportSummary: Sendable {
    public struct Counts: Sendable {
        public var read = 0
        public var imported = 0
        public var refused = 0
        public var adjusted = 0
        public var seconds = 0.0
    }
    public var collections: [(String, Counts)] = []
    public var reportEntries = 0

    public func table() -> String {
        var lines = ["collection        read   imported   refused   adjusted   rows/s"]
        for (name, c) in collections {
            let rate = c.seconds > 0 ? Int(Double(c.read) / c.seconds) : 0
            lines.append(
                name.padding(toLength: 14, withPad: " ", startingAt: 0)
                    + String(format: "%9d  %9d  %8d  %9d  %7d", c.read, c.imported, c.refused, c.adjusted, rate))
        }
        return lines.joined(separator: "\n")
    }

    public func counts(_ name: String) -> Counts? { collections.first { $0.0 == name }?.1 }
}

/// `cosyncauth import-legacy`: brings a CosyncJWT MongoDB export (one mongoexport file per
/// collection) into this server. Apps keep their appId, exact app token and key pair; users keep
/// their bcrypt(md5) hashes. Everything is validated before the first write; each batch commits in
/// one transaction with its checkpoint, and every write is an upsert keyed by the legacy id that
/// changes a row only when its source changed: rerunning after a crash, or twice, ends in the same
/// database.
public final class LegacyImporter: @unchecked Sendable {
    let options: ImportOptions
    let client: PostgresClient
    let box: SecretBox
    let logger: Logger
    let progress: ImportProgress
    /// Entries waiting for the transaction of their batch (see `flushReport`).
    var reportBuffer: [ReportEntry] = []
    var summary = ImportSummary()
    var apps: [String: (app: ImportedApp, ref: Int64)] = [:]
    var source = ""
    /// The app cache of the server this import runs in, if any (a CLI import has none: the database's
    /// notifications tell the running nodes).
    let cache: AppCache?

    public init(
        options: ImportOptions, client: PostgresClient, box: SecretBox, logger: Logger, progress: ImportProgress, cache: AppCache? = nil
    ) {
        self.options = options
        self.client = client
        self.box = box
        self.logger = logger
        self.progress = progress
        self.cache = cache
    }

    func file(_ collection: String) -> URL? {
        for name in ["\(collection).json", "\(collection).jsonl", "\(collection).ndjson"] {
            let url = options.directory.appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: url.path) { return url }
        }
        return nil
    }

    // MARK: run

    public func run() async throws -> ImportSummary {
        guard let appsFile = file("apps") else {
            throw ImportFailure("\(options.directory.path) has no apps.json (run mongoexport for the apps collection)")
        }
        source = try sourceId()
        let cipher = LegacyCipher(encryptKey: options.encryptKey)

        // 1. Every app is read, decrypted and checked before anything is written.
        var imported: [ImportedApp] = []
        var appCounts = ImportSummary.Counts()
        let started = Date()
        let appsReader = try DocumentReader(url: appsFile)
        while let bytes = try appsReader.next() {
            appCounts.read += 1
            imported.append(try LegacyMapping.app(try LegacyDocument(bytes: bytes), bytes: bytes, cipher: cipher))
        }
        var seen = Set<String>()
        if let dup = imported.first(where: { !seen.insert($0.appId).inserted }) {
            throw ImportFailure("apps.json holds appId \(dup.appId) twice; nothing was written")
        }
        if !options.databaseReady {
            progress.line("the database has no (current) schema: the appId conflict check is skipped in this dry run")
        } else { try await client.withConnection { db in
            for app in imported {
                if let existing = try await LegacyImportStore.appOrigin(db, appId: app.appId, logger: self.logger), !existing.imported {
                    throw ImportFailure(
                        "app '\(app.name)' (\(app.appId)): this server already has an app with that appId that was not imported; nothing was written")
                }
            }
        } }
        if let pem = options.legacyPublicKeyPEM, options.legacyTokensUntil == nil || (try? RSAKeyMaterial.publicKeyCheck(pem)) == nil {
            throw ImportFailure("--legacy-public-key needs a valid RSA public key PEM and --legacy-tokens-until")
        }
        for note in options.notes { record(note) }

        // 2. Apps.
        for app in imported {
            for note in app.notes {
                record(ReportEntry(collection: "apps", legacyId: app.legacyId, appId: app.appId, handle: nil, action: "adjusted", reason: note))
                appCounts.adjusted += 1
            }
            if options.dryRun {
                apps[app.appId] = (app, -1)
                continue
            }
            let ref = try await writeApp(app)
            apps[app.appId] = (app, ref)
        }
        try await flushReport()
        appCounts.imported = imported.count
        appCounts.seconds = Date().timeIntervalSince(started)
        summary.collections.append(("apps", appCounts))
        progress.line("apps: \(imported.count) (\(imported.map { "\($0.name) \($0.appId)" }.joined(separator: ", ")))")

        // 3. The rest, streamed in batches.
        try await importCollection("users", prepare: { try self.prepareUsers($0) }, write: { try await self.writeUsers($0, &$1) })
        try await importCollection("signups") { try await importPending(.signups, $0, &$1) }
        try await importCollection("invites") { try await importPending(.invites, $0, &$1) }
        try await importCollection("emailtemplates") { try await importTemplates($0, &$1) }
        try await importCollection("resetpasswords") { try await importResetCodes($0, &$1) }

        if let pem = options.legacyPublicKeyPEM, let until = options.legacyTokensUntil, !options.dryRun {
            try await client.withConnection { db in
                try await LegacyTokenKeyStore.upsertLegacyTokenKey(db, publicKeyPEM: pem, acceptUntil: until, logger: self.logger)
            }
            // Every node hears of it through the trigger of sql/0020; this one's own next request too.
            cache?.legacyKeysChanged()
        }
        summary.reportEntries = options.dryRun ? summary.reportEntries : try await exportReport()
        return summary
    }

    /// The import source: SHA-256 over the content of every input file (streamed), so a new export
    /// is a new source even when its files have the same sizes.
    func sourceId() throws -> String {
        var hasher = SHA256()
        for collection in ["apps", "users", "signups", "invites", "emailtemplates", "resetpasswords"] {
            guard let url = file(collection), let handle = FileHandle(forReadingAtPath: url.path) else { continue }
            defer { try? handle.close() }
            hasher.update(data: Data("\(collection)\n".utf8))
            while true {
                let chunk = handle.readData(ofLength: 4 << 20)
                if chunk.isEmpty { break }
                hasher.update(data: chunk)
            }
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// Notes an entry of the report. It is stored with the batch it belongs to (or at once when
    /// `flushReport` runs on its own), so a resumed run keeps the entries of committed batches.
    func record(_ entry: ReportEntry) {
        summary.reportEntries += 1
        if options.dryRun {
            if summary.reportEntries <= 20 {
                progress.line("  \(entry.action) \(entry.collection) \(entry.legacyId)\(entry.handle.map { " \($0)" } ?? ""): \(entry.reason)")
            }
        } else {
            reportBuffer.append(entry)
        }
    }

    func record(_ notes: Notes) { notes.entries.forEach(record) }

    /// Writes the buffered entries, inside the caller's transaction when it has one.
    func flushReport(_ db: PostgresConnection? = nil) async throws {
        guard !reportBuffer.isEmpty, !options.dryRun else { return }
        let entries = reportBuffer
        reportBuffer = []
        let payload = "[" + entries.map { CompactJSON.text($0.json) }.joined(separator: ",") + "]"
        if let db {
            try await LegacyImportStore.insertReport(db, source: source, entries: payload, logger: logger)
        } else {
            try await client.withConnection { try await LegacyImportStore.insertReport($0, source: self.source, entries: payload, logger: self.logger) }
        }
    }

    /// The report of this source (this run and any earlier, interrupted one) as a JSON array file.
    func exportReport() async throws -> Int {
        guard !options.dryRun, let url = options.reportURL else { return 0 }
        try await flushReport()
        let writer = try ReportWriter(url: url)
        let count = try await client.withConnection { db in
            try await LegacyImportStore.reportEntries(db, source: self.source, logger: self.logger) { writer.write(json: $0) }
        }
        try writer.close()
        return count
    }

    func writeApp(_ app: ImportedApp) async throws -> Int64 {
        let credentialsSealed = app.credentials.isEmpty
            ? nil : try box.seal(try JSONCoding.encode(app.credentials), purpose: .appCredentials(appId: app.appId))
        // The legacy appSecret keeps working as this app's admin secret; an app without one gets a
        // random secret (rotate it through the admin API to learn one).
        let secretHash = Secrets.sha256(app.appSecret ?? Secrets.token(prefix: "cas_"))
        let ref = try await writeAppRows(app, credentialsSealed: credentialsSealed, secretHash: secretHash)
        cache?.invalidate(ref: ref)
        return ref
    }

    func writeAppRows(_ app: ImportedApp, credentialsSealed: Data?, secretHash: Data) async throws -> Int64 {
        try await client.transaction(logger: logger) { db in
            if let existing = try await LegacyImportStore.appOrigin(db, appId: app.appId, logger: self.logger) {
                if existing.fingerprint == app.fingerprint { return existing.ref }  // unchanged since the last run
                let changes = try await LegacyImportStore.localAppChanges(db, ref: existing.ref, logger: self.logger)
                if !changes.isEmpty {
                    let what = changes.joined(separator: ", ")
                    if !self.options.overwriteLocalChanges {
                        self.record(ReportEntry(
                            collection: "apps", legacyId: app.legacyId, appId: app.appId, handle: nil, action: "kept",
                            reason: "changed on this server since it was imported (\(what)); the newer export was not applied (--overwrite-local-changes applies it)"))
                        return existing.ref
                    }
                    self.record(ReportEntry(
                        collection: "apps", legacyId: app.legacyId, appId: app.appId, handle: nil, action: "overwritten",
                        reason: "changed on this server since it was imported (\(what)); overwritten by the export (--overwrite-local-changes)"))
                }
            }
            let ref = try await LegacyImportStore.upsertApp(
                db, appId: app.appId, name: app.name, status: app.status, settings: app.settings, appSecretHash: secretHash,
                credentialsSealed: credentialsSealed, createdAt: app.createdAt, updatedAt: app.updatedAt, fingerprint: app.fingerprint,
                logger: self.logger)
            try await LegacyImportStore.addImportedToken(
                db, ref: ref, tokenHash: Secrets.sha256(app.appToken), tokenSealed: try self.box.seal(app.appToken, purpose: .appToken(appId: app.appId)),
                logger: self.logger)
            try await LegacyImportStore.addImportedKey(
                db, ref: ref, kid: app.key.kid, publicKeyPEM: app.publicKeyPEM,
                privateKeySealed: try self.box.seal(app.key.privateKeyPEM, purpose: .appKey(kid: app.key.kid)), logger: self.logger)
            try await AuditLog.record(
                db, appRef: ref, appId: app.appId, actor: self.options.actor, action: "app.import", detail: ["name": .string(app.name)], logger: self.logger)
            return ref
        }
    }

    // MARK: collections

    typealias Batch = [(index: Int, doc: LegacyDocument, bytes: ArraySlice<UInt8>)]

    /// Streams one collection in batches; each batch and its checkpoint commit together. The next
    /// batch is read and prepared (`prepare`, off the writer's path) while the current one is written.
    func importCollection<Prepared: Sendable>(
        _ name: String, prepare: @escaping @Sendable (Batch) throws -> Prepared,
        write: (Prepared, inout ImportSummary.Counts) async throws -> Void
    ) async throws {
        guard let url = file(name) else {
            progress.line("\(name): no \(name).json, skipped")
            return
        }
        let done = options.dryRun ? 0 : try await client.withConnection {
            try await LegacyImportStore.checkpoint($0, source: self.source, collection: name, logger: self.logger)
        }
        var counts = ImportSummary.Counts()
        let started = Date()
        progress.start(name, total: progress.isInteractive ? try countDocuments(url) : nil, resumedAt: done)
        let reader = SendableReader(try DocumentReader(url: url))
        try reader.value.skip(done)
        let batchSize = options.batchSize
        @Sendable func next() throws -> (Int, Prepared)? {
            var batch: Batch = []
            while batch.count < batchSize, let bytes = try reader.value.next() {
                batch.append((reader.value.count - 1, try LegacyDocument(bytes: bytes), bytes))
            }
            return batch.isEmpty ? nil : (batch.count, try prepare(batch))
        }
        var upcoming = Task { try next() }
        while let (size, prepared) = try await upcoming.value {
            upcoming = Task { try next() }
            counts.read += size
            try await write(prepared, &counts)
            progress.advance(name, done: done + counts.read, rate: Double(counts.read) / max(Date().timeIntervalSince(started), 0.001))
        }
        counts.seconds = Date().timeIntervalSince(started)
        progress.finish(name, read: done + counts.read)
        summary.collections.append((name, counts))
    }

    func importCollection(_ name: String, batch handle: (Batch, inout ImportSummary.Counts) async throws -> Void) async throws {
        try await importCollection(name, prepare: { $0 }, write: handle)
    }

    func countDocuments(_ url: URL) throws -> Int {
        let reader = try DocumentReader(url: url)
        while try reader.next() != nil {}
        return reader.count
    }

    /// The app of a row, or a refusal in `notes`.
    func owner(_ collection: String, _ doc: LegacyDocument, _ notes: inout Notes) -> (ImportedApp, Int64)? {
        let appId = doc.string("appId") ?? ""
        guard let owner = apps[appId] else {
            notes.refuse(collection, doc.id ?? "?", appId, doc.string("handle"), "its app is not in apps.json")
            return nil
        }
        return owner
    }
}

/// Appends report entries to a JSON array file as they come.
final class ReportWriter: @unchecked Sendable {
    let handle: FileHandle
    var first = true

    init(url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: Data("[\n".utf8)), let handle = FileHandle(forWritingAtPath: url.path) else {
            throw ImportFailure("cannot write the report to \(url.path)")
        }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    func write(json text: String) {
        handle.write(Data(((first ? "  " : ",\n  ") + text).utf8))
        first = false
    }

    func close() throws {
        handle.write(Data("\n]\n".utf8))
        try handle.close()
    }
}

/// The reader moves between the task that reads a batch and the next one, never shared at once.
final class SendableReader: @unchecked Sendable {
    let value: DocumentReader
    init(_ value: DocumentReader) { self.value = value }
}

/// JSON text of a value, without Codable's overhead (batches of a million rows are built with it).
enum CompactJSON {
    static func text(_ value: JSONValue) -> String {
        var out = ""
        write(value, into: &out)
        return out
    }

    static func write(_ value: JSONValue, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): quote(s, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                write(item, into: &out)
            }
            out += "]"
        case .object(let object):
            out += "{"
            for (i, (key, item)) in object.enumerated() {
                if i > 0 { out += "," }
                quote(key, into: &out)
                out += ":"
                write(item, into: &out)
            }
            out += "}"
        }
    }

    static func quote(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
