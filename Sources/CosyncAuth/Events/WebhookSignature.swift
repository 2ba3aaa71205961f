import Crypto
import Foundation

/// Standard Webhooks signing: `webhook-signature` = `v1,` + base64(HMAC-SHA256(secret, "id.timestamp.body")),
/// the secret being the bytes base64-encoded after `whsec_`.
public enum WebhookSignature {
    public static let prefix = "whsec_"

    /// A new secret: `whsec_` and the base64 of 32 random bytes.
    public static func generateSecret() -> String {
        prefix + Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
    }

    /// The key bytes of a `whsec_` secret, or nil when it is not one.
    public static func keyBytes(_ secret: String) -> Data? {
        guard secret.hasPrefix(prefix) else { return nil }
        return Data(base64Encoded: String(secret.dropFirst(prefix.count)))
    }

    /// One `v1,<base64>` signature of the message with `secret`.
    public static func sign(secret: String, id: String, timestamp: Int, body: String) -> String? {
        guard let key = keyBytes(secret) else { return nil }
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(id).\(timestamp).\(body)".utf8), using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }

    /// The header value: one signature per secret, separated by spaces.
    public static func header(secrets: [String], id: String, timestamp: Int, body: String) -> String {
        secrets.compactMap { sign(secret: $0, id: id, timestamp: timestamp, body: body) }.joined(separator: " ")
    }

    /// Checks a header against a secret in constant time (for tests and receivers written in Swift).
    public static func verify(header: String, secret: String, id: String, timestamp: Int, body: String) -> Bool {
        guard let key = keyBytes(secret) else { return false }
        let signed = Data("\(id).\(timestamp).\(body)".utf8)
        for part in header.split(separator: " ") where part.hasPrefix("v1,") {
            guard let mac = Data(base64Encoded: String(part.dropFirst(3))) else { continue }
            if HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: SymmetricKey(data: key)) { return true }
        }
        return false
    }
}
