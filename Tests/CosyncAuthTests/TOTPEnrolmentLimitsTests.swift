import CosyncAuth
import Foundation
import Testing

/// TOTP enrolment for every valid account: a handle of 254 code points (249 emoji after `ANON_`, or a
/// multi-byte e-mail address) and an issuer of 100 code points made an otpauth URI too long for a
/// QR code, and `setTwoFactorGoogleVerification` answered `{"code":500}`. The label is now cut short
/// (ending `…`) so that the URI always fits; the secret is never cut.
@Suite("TOTP enrolment: the otpauth URI always fits a QR code")
struct TOTPEnrolmentLimitsTests {
    static let fox = "\u{1F98A}"  // 4 UTF-8 bytes, 12 once percent-encoded

    func makeApp(_ api: API, name: String? = nil, _ settings: [String: JSONValue]) async throws -> SDK {
        var all = settings
        all["twoFactorVerification"] = .string("google")
        let created = try await api.createApp(name ?? "TOTP \(Secrets.hexIdentifier().prefix(6).filter(\.isLetter))", settings: all)
        return SDK(api: api, appToken: created.string("appToken"))
    }

    /// The parts of a decoded `otpauth://totp/<issuer>:<account>?…` URI.
    struct Provisioning {
        let issuerInLabel: String
        let account: String
        let query: [String: String]
    }

