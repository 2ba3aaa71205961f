import Foundation

/// A DPoP proof (RFC 9449 §4.2) taken apart: a compact JWS whose header names `typ: dpop+jwt`, an
/// asymmetric `alg` and the public `jwk`, signed by that key. Parsing checks the form and the
/// signature; the claims are checked by `DPoPVerifier` against the request.
struct DPoPProof: Sendable {
    let key: DPoPKey
    let claims: [String: JSONValue]

    /// A proof is a few hundred bytes (an RSA-4096 one under 3 KB): anything larger is refused before
    /// any decoding.
    static let maxBytes = 8192
    static let algorithms: Set<String> = ["ES256", "RS256", "PS256", "EdDSA"]

    init(_ text: String) throws(DPoPRefusal) {
        guard text.utf8.count <= Self.maxBytes else { throw DPoPRefusal("the DPoP proof is larger than \(Self.maxBytes) bytes") }
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw DPoPRefusal("the DPoP proof is not a compact JWS (three base64url parts)") }
        guard let headerBytes = StrictBase64URL.decode(bytes: parts[0]), let payloadBytes = StrictBase64URL.decode(bytes: parts[1]),
              let signature = StrictBase64URL.decode(bytes: parts[2])
        else { throw DPoPRefusal("the DPoP proof is not a compact JWS (three base64url parts)") }
        let header = try Self.object(headerBytes, "header")
        guard let typ = header["typ"]?.stringValue, typ.lowercased() == "dpop+jwt" else {
            throw DPoPRefusal("the DPoP proof's typ must be dpop+jwt")
        }
        guard let alg = header["alg"]?.stringValue else { throw DPoPRefusal("the DPoP proof has no alg") }
        guard Self.algorithms.contains(alg) else {
            throw DPoPRefusal("alg \(alg) is not accepted for DPoP proofs; use one of ES256, RS256, PS256, EdDSA")
        }
        // No extension is understood here, so none can be critical (RFC 7515 §4.1.11).
        guard header["crit"] == nil else { throw DPoPRefusal("the DPoP proof names critical header parameters (crit)") }
        guard let jwk = header["jwk"]?.objectValue else { throw DPoPRefusal("the DPoP proof has no jwk header (the public key)") }
        let key = try DPoPKey(jwk: jwk, alg: alg)
        // The signing input is the first two parts exactly as sent (RFC 7515 §5.2).
        let input = Array(text.utf8.prefix(parts[0].count + 1 + parts[1].count))
        guard key.isValidSignature(signature, for: input, alg: alg) else {
            throw DPoPRefusal("the DPoP proof's signature does not verify with its jwk")
        }
        self.key = key
        self.claims = try Self.object(payloadBytes, "payload")
    }

    /// A JSON object, refused unless it is well-formed, at most a few levels deep and free of
    /// duplicate member names (RFC 7515 §4: we refuse them rather than pick one).
    private static func object(_ bytes: [UInt8], _ part: String) throws(DPoPRefusal) -> [String: JSONValue] {
        guard StrictJSON.isAcceptable(bytes, maxDepth: 8),
              let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)), let object = value.objectValue
        else { throw DPoPRefusal("the DPoP proof's \(part) is not a JSON object (or repeats a member name)") }
        return object
    }
}

/// A small JSON checker that runs before the decoder: it refuses nesting deeper than `maxDepth` and
/// objects that repeat a member name (Foundation's decoder would silently keep the first one, where
/// RFC 7515 asks for the last or a refusal). It compares names after unescaping, so `"a"` and
/// `"\u0061"` are the same name.
enum StrictJSON {
    static func isAcceptable(_ bytes: [UInt8], maxDepth: Int) -> Bool {
        var scanner = Scanner(bytes: bytes, maxDepth: maxDepth)
        guard scanner.value(depth: 0) else { return false }
        scanner.skipSpace()
        return scanner.index == bytes.count
    }

    private struct Scanner {
        let bytes: [UInt8]
        let maxDepth: Int
        var index = 0

