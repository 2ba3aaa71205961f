import CosyncAuth
import Foundation
import Testing

@Suite("Core: settings, secrets, keys, migrations")
struct CoreTests {
    @Test("settings validation: defaults, normalisation, field-named errors")
    func settings() throws {
        let base = AppState(name: "x")
        #expect(base.settings.signupFlow == .code && base.settings.locales == ["EN"] && base.settings.metaDataEmail)
        let next = try base.applying(["locales": .array([.string("DE"), .string("EN")]), "appleBundleId": .string(" a.b , c.d ")])
        #expect(next.settings.locales == ["EN", "DE"])
        #expect(next.settings.appleBundleId == "a.b,c.d")
        #expect(throws: FieldError("locales", "invalid_value", "must include EN")) { try base.applying(["locales": .array([.string("DE")])]) }
        #expect(throws: FieldError.self) { try base.applying(["locales": .array([.string("EN"), .string("EN")])]) }
        #expect(throws: FieldError.self) { try base.applying(["userJWTExpiration": .int(0)]) }
        #expect(throws: FieldError.self) {
            try base.applying(["metaData": .array([
                .object(["path": .string("user"), "fieldName": .string("a")]),
                .object(["path": .string("user.name"), "fieldName": .string("b")]),
            ])])
        }
        #expect(throws: FieldError.self) { try base.applying(["metaDataInvite": .array([.object(["path": .string("a"), "fieldName": .string("a"), "canEdit": .bool(true)])])]) }
        // The stored document decodes with defaults for keys it lacks (new settings need no migration).
        let decoded = try JSONDecoder().decode(AppSettings.self, from: Data(#"{"signupFlow":"link"}"#.utf8))
        #expect(decoded.signupFlow == .link && decoded.passwordMinLength == 5 && decoded.maxLoginAttempts == 10)
    }

    @Test("SecretBox: round trip; a wrong key or purpose does not open")
    func secretBox() throws {
        let box = try SecretBox(masterKey: SecretBox.generateMasterKey())
        let first = UUID()
        let sealed = try box.seal("top secret", purpose: .signupCode(first))
        #expect(try box.openString(sealed, purpose: .signupCode(first)) == "top secret")
        #expect(!String(decoding: sealed, as: UTF8.self).contains("top secret"))
        #expect(throws: SecretBox.Failure.self) { try box.open(sealed, purpose: .inviteCode(first)) }
        let other = try SecretBox(masterKey: String(repeating: "ab", count: 32))
        #expect(throws: SecretBox.Failure.self) { try other.open(sealed, purpose: .signupCode(first)) }
        #expect(throws: SecretBox.Failure.self) { try SecretBox(masterKey: "too short") }
    }

    @Test("RSA key material uses the legacy PEM layout")
    func keyMaterial() throws {
        let key = try RSAKeyMaterial.generate()
        #expect(key.privateKeyPEM.hasPrefix("-----BEGIN RSA PRIVATE KEY-----\n"))
        #expect(key.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----\n") && !key.publicKeyPEM.hasSuffix("\n"))
        #expect(key.publicKeyPEM.split(separator: "\n").dropFirst().dropLast().allSatisfy { $0.count <= 64 })
        #expect(String(decoding: Data(base64Encoded: key.rawPublicKey) ?? Data(), as: UTF8.self) == key.publicKeyPEM)
        let again = try RSAKeyMaterial(privateKeyPEM: key.privateKeyPEM, expectedPublicKeyPEM: key.publicKeyPEM)
        #expect(again.kid == key.kid)
        let other = try RSAKeyMaterial.generate()
        #expect(throws: RSAKeyMaterial.Failure.self) { try RSAKeyMaterial(privateKeyPEM: key.privateKeyPEM, expectedPublicKeyPEM: other.publicKeyPEM) }
    }

    @Test("codes, md5 hex and identifiers")
    func identifiers() {
        #expect(PasswordHasher.md5Hex("password") == "5f4dcc3b5aa765d61d8327deb882cf99")
        #expect(PasswordHasher.isMD5Hex("5f4dcc3b5aa765d61d8327deb882cf99") && !PasswordHasher.isMD5Hex("5F4DCC3B5AA765D61D8327DEB882CF99"))
        let codes = (0..<200).map { _ in Secrets.numericCode() }
        #expect(codes.allSatisfy { $0.count == 6 && $0.allSatisfy(\.isNumber) })
        #expect(Set(codes).count > 150)
        #expect(Identifiers.normalizedHandle("  A@B.co ") == "a@b.co")
        #expect(Identifiers.normalizedHandle("a b@c") == nil)
        #expect(Identifiers.normalizedUserName(" Bob7 ") == "bob7")
        #expect(Identifiers.normalizedUserName("7bob") == nil && Identifiers.normalizedUserName("bo@b") == nil)
    }

    @Test("one handle rule and one phone rule for the wire, the admin API, AppKey and the import")
    func identifierRules() {
        #expect(Identifiers.handle("  Jo Doe@Example.COM ") == "jo+doe@example.com")
        #expect(Identifiers.handle(" ANON_Ab12 ") == "anon_ab12")
        #expect(Identifiers.handle(" ANON_Ab12 ", keepingAnonymous: true) == "ANON_Ab12")
        #expect(Identifiers.normalizedHandle("Jo@Example.com") == "jo@example.com")
        #expect(Identifiers.normalizedHandle("jo doe@example.com") == nil)
        // E.164: + then 7-15 digits, never a leading 0; a leading space was the SDK's unescaped +.
        #expect(Identifiers.phone(" 4915112345678") == "+4915112345678")
        #expect(Identifiers.phone("+4915112345678") == "+4915112345678")
        #expect(Identifiers.phone("+1234567") == "+1234567")
        #expect(Identifiers.phone("+123456") == nil)
        #expect(Identifiers.phone("+1234567890123456") == nil)
        #expect(Identifiers.phone("+0123456789") == nil)
        #expect(Identifiers.phone("4915112345678") == nil)
        #expect(Identifiers.phone("+49 151") == nil)
        #expect(Identifiers.phone("+４９１５１１２３４５６７８") == nil)
    }

    @Test("SQL scripts split at top-level semicolons only")
    func sqlScript() {
        let script = """
            -- comment; with a semicolon
            CREATE TABLE a (x text DEFAULT 'a;b');
            /* block; comment */ CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;
            SELECT "we;ird" FROM a
            """
        let statements = SQLScript.statements(script)
        #expect(statements.count == 3)
        #expect(statements[1].contains("$$ SELECT 1; $$"))
    }

    @Test("migrations are idempotent and recorded")
    func migrations() async throws {
        let services = try await TestEnvironment.services()
        let again = try await services.migrator.migrate(services.client, logger: services.logger)
        #expect(again.isEmpty)
        #expect(try await services.migrator.appliedVersion(services.client, logger: services.logger) == services.migrator.latestVersion)
    }

    @Test("configuration errors name the setting")
    func configuration() {
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parseDatabaseURL(nil) }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parseDatabaseURL("mysql://x@y/z") }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parsePort("99999") }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parseOperatorToken("short") }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parsePublicURL("ftp://x", port: 1) }
        #expect((try? ServerConfiguration.parsePort(nil)) == 8080)
        let url = try? DatabaseURL("postgres://u:p%40ss@db.example:5433/auth?sslmode=require")
        #expect(url?.password == "p@ss" && url?.port == 5433 && url?.database == "auth" && url?.sslMode == "require")
    }
}
