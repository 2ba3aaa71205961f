/// The lenient form parser of <doc:EndUserAPI> §1.3. The SDKs send `URLComponents.query` as the body:
/// a percent-*decoded* query string, so values arrive raw (spaces, `{"json"}`, UTF-8, lone `%`). A
/// strict decoder would reject such bodies; this one never fails:
/// 1. bytes → UTF-8 (lossy); 2. split on `&`, skip empty pieces; 3. split each piece on the first
/// `=` (no `=`: value ""); 4. `+` → space, then valid `%XX` decoded (as UTF-8), malformed `%` kept;
/// 5. duplicate keys: the first wins.
public enum LegacyForm {
    public static func parse(_ bytes: some Collection<UInt8>) -> [String: String] {
        var fields: [String: String] = [:]
        for piece in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let key: String
            let value: String
            if let eq = piece.firstIndex(of: UInt8(ascii: "=")) {
                key = decode(piece[piece.startIndex..<eq])
                value = decode(piece[piece.index(after: eq)...])
            } else {
                key = decode(piece)
                value = ""
            }
            if fields[key] == nil { fields[key] = value }
        }
        return fields
    }

    /// `+` → space, valid `%XX` → byte, everything else as is; then UTF-8 (invalid → U+FFFD).
    static func decode(_ part: some Collection<UInt8>) -> String {
        let input = Array(part)
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var i = 0
        while i < input.count {
            let c = input[i]
            if c == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if c == UInt8(ascii: "%"), i + 2 < input.count,
                let high = hexValue(input[i + 1]), let low = hexValue(input[i + 2])
            {
                out.append(high << 4 | low)
                i += 3
                continue
            } else {
                out.append(c)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