        init(bytes: [UInt8], maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func value(depth: Int) -> Bool {
            skipSpace()
            guard let byte = current else { return false }
            switch byte {
            case UInt8(ascii: "{"):
                guard depth < maxDepth else { return false }
                index += 1
                var names = Set<[UInt8]>()
                skipSpace()
                if current == UInt8(ascii: "}") { index += 1; return true }
                while true {
                    skipSpace()
                    guard let name = string(), names.insert(name).inserted else { return false }
                    skipSpace()
                    guard current == UInt8(ascii: ":") else { return false }
                    index += 1
                    guard value(depth: depth + 1) else { return false }
                    skipSpace()
                    if current == UInt8(ascii: ",") { index += 1; continue }
                    if current == UInt8(ascii: "}") { index += 1; return true }
                    return false
                }
            case UInt8(ascii: "["):
                guard depth < maxDepth else { return false }
                index += 1
                skipSpace()
                if current == UInt8(ascii: "]") { index += 1; return true }
                while true {
                    guard value(depth: depth + 1) else { return false }
                    skipSpace()
                    if current == UInt8(ascii: ",") { index += 1; continue }
                    if current == UInt8(ascii: "]") { index += 1; return true }
                    return false
                }
            case UInt8(ascii: "\""):
                return string() != nil
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default:
                // A number: its exact grammar is the decoder's to check; here only its extent.
                let start = index
                while let byte = current, (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
                {
                    index += 1
                }
                return index > start
            }
        }

        mutating func literal(_ word: String) -> Bool {
            let expected = Array(word.utf8)
            guard index + expected.count <= bytes.count, Array(bytes[index..<index + expected.count]) == expected else { return false }
            index += expected.count
            return true
        }

        /// A string's content as UTF-8 with its escapes resolved; nil when malformed.
        mutating func string() -> [UInt8]? {
            guard current == UInt8(ascii: "\"") else { return nil }
            index += 1
            var out: [UInt8] = []
            while let byte = current {
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return out
                case UInt8(ascii: "\\"):
                    guard let escape = current else { return nil }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return nil }
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard current == UInt8(ascii: "\\") else { return nil }
                            index += 1
                            guard current == UInt8(ascii: "u") else { return nil }
                            index += 1
                            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { return nil }
                        out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default:
                        return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    out.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                index += 1
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
    }
}

/// The `htu` comparison of RFC 9449 §4.3: the URL without query and fragment, after the syntax- and
/// scheme-based normalisation of RFC 3986 §6.2.2–6.2.3 (scheme and host in lower case, the default port
/// dropped, an empty path read as `/`, percent-encodings in upper case and unreserved characters
/// decoded). Only `http` and `https` URLs are accepted; a URL with user information is refused.
enum HTTPURINormalizer {
    static func normalize(_ text: String) -> String? {
        // A URI is printable ASCII (RFC 3986 §2); refusing the rest keeps the case folding below ASCII-only.
        guard text.utf8.count <= 2048, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        var rest = Substring(text)
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        if let question = rest.firstIndex(of: "?") { rest = rest[..<question] }
        guard let separator = rest.range(of: "://") else { return nil }
        let scheme = rest[..<separator.lowerBound].lowercased()
        let defaultPort: String
        switch scheme {
        case "https": defaultPort = "443"
        case "http": defaultPort = "80"
        default: return nil
        }
        let afterScheme = rest[separator.upperBound...]
        let pathStart = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let authority = afterScheme[..<pathStart]
        let path = afterScheme[pathStart...]
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var host: Substring
        var port: Substring = ""
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                port = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty, port.count <= 5, port.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        var portText = String(port.drop(while: { $0 == "0" }))
        if !port.isEmpty, portText.isEmpty { portText = "0" }
        if port.isEmpty || portText == defaultPort { portText = "" }
        guard let normalizedPath = normalizePercentEncoding(path.isEmpty ? "/" : path) else { return nil }
        return scheme + "://" + host.lowercased() + (portText.isEmpty ? "" : ":" + portText) + normalizedPath
    }

    /// Upper-case hex digits in percent-encodings; unreserved characters (RFC 3986 §2.3) decoded.
    private static func normalizePercentEncoding(_ text: Substring) -> String? {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else { return nil }
            let decoded = high << 4 | low
            let isUnreserved = (decoded >= UInt8(ascii: "A") && decoded <= UInt8(ascii: "Z")) || (decoded >= UInt8(ascii: "a") && decoded <= UInt8(ascii: "z"))
                || (decoded >= UInt8(ascii: "0") && decoded <= UInt8(ascii: "9")) || decoded == UInt8(ascii: "-") || decoded == UInt8(ascii: ".")
                || decoded == UInt8(ascii: "_") || decoded == UInt8(ascii: "~")
            if isUnreserved {
                out.append(decoded)
            } else {
                let digits = Array("0123456789ABCDEF".utf8)
                out.append(contentsOf: [UInt8(ascii: "%"), digits[Int(decoded >> 4)], digits[Int(decoded & 0x0F)]])
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
