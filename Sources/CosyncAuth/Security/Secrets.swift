import Crypto
import Foundation

/// Random identifiers and secrets, and the hashing/comparison rules for them.
public enum Secrets {
    /// `count` bytes from the system CSPRNG.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A 32-lowercase-hex identifier (the appId format).
    public static func hexIdentifier() -> String { Hex.encode(randomBytes(16)) }

    /// A high-entropy secret with a readable prefix, e.g. `cas_…` for app secrets.
    public static func token(prefix: String, bytes: Int = 32) -> String {
        prefix + Base64URL.encode(randomBytes(bytes))
    }

    /// A 6-digit code from the CSPRNG, 100000-999999 (no leading zero, so the legacy integer
    /// comparison of codes and a string comparison agree).
    public static func numericCode() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(Int.random(in: 100_000...999_999, using: &generator))
    }

    /// SHA-256 of the UTF-8 bytes. Used to store high-entropy secrets (app secrets, tokens) so that
    /// the database never holds them; a fast hash is right for 256-bit random values.
    public static func sha256(_ text: String) -> Data { Data(SHA256.hash(data: Data(text.utf8))) }

    /// Compares two byte strings in time that depends only on their lengths.
    public static func constantTimeEquals(_ lhs: some DataProtocol, _ rhs: some DataProtocol) -> Bool {
        let a = Array(lhs), b = Array(rhs)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

public enum Hex {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}

public enum Base64URL {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Accepts base64 or base64url, with or without padding.
    public static func decodeLenient(_ text: String) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }

    /// The JSON object in part `index` (0 header, 1 payload) of a compact JWT, read without any
    /// signature check; nil unless the token has three parts and that part is a JSON object.
    public static func jwtPart(_ token: String, _ index: Int) -> [String: JSONValue]? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.indices.contains(index), let data = decodeLenient(String(parts[index])) else { return nil }
        return (try? JSONDecoder().decode(JSONValue.self, from: data))?.objectValue
    }
}
