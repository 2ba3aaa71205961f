import Foundation
import Testing

/// The store layer's three rules (issue 21, item 3), read from the source tree:
/// - SQL runs only in `Sources/CosyncAuth/Store/` (the migrator is there too);
/// - each table is written (INSERT, UPDATE, DELETE) from one store. A store may span files named
///   `Owner+Topic.swift` (`UserStore+SecondFactor.swift` is UserStore);
/// - stores do not call stores: a store runs its own statements only, and the flow, method or
///   administration service that owns a use case composes stores inside its transaction. A store
///   may use another's helpers that run no SQL (`noSQLHelpers`).
///
/// `Sources/LegacyImport/LegacyImportStore.swift` is the legacy import's bulk store, in its own module:
/// it writes the tables it imports into, in bulk statements, and is not checked here.
@Suite("Store ownership: SQL only in Store/, one owning store per table, stores do not call stores")
struct StoreOwnershipTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Owners besides a table's own store that may still write it, each with the number of write
    /// statements allowed there and why. An entry that no longer matches fails the test: remove it.
    static let allowed: [(table: String, owner: String, statements: Int, reason: String)] = [
        // A passkey and its identity are inserted by one statement (a CTE), so that one never exists
        // without the other and a duplicate credential fails on either unique index alike. Half a
        // statement cannot move; identities' own store is IdentityStore.
        ("identities", "PasskeyStore", 1, "PasskeyStore.insert writes the passkey's identity in the same statement"),
    ]

    /// Swift files under `folder` (relative to the repository), with their text, `//` comment lines
    /// blanked (doc comments quote SQL).
    static func sources(_ folder: String) throws -> [(path: String, text: String)] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        var found: [(path: String, text: String)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            let code = text.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces).hasPrefix("//") ? "" : String($0) }
                .joined(separator: "\n")
            found.append((String(url.path.dropFirst(root.path.count + 1)), code))
        }
        return found.sorted { $0.path < $1.path }
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return ["bad pattern \(pattern)"] }
        let range = NSRange(text.startIndex..., in: text)
        return regex.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
    }

    /// What counts as running SQL: a statement sent through PostgresNIO (`.query(`, `.execute(` of a
    /// prepared statement, a script, a transaction of PostgresNIO's own), a query or prepared
    /// statement built, or a string literal that starts with a SQL statement. `http.execute(` is
    /// AsyncHTTPClient's request, not SQL; `client.transaction` (Store/Transaction.swift) is how a flow
    /// composes stores in one transaction, and stays allowed.
    static let sqlPatterns: [String] = [
        #"\.(query|simpleQuery|executeScript|withTransaction)\("#,
        #"(?<!http)\.execute\("#,
        #"\b(PostgresQuery|PostgresPreparedStatement)\b"#,
        #""(?:"")?\s*(SELECT|INSERT\s+INTO|UPDATE\s+\w+(\s+\w+)?\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS|CREATE|ALTER|DROP|TRUNCATE|LISTEN|NOTIFY)\b"#,
    ]

    static func sqlOutsideStore() throws -> [String] {
        var violations: [String] = []
        for folder in ["Sources/CosyncAuth", "Sources/CosyncAuthHTTP", "Sources/CosyncPortal"] {
            for (path, text) in try sources(folder) where !path.hasPrefix("Sources/CosyncAuth/Store/") {
                for pattern in sqlPatterns {
                    for hit in matches(pattern, in: text) {
                        violations.append("\(path): \(hit.replacingOccurrences(of: "\n", with: " "))")
                    }
                }
            }
        }
        return violations
    }

    @Test("no SQL outside Sources/CosyncAuth/Store (the core, the HTTP module and the Portal)")
    func noSQLOutsideStore() throws {
        let violations = try Self.sqlOutsideStore()
        #expect(violations.isEmpty, "SQL outside the store layer; move it into a store under Sources/CosyncAuth/Store:\n\(violations.joined(separator: "\n"))")
    }

    @Test("the rule finds SQL where it is: the store layer has plenty, and a planted statement is caught")
    func ruleFindsSQL() throws {
        let inStore = try Self.sources("Sources/CosyncAuth/Store").filter { file in
            Self.sqlPatterns.contains { !Self.matches($0, in: file.text).isEmpty }
        }
        #expect(inStore.count >= 10, "\(inStore.map(\.path))")
        let planted = """
            let rows = try await db.query(
                \"""
                SELECT 1 FROM users
                \""", logger: logger)
            """
        #expect(Self.sqlPatterns.filter { !Self.matches($0, in: planted).isEmpty }.count == 2)
        #expect(Self.sqlPatterns.allSatisfy { Self.matches($0, in: "let response = try await http.execute(request, timeout: .seconds(10))").isEmpty })
    }

    /// Tables created by the migrations.
    static func tables() throws -> [String] {
        let folder = root.appendingPathComponent("sql")
        var names: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".sql") {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for hit in matches(#"(?i)CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?[a-z_][a-z0-9_]*"#, in: text) {
                if let name = hit.split(whereSeparator: \.isWhitespace).last { names.insert(String(name)) }
            }
        }
        return names.sorted()
    }

    /// The store a file belongs to: its name up to `+` (`UserStore+SecondFactor.swift` is UserStore).
    static func owner(_ path: String) -> String {
        let name = (path as NSString).lastPathComponent
        return String(name.prefix { $0 != "+" && $0 != "." })
    }

    /// The migrator and the migrations it embeds write any table; they are not a store.
    static let migrator: Set<String> = ["Migrator", "EmbeddedMigrations"]

    /// For each table, each store under Store/ that writes it, with its number of write statements.
    static func writers() throws -> [String: [String: Int]] {
        let files = try sources("Sources/CosyncAuth/Store").filter { !migrator.contains(owner($0.path)) }
        var result: [String: [String: Int]] = [:]
        for table in try tables() {
            for (path, text) in files {
                let writes = matches(#"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\#(table)\b"#, in: text).count
                if writes > 0 { result[table, default: [:]][owner(path), default: 0] += writes }
            }
        }
        return result
    }

    @Test("every table the migrations create is written from one store (allow-list aside)")
    func oneOwnerPerTable() throws {
        let tables = try Self.tables()
        #expect(tables.count >= 30, "\(tables)")
        var problems: [String] = []
        var used: Set<String> = []
        for (table, stores) in try Self.writers().sorted(by: { $0.key < $1.key }) {
            var others = stores
            for entry in Self.allowed where entry.table == table {
                guard let writes = others[entry.owner] else { continue }
                used.insert("\(entry.table) \(entry.owner)")
                if writes <= entry.statements { others[entry.owner] = nil }
            }
            if others.count > 1 {
                problems.append("\(table) is written from \(others.keys.sorted().joined(separator: ", ")) (\(others))")
            }
        }
        for entry in Self.allowed where !used.contains("\(entry.table) \(entry.owner)") {
            problems.append("allow-list entry no longer needed: \(entry.table) in \(entry.owner) (\(entry.reason)); remove it")
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test("the ownership rule sees the writes: users belong to UserStore, events to EventStore")
    func writersAreFound() throws {
        let writers = try Self.writers()
        #expect(writers["users"].map { Set($0.keys) } == ["UserStore"], "\(writers["users"] ?? [:])")
        #expect(writers["events"].map { Set($0.keys) } == ["EventStore"], "\(writers["events"] ?? [:])")
        #expect(writers["messages"].map { Set($0.keys) } == ["OutboxStore"], "\(writers["messages"] ?? [:])")
    }

    // MARK: stores do not call stores

    /// What one store may use of another: helpers that run no SQL, each as `Store.member`, followed
    /// by `(label:` when only that overload is meant (`UserStore.user(from:)` decodes a row;
    /// `UserStore.user(db, ...)` is a query). Each must still exist and take no connection.
    static let noSQLHelpers: [String] = [
        "UserStore.columns", "UserStore.qualifiedColumns", "UserStore.decode", "UserStore.user(from:", "UserStore.metadataText",
        "AppStore.likePrefix", "AppRecordStore.Kind",
    ]

    /// The stores: the type a file under Store/ is named after (`enum UserStore` in UserStore.swift,
    /// `enum AuditLog` in AuditLog.swift). The migrator is not a store.
    static func stores() throws -> Set<String> {
        var names: Set<String> = []
        for (path, text) in try sources("Sources/CosyncAuth/Store") where !migrator.contains(owner(path)) {
            let name = owner(path)
            if !matches(#"\b(enum|struct|class|actor)\s+\#(name)\b"#, in: text).isEmpty { names.insert(name) }
        }
        return names
    }

    /// Each use, in a file under Store/, of another store's member that is not a no-SQL helper:
    /// `path: Store.member(`.
    static func crossStoreCalls(in files: [(path: String, text: String)], stores: Set<String>) -> [String] {
        var calls: [String] = []
        let names = stores.sorted().joined(separator: "|")
        for (path, text) in files where !migrator.contains(owner(path)) {
            for hit in matches(#"\b(\#(names))\.\w+(\(\s*\w+:)?"#, in: text) {
                let store = String(hit.prefix { $0 != "." })
                guard store != owner(path) else { continue }
                let compact = hit.filter { !$0.isWhitespace }
                let member = String(compact.prefix { $0 != "(" })
                if noSQLHelpers.contains(member) || noSQLHelpers.contains(compact) { continue }
                calls.append("\(path): \(compact)")
            }
        }
        return calls
    }

    @Test("no store calls another store's SQL: the caller that owns the use case composes them")
    func storesDoNotCallStores() throws {
        let stores = try Self.stores()
        #expect(stores.isSuperset(of: ["UserStore", "IdentityStore", "SessionStore", "PasskeyStore", "AuditLog"]), "\(stores.sorted())")
        let calls = Self.crossStoreCalls(in: try Self.sources("Sources/CosyncAuth/Store"), stores: stores)
        #expect(
            calls.isEmpty,
            """
            a store calls another store; compose them in the flow, method or administration service that owns the use case \
            (or, for a helper that runs no SQL, add it to noSQLHelpers):
            \(calls.joined(separator: "\n"))
            """)
    }

    @Test("each no-SQL helper a store may use of another exists and takes no connection")
    func noSQLHelpersRunNoSQL() throws {
        let files = try Self.sources("Sources/CosyncAuth/Store")
        for helper in Self.noSQLHelpers {
            let store = String(helper.prefix { $0 != "." })
            let rest = helper.dropFirst(store.count + 1)
            let name = String(rest.prefix { $0 != "(" })
            let label = rest.contains("(") ? String(rest.drop { $0 != "(" }.dropFirst().prefix { $0 != ":" }) : nil
            let declarations = files.filter { Self.owner($0.path) == store }.flatMap { file in
                Self.matches(#"\b(func|let|var|enum|struct)\s+\#(name)\b[^\n]*"#, in: file.text)
            }.filter { line in label.map { line.contains("\(name)(\($0)") } ?? true }
            #expect(!declarations.isEmpty, "\(helper) is not declared in \(store)")
            for line in declarations {
                #expect(!line.contains("PostgresConnection") && !line.contains("PostgresClient"), "\(helper) takes a connection: \(line)")
            }
        }
    }

    @Test("the rule sees a store calling another: a planted call is caught, a decode helper is not")
    func ruleFindsCrossStoreCalls() throws {
        let stores = try Self.stores()
        let planted = """
            static func revokeAll(_ db: PostgresConnection, id: UUID, logger: Logger) async throws -> [UUID] {
                let users = try await UserStore.decode(rows)
                let user = try UserStore.user(from: row)
                return try await SessionStore.deleteAll(db, userId: id, logger: logger)
            }
            static func other(_ db: PostgresConnection, logger: Logger) async throws -> User? {
                try await UserStore.user(db, appRef: 1, handle: "a", logger: logger)
            }
            """
        let calls = Self.crossStoreCalls(in: [("Sources/CosyncAuth/Store/PasskeyStore.swift", planted)], stores: stores)
        #expect(calls == [
            "Sources/CosyncAuth/Store/PasskeyStore.swift: SessionStore.deleteAll",
            "Sources/CosyncAuth/Store/PasskeyStore.swift: UserStore.user",
        ], "\(calls)")
        #expect(Self.crossStoreCalls(in: [("Sources/CosyncAuth/Store/SessionStore.swift", planted)], stores: stores).count == 1)
    }
}
