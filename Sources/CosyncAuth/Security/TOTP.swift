import Crypto
import ExtrasBase64
import Foundation

/// RFC 6238 time-based one-time passwords as Google Authenticator uses them: HMAC-SHA1, 6 digits,
/// 30-second steps (<doc:EndUserAPI> §6.6). The secret is 20 random bytes, written in base32.
///
/// HummingbirdOTP keys its HMAC with the UTF-8 bytes of a String, which cannot hold 20 random bytes
/// (nor the secrets imported from the legacy server), so the few lines of RFC 4226 truncation live
/// here over swift-crypto's HMAC; base32 comes from ExtrasBase64.
public enum TOTP {
    public static let period: Int64 = 30
    public static let digits = 6

    /// A new secret: 20 bytes from the system CSPRNG.
    public static func newSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<20).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Base32, upper case, no padding (the form of the provisioning URI).
    public static func base32(_ secret: [UInt8]) -> String {
        String(base32Encoding: secret, options: .omitPaddingCharacter)
    }

    /// The form the SDK shows users: base32 in lower case, in groups of 4 separated by spaces.
    public static func displayKey(_ secret: [UInt8]) -> String {
        let text = Array(base32(secret).lowercased())
        return stride(from: 0, to: text.count, by: 4).map { String(text[$0..<min($0 + 4, text.count)]) }.joined(separator: " ")
    }

    /// The secret bytes of a base32 key in any of its written forms (spaces, lower case, padding).
    public static func secret(fromKey key: String) -> [UInt8]? {
        let cleaned = key.uppercased().filter { !$0.isWhitespace && $0 != "=" }
        guard !cleaned.isEmpty, let bytes = try? cleaned.base32decoded(), !bytes.isEmpty else { return nil }
        return bytes
    }

    public static func step(at date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) / period }

    /// The 6-digit code of one time step.
    public static func code(secret: [UInt8], step: Int64) -> String {
        var counter = UInt64(bitPattern: step).bigEndian
        let message = withUnsafeBytes(of: &counter) { Array($0) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: SymmetricKey(data: secret)))
        let offset = Int(mac[mac.count - 1] & 0x0f)
        let value = (UInt32(mac[offset] & 0x7f) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8)
            | UInt32(mac[offset + 3])
        let text = String(value % 1_000_000)
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// The time step within ±1 of `date` whose code is `code`, or nil. Every candidate is compared in
    /// constant time.
    public static func matchingStep(secret: [UInt8], code: String, at date: Date) -> Int64? {
        let now = step(at: date)
        var found: Int64?
        for candidate in (now - 1)...(now + 1) {
            if Secrets.constantTimeEquals(Data(Self.code(secret: secret, step: candidate).utf8), Data(code.utf8)) && found == nil {
                found = candidate
            }
        }
        return found
    }

    /// `otpauth://totp/<issuer>:<account>?secret=…&issuer=…&algorithm=SHA1&digits=6&period=30`, with
    /// issuer and account encoded as JavaScript's encodeURIComponent does (the legacy form).
    public static func provisioningURI(issuer: String, account: String, secret: [UInt8]) -> String {
        let i = uriComponent(issuer), a = uriComponent(account)
        return "otpauth://totp/\(i):\(a)?secret=\(base32(secret))&issuer=\(i)&algorithm=SHA1&digits=\(digits)&period=\(period)"
    }

    static let componentCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()")

    static func uriComponent(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: componentCharacters) ?? ""
    }
}
