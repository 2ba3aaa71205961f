import CSV
import CosyncAuth
import Foundation
import ZIPFoundation

/// The legacy server's per-app export ZIP (<doc:LegacyImport> §5.1: five CSV files), turned into
/// the mongoexport-shaped folder the importer reads. The ZIP is lossy; `losses` says what, per
/// field, and the README lists it.
public enum LegacyZipExport {
    public static let files = [
        "app-collection.csv", "user-collection.csv", "signup-collection.csv", "invite-collection.csv", "email-template-collection.csv",
    ]

    /// What the ZIP cannot carry, whatever its content (no column, or rendered as `[object Object]`).
    public static let alwaysLost = [
        "apps: anonymousLoginEnabled, userNamesEnabled, appleLoginEnabled, appleBundleId, googleLoginEnabled, googleClientId (not exported: defaults apply)",
        "apps: metaData, metaDataInvite, appData (exported as [object Object]: no metadata fields, so JWTs carry no metadata claims until they are set again)",
        "users: userName, loginProvider, socialUserId (not exported: user-name login and Apple/Google login of existing users stop working)",
        "users, signups, invites: metaData (exported as [object Object]: dropped)",
        "signups: signupProvider; emailtemplates: localeLinkText (not exported); resetpasswords, applogs (not exported)",
        "every _id (rows get stable ids from their file and line)",
    ]

    public struct Result: Sendable {
        public let folder: URL
        /// Field → number of rows whose value could not be carried.
        public let losses: [String: Int]
    }

    /// How much a ZIP may unpack to: a guard against ZIP bombs (an upload of a few hundred KB that
    /// inflates to gigabytes). The sizes an archive declares are checked before anything is written,
    /// and the bytes actually inflated are counted while writing (declared sizes can lie).
    public struct Limits: Sendable {
        /// All five CSV files together.
        public var maxTotalBytes: UInt64
        /// One CSV file. Each is read whole into memory, so this bounds the memory too. The legacy
        /// server (Node) builds each file as one string, which V8 caps at about 512 MiB.
        public var maxEntryBytes: UInt64
        /// Uncompressed ÷ compressed, for an entry above 1 MiB. Real CSV exports stay far below 100:1
        /// (bcrypt hashes and ids do not compress); a deflate bomb reaches ~1000:1.
        public var maxRatio: UInt64

        public init(maxTotalBytes: UInt64 = 1 << 30, maxEntryBytes: UInt64 = 512 << 20, maxRatio: UInt64 = 200) {
            self.maxTotalBytes = maxTotalBytes
            self.maxEntryBytes = maxEntryBytes
            self.maxRatio = maxRatio
        }
    }

