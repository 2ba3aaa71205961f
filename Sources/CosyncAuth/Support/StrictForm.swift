/// Strict `application/x-www-form-urlencoded` (and query strings), for the OAuth endpoints and the
/// Portal's forms: `+` is a space, `%XX` a byte, the result must be UTF-8 and hold no NUL. A parameter
/// given twice, or malformed percent-encoding, is an error (RFC 6749 §3.1: parameters must not be
/// included more than once). Empty names are skipped.
///
/// Hand-written: Foundation's `URLComponents` accepts malformed percent-encoding and keeps duplicate
/// names, and the legacy end-user form parser (`LegacyForm`) is lenient on purpose, as the shipped SDKs
/// need.
public enum StrictForm {
    /// Form bodies and query strings are small; a bigger one is refused before it is parsed.
    public static let maxBytes = 64 * 1024

    /// Why a form could not be read, as a sentence for the caller.
    public struct Malformed: Error, Sendable { public let reason: String }

    public static func parse(_ bytes: some Collection<UInt8>) throws(Malformed) -> [String: String] {
        guard bytes.count <= maxBytes else { throw Malformed(reason: "the request is too large") }
        var fields: [String: String] = [:]
        for piece in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let name: String, value: String
            if let eq = piece.firstIndex(of: UInt8(ascii: "=")) {
                name = try decode(piece[piece.startIndex..<eq])
                value = try decode(piece[piece.index(after: eq)...])
            } else {
                name = try decode(piece)
                value = ""
            }
            guard !name.isEmpty else { continue }
            guard fields[name] == nil else { throw Malformed(reason: "\(printable(name)) is given more than once") }
            fields[name] = value
        }
        return fields
    }

    /// One percent-encoded part (a name, a value, or a half of an HTTP Basic credential).
    public static func decode(_ part: some Collection<UInt8>) throws(Malformed) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(part.count)
        var iterator = part.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): out.append(0x20)
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    throw Malformed(reason: "malformed percent-encoding")
                }
                out.append(high << 4 | low)
            default: out.append(byte)
            }
        }
        guard let text = String(validating: out, as: UTF8.self), !text.unicodeScalars.contains("\u{0}") else {
            throw Malformed(reason: "parameters must be UTF-8 without NUL")
        }
        return text
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A parameter name as an error message may quote it.
    public static func printable(_ name: String) -> String {
        String(name.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7f }.prefix(40).map(Character.init))
    }
}
