import Crypto
import Foundation
import _CryptoExtras

/// The legacy server's at-rest encryption (<doc:LegacyImport> §3.9): key = SHA-256 of the
/// encryptKey text, AES-256-CTR with a 16-byte IV as the whole initial counter block, stored as
/// base64(IV ‖ ciphertext). There is no MAC: a wrong key decrypts to garbage, so every field is
/// checked against the shape its plaintext must have.
public struct LegacyCipher: Sendable {
    let key: SymmetricKey?

    /// `encryptKey` nil or empty: the legacy server ran without encryption.
    public init(encryptKey: String?) {
        if let encryptKey, !encryptKey.isEmpty {
            key = SymmetricKey(data: SHA256.hash(data: Data(encryptKey.utf8)))
        } else {
            key = nil
        }
    }

    /// Decrypts one stored value (nil when it cannot be: too short, not base64, not UTF-8).
    public func decrypt(_ stored: String) -> String? {
        guard let key, let data = Data(base64Encoded: stored), data.count >= 17 else { return nil }
        guard let nonce = try? AES._CTR.Nonce(nonceBytes: data.prefix(16)),
            let plain = try? AES._CTR.decrypt(data.dropFirst(16), using: key, nonce: nonce)
        else { return nil }
        return String(data: plain, encoding: .utf8)
    }

    /// Encrypts like the legacy server (for fixtures and tests).
    public func encrypt(_ plaintext: String, iv: [UInt8]) -> String? {
        guard let key, iv.count == 16, let nonce = try? AES._CTR.Nonce(nonceBytes: iv),
            let cipher = try? AES._CTR.encrypt(Data(plaintext.utf8), using: key, nonce: nonce)
        else { return nil }
        return (Data(iv) + cipher).base64EncodedString()
    }

    /// A field that may be plaintext (written before encryption existed, or with no encryptKey) or
    /// encrypted: the plaintext shape decides. Returns nil when neither reading has the shape.
    public func reveal(_ stored: String, looksPlain: (String) -> Bool) -> String? {
        if looksPlain(stored) { return stored }
        guard let plain = decrypt(stored), looksPlain(plain) else { return nil }
        return plain
    }

    // MARK: plaintext shapes (<doc:LegacyImport> §3.9)

    /// base64 of a PEM text.
    public static func isBase64PEM(_ text: String) -> Bool {
        guard let data = Data(base64Encoded: text), let pem = String(data: data, encoding: .utf8) else { return false }
        return pem.hasPrefix("-----BEGIN")
    }

    public static func isJWT(_ text: String) -> Bool { text.hasPrefix("eyJ") && text.split(separator: ".").count == 3 }
    public static func isSendGridKey(_ text: String) -> Bool { text.hasPrefix("SG.") && text.count >= 8 }
    public static func isTwilioSid(_ text: String) -> Bool { text.hasPrefix("AC") && text.count == 34 }
    public static func isPhone(_ text: String) -> Bool {
        text.hasPrefix("+") && text.count >= 8 && text.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }
    }
    public static func isTwilioToken(_ text: String) -> Bool {
        text.count == 32 && text.allSatisfy { $0.isHexDigit }
    }
}
