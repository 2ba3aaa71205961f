import CosyncAuth
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import _CryptoExtras

/// Requests shaped like the CosyncAuthSwift SDK's (enduser-api.md §1.2): the body is
/// `URLComponents.query`, i.e. values NOT percent-encoded, `+` in handles pre-escaped as `%2B`, a nil
/// value as a bare key, no Content-Type; credentials in `app-token` / `access-token` headers.
struct SDK: Sendable {
    let api: API
    let appToken: String

    static func body(_ pairs: [(String, String?)]) -> String {
        pairs.map { key, value in value.map { "\(key)=\($0)" } ?? key }.joined(separator: "&")
    }

    /// The SDK's handle escaping.
    static func handle(_ h: String) -> String { h.replacingOccurrences(of: "+", with: "%2B") }

    static func md5(_ password: String) -> String { PasswordHasher.md5Hex(password) }

    func post(_ path: String, _ pairs: [(String, String?)], accessToken: String? = nil, withAppToken: Bool = true) async throws -> API.Reply {
        var headers: HTTPFields = [:]
        if withAppToken && accessToken == nil { headers[.init("app-token")!] = appToken }
        if let accessToken { headers[.init("access-token")!] = accessToken }
        return try await api.call(.post, path, token: nil, body: Self.body(pairs), headers: headers, contentType: nil)
    }

    func get(_ path: String, accessToken: String? = nil) async throws -> API.Reply {
        var headers: HTTPFields = [:]
        if let accessToken { headers[.init("access-token")!] = accessToken } else { headers[.init("app-token")!] = appToken }
        return try await api.call(.get, path, token: nil, headers: headers)
    }

    func login(_ handle: String, _ password: String) async throws -> API.Reply {
        try await post("/api/appuser/login", [("handle", Self.handle(handle)), ("password", Self.md5(password))])
    }
}

/// The SDK's `isValidJWT(rawPublicKey:)`, step by step (enduser-api.md §7.6), including its
/// base64 padding quirk.
enum SDKJWTCheck {
    static func isValid(jwt: String, rawPublicKey: String) -> Bool {
        guard let pemData = Data(base64Encoded: rawPublicKey), var pem = String(data: pemData, encoding: .utf8) else { return false }
        let prefix = "-----BEGIN PUBLIC KEY-----", suffix = "-----END PUBLIC KEY-----"
        guard pem.hasPrefix(prefix), pem.hasSuffix(suffix) else { return false }
        pem = String(pem.dropFirst(prefix.count).dropLast(suffix.count))
        pem.removeAll { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let der = Data(base64Encoded: pem), let key = try? _RSA.Signing.PublicKey(derRepresentation: der) else { return false }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return false }
        var signature = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        signature += String(repeating: "=", count: signature.count % 4)  // the client's padding rule
        guard let signatureBytes = Data(base64Encoded: signature) else { return false }
        let signed = Data("\(parts[0]).\(parts[1])".utf8)
        return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signatureBytes), for: signed, padding: .insecurePKCS1v1_5)
    }

    static func payload(_ jwt: String) -> [String: JSONValue] { Base64URL.jwtPart(jwt, 1) ?? [:] }

    static func header(_ jwt: String) -> [String: JSONValue] { Base64URL.jwtPart(jwt, 0) ?? [:] }
}

/// The 6-digit code inside a message body: the last 6-digit number (every template puts the code
/// after the app name and the handle, which could contain digits too).
func sixDigitCode(in text: String) -> String? {
    guard let regex = try? Regex(#"\b[0-9]{6}\b"#) else { return nil }
    return text.matches(of: regex).last.map { String(text[$0.range]) }
}
