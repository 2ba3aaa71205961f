import CosyncAuth
import Foundation
import LegacyImport
import PostgresNIO
import Testing

/// Users reach PostgreSQL by COPY (text format, LegacyImportStore.upsertUsers): the characters that
/// format gives a meaning to must arrive as they were in the export.
@Suite("Legacy import: users by COPY", .serialized)
struct LegacyImportCopyTests {
    @Test("backslash, tab, newline, carriage return and \\N in a user's values arrive unchanged; a rerun changes nothing")
    func copySpecialCharacters() async throws {
        let services = try await TestEnvironment.services()
        let (folder, appA, _) = try RenamedFixture.make()
        let appId = try #require(appA["appId"]?.stringValue)
        let note = "tab\there\nnew line\r\\N back\\slash \\.\n\\.\n \"quoted\" é 日本"
        let noteJSON = String(decoding: try JSONEncoder().encode(note), as: UTF8.self)
        try RenamedFixture.editLine(folder, "users.json", containing: "alice@example.com") { line in
            line.replacingOccurrences(of: #""metaData":{"user":{"firstName":"Alice","plan":"pro"}}"#, with: #""metaData":{"user":{"firstName":"Alice","note":"# + noteJSON + "}}")
                .replacingOccurrences(of: #""locale":"EN""#, with: #""userName":"ali\\ce\\N","locale":"EN""#)
        }
        let summary = try await LegacyFixture.importInto(services, folder)
        #expect(summary.counts("users")?.read == 10)
        let query: PostgresQuery = """
            SELECT u.metadata->'user'->>'note', u.user_name FROM users u JOIN apps a ON a.id = u.app_ref
            WHERE a.app_id = \(appId) AND u.handle = 'alice@example.com'
            """
        var found: [(String?, String?)] = []
        for try await row in try await services.client.query(query, logger: services.logger).decode((String?, String?).self) { found.append(row) }
        #expect(found.count == 1)
        #expect(found.first?.0 == note)
        #expect(found.first?.1 == "ali\\ce\\n")  // user names are lower-cased

        let before = try await LegacyFixture.snapshot(services.client, appIds: [appId], logger: services.logger)
        _ = try await LegacyFixture.importInto(services, folder)
        let after = try await LegacyFixture.snapshot(services.client, appIds: [appId], logger: services.logger)
        #expect(before == after)
    }
}

/// The import reads documents with its own JSON parser (DocumentParser): the same values as JSONDecoder's
/// `JSONValue`, and an error where JSONDecoder has one.
@Suite("Legacy import: the document parser")
struct LegacyDocumentParserTests {
    @Test("documents parse to what JSONDecoder makes of them, and what it refuses is refused")
    func sameAsJSONDecoder() throws {
        let documents = [
            #"{"_id":{"$oid":"65a5034c912265b1f5d8f1cd"},"handle":"alice@example.com","n":1,"d":1.5,"t":true,"f":false,"z":null}"#,
            #"{ "a" : [ 1 , 2.0 , -0 , -0.0 , 1e3 , 1E-2 , 12.5e1 , [ ] , { } ] , "b" : { "c" : { "d" : [ "x" ] } } }"#,
            #"{"big":100000000000000000000,"max":9223372036854775807,"over":9223372036854775808,"min":-9223372036854775808}"#,
            #"{"s":"tab\there \"q\" \\ \/ \b\f\n\r \u00e9 \u65e5 \ud83d\ude00 é 日本 😀"}"#,
            #"{"dup":1,"dup":2}"#,
            "{\"ws\":\t\r\n 1 }",
            #"{"e":""}"#,
            #"{"a":1,}"#, #"{"a":[1,],}"#,  // JSONDecoder takes a trailing comma
            // Refused by both:
            #"{"n":01}"#, #"{"n":1.}"#, #"{"n":.5}"#, #"{"n":+1}"#, #"{"n":1e400}"#, #"{"n":-}"#,
            #"{"s":"\ud800"}"#, #"{"s":"\udc00"}"#, #"{"s":"\x"}"#, #"{"s":"\u12"}"#, "{\"s\":\"a\u{01}b\"}", #"{"s":"open}"#,
            #"{"a":tru}"#, #"{"a":nul}"#, #"{"a":[,]}"#, #"{"a":[1,,]}"#, #"{,}"#, #"{"a" 1}"#, #"{a:1}"#, #"{"a":1} x"#, #"{"a":1"#,
        ]
        var cases = documents.map { Array($0.utf8) }
        cases.append([0x7B, 0x22, 0x76, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D])  // invalid UTF-8 in a string
        for bytes in cases {
            let text = String(decoding: bytes, as: UTF8.self)
            let expected = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
            let parsed = try? LegacyDocument(bytes: bytes[...])
            if let expected {
                #expect(parsed?.fields == expected.objectValue, "\(text)")
            } else {
                #expect(parsed == nil, "\(text) is refused by JSONDecoder")
            }
        }
    }
}