    static func megabytes(_ bytes: UInt64) -> String {
        bytes >= 1 << 20 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    /// Unzips `zip` and writes apps.json, users.json, signups.json, invites.json and
    /// emailtemplates.json (JSON lines) into a new folder under `workDirectory`. An archive that
    /// would unpack to more than `limits` allow is refused, and nothing of it is left behind.
    public static func convert(zip: URL, workDirectory: URL, limits: Limits = Limits()) throws -> Result {
        let folder = workDirectory.appendingPathComponent("legacy-zip-\(UUID().uuidString)")
        do {
            return try convert(zip: zip, folder: folder, limits: limits)
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
    }

    static func convert(zip: URL, folder: URL, limits: Limits) throws -> Result {
        let csvFolder = folder.appendingPathComponent("csv")
        // Decrypted secrets (keys, credentials) pass through here: owner-only, and removed after the run.
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(at: csvFolder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let archive: Archive
        do {
            archive = try Archive(url: zip, accessMode: .read)
        } catch {
            throw ImportFailure("\(zip.path) is not a readable ZIP file")
        }
        try extract(archive, named: zip.lastPathComponent, to: csvFolder, limits: limits)
        var losses: [String: Int] = [:]

        // The app row: its appId comes from the app token's payload.
        let appRows = try rows(csvFolder.appendingPathComponent("app-collection.csv"))
        guard appRows.count == 1, let appRow = appRows.first else { throw ImportFailure("app-collection.csv must hold exactly one app") }
        guard let token = appRow["appToken"], let appId = appIdOf(token: token) else {
            throw ImportFailure("app-collection.csv: appToken is missing or has no appId in its payload")
        }
        var app = document(appRow, id: "zip-app", dates: ["createdAt", "updatedAt"], lists: ["locales"], losses: &losses, collection: "apps")
        app["appId"] = .string(appId)
        for key in ["maxLoginAttempts"] { app[key] = nil }
        try write([app], to: folder.appendingPathComponent("apps.json"))

        func convert(_ file: String, _ collection: String, dates: Set<String>, numbers: [String]) throws {
            let out = folder.appendingPathComponent("\(collection).json")
            guard FileManager.default.createFile(atPath: out.path, contents: nil), let handle = FileHandle(forWritingAtPath: out.path) else {
                throw ImportFailure("cannot write \(out.path)")
            }
            defer { try? handle.close() }
            var line = 0
            try forEachRow(csvFolder.appendingPathComponent(file)) { row in
                line += 1
                var doc = document(row, id: "zip-\(collection)-\(line)", dates: dates, lists: [], losses: &losses, collection: collection)
                if doc["appId"] != nil { doc["appId"] = .string(appId) }
                for key in numbers { if let text = doc[key]?.stringValue, let n = Int(text) { doc[key] = .int(n) } }
                handle.write(try JSONCoding.encode(JSONValue.object(doc)))
                handle.write(Data("\n".utf8))
            }
        }
        try convert("user-collection.csv", "users", dates: ["lastLogin", "createdAt", "updatedAt"], numbers: ["phoneCode"])
        try convert("signup-collection.csv", "signups", dates: ["createdAt", "updatedAt"], numbers: ["code"])
        try convert("invite-collection.csv", "invites", dates: ["createdAt", "updatedAt"], numbers: ["code"])
        try convert("email-template-collection.csv", "emailtemplates", dates: ["createdAt", "updatedAt"], numbers: [])
        try? FileManager.default.removeItem(at: csvFolder)
        return Result(folder: folder, losses: losses)
    }

    /// Writes the five CSV files of `archive` into `folder`, within `limits`: first by the sizes the
    /// archive declares, then by the bytes inflated, counted as they are written.
    static func extract(_ archive: Archive, named zipName: String, to folder: URL, limits: Limits) throws {
        var entries: [(String, Entry)] = []
        var declaredTotal: UInt64 = 0
        for name in files {
            guard let entry = archive[name] else { throw ImportFailure("\(zipName) has no \(name) at its root: not a legacy export") }
            guard entry.type == .file else { throw ImportFailure("\(zipName): \(name) is not a plain file") }
            let size = entry.uncompressedSize
            guard size <= limits.maxEntryBytes else {
                throw ImportFailure(
                    "\(zipName): \(name) would unpack to \(megabytes(size)), over the limit of \(megabytes(limits.maxEntryBytes)) for one file")
            }
            if size > 1 << 20, size / max(entry.compressedSize, 1) > limits.maxRatio {
                throw ImportFailure(
                    "\(zipName): \(name) is compressed more than \(limits.maxRatio):1 (\(megabytes(entry.compressedSize)) to \(megabytes(size))), "
                        + "which no real export is: refused as a possible ZIP bomb")
            }
            declaredTotal += size
            guard declaredTotal <= limits.maxTotalBytes else {
                throw ImportFailure("\(zipName) would unpack to more than the limit of \(megabytes(limits.maxTotalBytes))")
            }
            entries.append((name, entry))
        }
        var written: UInt64 = 0
        for (name, entry) in entries {
            let url = folder.appendingPathComponent(name)
            guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]),
                let handle = FileHandle(forWritingAtPath: url.path)
            else { throw ImportFailure("cannot write \(url.path)") }
            defer { try? handle.close() }
            var entryWritten: UInt64 = 0
            do {
                _ = try archive.extract(entry) { chunk in
                    entryWritten += UInt64(chunk.count)
                    written += UInt64(chunk.count)
                    // More than it declared (checked above), or past the limits: stop before writing it.
                    guard entryWritten <= entry.uncompressedSize else {
                        throw ImportFailure("\(zipName): \(name) unpacks to more than the \(megabytes(entry.uncompressedSize)) it declares: refused as a possible ZIP bomb")
                    }
                    guard entryWritten <= limits.maxEntryBytes else {
                        throw ImportFailure("\(zipName): \(name) unpacks to more than the limit of \(megabytes(limits.maxEntryBytes)) for one file")
                    }
                    guard written <= limits.maxTotalBytes else {
                        throw ImportFailure("\(zipName) unpacks to more than the limit of \(megabytes(limits.maxTotalBytes))")
                    }
                    try handle.write(contentsOf: chunk)
                }
            } catch let failure as ImportFailure {
                throw failure
            } catch {
                throw ImportFailure("\(zipName): \(name) cannot be unpacked (\(error))")
            }
        }
    }

    /// A CSV row as a legacy document: empty cells are absent (as csv-writer wrote absent fields),
    /// `[object Object]` values are dropped and counted, JS `Date.toString()` dates become `$date`.
    static func document(
        _ row: [String: String], id: String, dates: Set<String>, lists: Set<String>, losses: inout [String: Int], collection: String
    ) -> [String: JSONValue] {
        var doc: [String: JSONValue] = ["_id": .string(id)]
        for (key, value) in row where !value.isEmpty {
            if value.contains("[object Object]") {
                losses["\(collection).\(key)", default: 0] += 1
                continue
            }
            if dates.contains(key) {
                if let date = jsDate(value) {
                    doc[key] = .object(["$date": .string(ISO8601.milliseconds(date))])
                } else {
                    losses["\(collection).\(key) (unreadable date)", default: 0] += 1
                }
            } else if lists.contains(key) {
                doc[key] = .array(value.split(separator: ",").map { .string($0.trimmingCharacters(in: .whitespaces)) })
            } else {
                doc[key] = .string(value)
            }
        }
        return doc
    }

    /// `Mon Jan 15 2024 10:00:00 GMT+0000 (Coordinated Universal Time)`: the parenthesised zone name
    /// is ignored, the `GMT±hhmm` offset honoured.
    static func jsDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count >= 6, let day = Int(parts[2]), let year = Int(parts[3]) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let month = months.firstIndex(of: String(parts[1])) else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        let zone = parts[5]
        guard time.count == 3, zone.hasPrefix("GMT"), zone.count == 8, let offset = Int(zone.dropFirst(4)) else { return nil }
        let sign = zone.dropFirst(3).first == "-" ? -1 : 1
        var components = DateComponents()
        components.year = year
        components.month = month + 1
        components.day = day
        components.hour = time[0]
        components.minute = time[1]
        components.second = time[2]
        components.timeZone = TimeZone(secondsFromGMT: sign * ((offset / 100) * 3600 + (offset % 100) * 60))
        return Calendar(identifier: .gregorian).date(from: components)
    }