    static func parse(_ uri: String) throws -> Provisioning {
        let prefix = "otpauth://totp/"
        try #require(uri.hasPrefix(prefix), "\(uri.prefix(80))")
        let rest = uri.dropFirst(prefix.count)
        let mark = try #require(rest.firstIndex(of: "?"))
        let label = rest[..<mark]
        let colon = try #require(label.firstIndex(of: ":"), "the label names the issuer: \(label.prefix(80))")
        var query: [String: String] = [:]
        for pair in rest[rest.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            try #require(parts.count == 2)
            // A parameter that does not percent-decode is left out (the checks below then fail).
            query[String(parts[0])] = String(parts[1]).removingPercentEncoding
        }
        return Provisioning(
            issuerInLabel: try #require(String(label[..<colon]).removingPercentEncoding),
            account: try #require(String(label[label.index(after: colon)...]).removingPercentEncoding), query: query)
    }

    /// `shown` is `full`, or a non-empty beginning of it followed by `…`.
    static func isWholeOrCut(_ shown: String, of full: String) -> Bool {
        if shown == full { return true }
        guard shown.hasSuffix("…") else { return false }
        let kept = shown.dropLast()
        return !kept.isEmpty && full.unicodeScalars.starts(with: kept.unicodeScalars)
    }

    /// Enables TOTP for the caller and checks the reply: 200, a key, and a QR that decodes to an
    /// otpauth URI with that key, whose account and issuer are whole or cut short. Returns the key.
    func enable(_ sdk: SDK, access: String, account: String, issuer: String) async throws -> String {
        let reply = try await sdk.post("/api/appuser/setTwoFactorGoogleVerification", [("twoFactor", "true")], accessToken: access)
        try #require(reply.status == .ok, "\(reply.status) \(reply.text)")
        let key = try #require(reply.object["googleSecretKey"]?.stringValue, "\(reply.text)")
        let image = try #require(reply.object["QRDataImage"]?.stringValue)
        let png = try #require(Data(base64Encoded: String(image.dropFirst("data:image/png;base64,".count))))
        let uri = try QRDecoder.decode(png: png)
        let parsed = try Self.parse(uri)
        #expect(parsed.query["secret"] == key.replacingOccurrences(of: " ", with: "").uppercased())
        #expect(parsed.query["issuer"] == parsed.issuerInLabel)
        #expect(parsed.query["algorithm"] == "SHA1" && parsed.query["digits"] == "6" && parsed.query["period"] == "30")
        #expect(Self.isWholeOrCut(parsed.account, of: account), "account shown: \(parsed.account)")
        #expect(Self.isWholeOrCut(parsed.issuerInLabel, of: issuer), "issuer shown: \(parsed.issuerInLabel)")
        return key
    }

    @Test("an anonymous user whose handle is ANON_ and 249 emoji can enable TOTP; the QR decodes")
    func anonymousEmojiHandle() async throws {
        try await TestEnvironment.withLiveServer { api in
            let issuer = "Emoji Anon"
            let sdk = try await makeApp(api, ["anonymousLoginEnabled": .bool(true), "googleAppName": .string(issuer)])
            // Unique per run: the handle is matched exactly, so the first emoji varies.
            let marker = String(UnicodeScalar(0x1F600 + Int.random(in: 0..<64))!)
            let handle = "ANON_" + marker + String(repeating: Self.fox, count: 248)
            #expect(handle.unicodeScalars.count == 254)
            let login = try await sdk.post("/api/appuser/loginAnonymous", [("handle", handle)])
            try #require(login.status == .ok, "\(login.text)")
            _ = try await enable(sdk, access: login.object.string("access-token"), account: handle, issuer: issuer)
        }
    }

    @Test("a 254-code-point multi-byte e-mail handle and a 100-emoji issuer: TOTP enrols, decodes and signs in")
    func longEmailAndIssuer() async throws {
        try await TestEnvironment.withLiveServer { api in
            let issuer = String(repeating: Self.fox, count: 100)
            let sdk = try await makeApp(api, ["signupFlow": .string("none"), "googleAppName": .string(issuer)])
            let domain = "@example.com"
            let tag = String(Secrets.hexIdentifier().prefix(8))
            // CJK ideographs: 3 UTF-8 bytes each, 9 once percent-encoded.
            let local = tag + String(repeating: "\u{65E5}", count: 254 - tag.count - domain.count)
            let handle = local + domain
            #expect(handle.unicodeScalars.count == 254)
            let signup = try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))])
            try #require(signup.status == .ok, "\(signup.text)")
            let key = try await enable(sdk, access: signup.object.string("access-token"), account: handle, issuer: issuer)
            // The shortened label changes nothing about the secret: the authenticator's code signs in.
            let loginToken = try #require(try await sdk.login(handle, "pw").object["login-token"]?.stringValue)
            let done = try await sdk.post("/api/appuser/loginComplete", [("loginToken", loginToken), ("code", ReferenceTOTP.code(key: key))])
            #expect(Set(done.object.keys) == ["jwt", "access-token"], "\(done.text)")
        }
    }

    @Test("a 100-code-point app name that is one character (a note and 99 combining marks) as the issuer: TOTP enrols and decodes")
    func longAppNameIssuer() async throws {
        try await TestEnvironment.withLiveServer { api in
            // A musical note carrying 99 combining tremolos: one character of 400 UTF-8 bytes, so the
            // label must be cut inside it.
            let name = "\u{1D15F}" + String(repeating: "\u{1D167}", count: 99)
            #expect(name.count == 1 && name.unicodeScalars.count == 100)
            let sdk = try await makeApp(api, name: name, ["signupFlow": .string("none")])
            let handle = "mark\(Secrets.hexIdentifier().prefix(8))@example.com"
            let signup = try await sdk.post("/api/appuser/signup", [("handle", handle), ("password", SDK.md5("pw"))])
            try #require(signup.status == .ok, "\(signup.text)")
            _ = try await enable(sdk, access: signup.object.string("access-token"), account: handle, issuer: name)
        }
    }

    @Test("the label limits keep every otpauth URI inside a QR code; short labels are unchanged")
    func labelLimits() throws {
        #expect(QRCode.maxByteCount == 2331)
        #expect(AuthenticatorLabel.longestURI <= QRCode.maxByteCount)
        let secret = TOTP.newSecret()
        let worstAccounts = [
            "ANON_" + String(repeating: Self.fox, count: 249),
            String(repeating: "\u{65E5}", count: 241) + "@example.com",
            "\u{1D15F}" + String(repeating: "\u{1D167}", count: 253),
            String(repeating: "%", count: 254),
        ]
        let worstIssuers = [String(repeating: Self.fox, count: 100), "\u{1D15F}" + String(repeating: "\u{1D167}", count: 99), String(repeating: "&", count: 100)]
        for account in worstAccounts {
            for issuer in worstIssuers {
                let uri = AuthenticatorLabel.provisioningURI(issuer: issuer, account: account, secret: secret)
                #expect(uri.utf8.count <= AuthenticatorLabel.longestURI)
                let modules = try QRCode.matrix(for: uri)
                #expect(modules.count <= 4 * 22 + 17, "version 22 at most")
                let parsed = try Self.parse(uri)
                #expect(Self.isWholeOrCut(parsed.account, of: account) && parsed.account != account)
                #expect(Self.isWholeOrCut(parsed.issuerInLabel, of: issuer) && parsed.issuerInLabel != issuer)
            }
        }
        // The usual label is the legacy one, byte for byte.
        #expect(AuthenticatorLabel.provisioningURI(issuer: "Acme & Co", account: "ann@example.com", secret: secret)
            == TOTP.provisioningURI(issuer: "Acme & Co", account: "ann@example.com", secret: secret))
        #expect(AuthenticatorLabel.fitted("ab", limit: 2) == "ab")
        #expect(AuthenticatorLabel.fitted("abcdefghijkl", limit: 11) == "ab…")  // "…" takes 9 bytes encoded
        // A cut never splits an emoji (nor a character whose code points fit).
        #expect(AuthenticatorLabel.fitted(String(repeating: Self.fox, count: 10), limit: 40) == Self.fox + Self.fox + "…")
    }
}
