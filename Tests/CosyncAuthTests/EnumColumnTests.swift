import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// Typed enums end to end (issue 21, item 3): each enum a store decodes a text column into names
/// exactly what the column's CHECK admits, so a value the database accepts always decodes and a case
/// the code adds cannot be written. (`IdentityTests.kindColumnMatchesEnum` checks `identities.kind`.)
@Suite("Enum columns: each CHECK admits exactly its enum's cases")
struct EnumColumnTests {
    /// The values the CHECK constraint on `table.column` admits: the quoted literals of its definition
    /// (`CHECK ((purpose = ANY (ARRAY['signup'::text, …])))`). Exactly one CHECK names the column.
    static func admitted(_ table: String, _ column: String) async throws -> Set<String> {
        let definition = try #require(try await TestEnvironment.value(
            """
            SELECT string_agg(pg_get_constraintdef(c.oid), ' | ') FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
            WHERE c.conrelid = \(table)::regclass AND c.contype = 'c' AND a.attname = \(column)
            """, as: String?.self) ?? nil, "no CHECK on \(table).\(column)")
        #expect(!definition.contains(" | "), "more than one CHECK on \(table).\(column): \(definition)")
        return Set(definition.split(separator: "'").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
    }

    @Test("webauthn_challenges.purpose is typed end to end: the column's CHECK admits exactly the ChallengePurpose cases")
    func challengePurpose() async throws {
        #expect(try await Self.admitted("webauthn_challenges", "purpose") == Set(ChallengePurpose.allCases.map(\.rawValue)))
    }

    @Test("login_challenges.factor is typed end to end: the column's CHECK admits exactly the SecondFactor cases")
    func secondFactor() async throws {
        #expect(try await Self.admitted("login_challenges", "factor") == Set(SecondFactor.allCases.map(\.rawValue)))
    }

    @Test("messages.channel is typed end to end: the column's CHECK admits exactly the MessageChannel cases")
    func messageChannel() async throws {
        #expect(try await Self.admitted("messages", "channel") == Set(MessageChannel.allCases.map(\.rawValue)))
    }

    @Test("sessions.method and sessions.proven_by admit exactly the SessionMethod cases")
    func sessionMethod() async throws {
        let methods = Set(SessionMethod.allCases.map(\.rawValue))
        #expect(try await Self.admitted("sessions", "method") == methods)
        #expect(try await Self.admitted("sessions", "proven_by") == methods)
    }
}