    static func appIdOf(token: String) -> String? {
        guard let appId = Base64URL.jwtPart(token, 1)?["appId"]?.stringValue, AppAdministration.isAppId(appId) else { return nil }
        return appId
    }

    /// Reads every row (header-keyed; a repeated header keeps its first column).
    static func rows(_ url: URL) throws -> [[String: String]] {
        var all: [[String: String]] = []
        try forEachRow(url) { all.append($0) }
        return all
    }

    /// One CSV file of a per-app export, read whole (the ZIP holds one app; Foundation's InputStream
    /// reports end-of-file as an error to the CSV reader on Linux).
    static func forEachRow(_ url: URL, _ body: ([String: String]) throws -> Void) throws {
        guard let data = FileManager.default.contents(atPath: url.path) else { throw ImportFailure("cannot read \(url.lastPathComponent)") }
        let reader: CSVReader
        do {
            reader = try CSVReader(string: String(decoding: data, as: UTF8.self), hasHeaderRow: true)
        } catch {
            throw ImportFailure("\(url.lastPathComponent): not a CSV file (\(error))")
        }
        let header = reader.headerRow ?? []
        while let row = reader.next() {
            var record: [String: String] = [:]
            for (index, name) in header.enumerated() where index < row.count && record[name] == nil {
                record[name] = row[index]
            }
            try body(record)
        }
        if let error = reader.error { throw ImportFailure("\(url.lastPathComponent): \(error)") }
    }

    static func write(_ documents: [[String: JSONValue]], to url: URL) throws {
        var data = Data()
        for doc in documents {
            data.append(try JSONCoding.encode(JSONValue.object(doc)))
            data.append(Data("\n".utf8))
        }
        try data.write(to: url)
    }
}
