// (Named apart from Security/Secrets.swift's Base64URL, which serves JWTs and secrets: this one works on
// [UInt8], bounds the decoded size and rejects anything but the two alphabets and final padding.)
/// base64url (RFC 4648 §5) without padding on output; decoding is tolerant because clients differ:
/// it accepts both alphabets (`-_` and `+/`) and optional `=` padding at the end, and nothing else
/// (no whitespace, no padding in the middle). Works on `[UInt8]` with explicit bounds, never traps.
enum WebAuthnBase64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Value of one character in either alphabet, or nil.
    @inline(__always)
    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c &- UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c &- UInt8(ascii: "a") &+ 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c &- UInt8(ascii: "0") &+ 52
        case UInt8(ascii: "-"), UInt8(ascii: "+"): return 62
        case UInt8(ascii: "_"), UInt8(ascii: "/"): return 63
        default: return nil
        }
    }

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count / 3 + 1) * 4)
        var index = 0
        while index + 2 < bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
            out.append(alphabet[Int((n >> 6) & 63)])
            out.append(alphabet[Int(n & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let n = UInt32(bytes[index]) << 16
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
        } else if rest == 2 {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
            out.append(alphabet[Int((n >> 6) & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes `text`; nil when it is not base64/base64url. `maxBytes` bounds the decoded size so that
    /// an oversized field is refused before any work proportional to it.
    static func decode(_ text: String, maxBytes: Int = .max) -> [UInt8]? {
        // Refuse an oversized text before copying it (4 characters per 3 bytes, plus padding).
        if maxBytes < Int.max / 2, text.utf8.count > (maxBytes / 3 + 1) * 4 + 2 { return nil }
        var chars = Array(text.utf8)
        var padding = 0
        while let last = chars.last, last == UInt8(ascii: "=") {
            chars.removeLast()
            padding += 1
        }
        guard padding <= 2 else { return nil }
        let remainder = chars.count % 4
        if remainder == 1 { return nil }
        // Padding, when present, must complete the last group exactly.
        if padding > 0 && (remainder + padding) != 4 { return nil }
        let decodedCount = chars.count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        guard decodedCount <= maxBytes else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(decodedCount)
        var accumulator: UInt32 = 0
        var bits = 0
        for c in chars {
            guard let v = sextet(c) else { return nil }
            accumulator = (accumulator << 6 | UInt32(v)) & 0xFFFFFF
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return out
    }
}
