// A small, strict CBOR (RFC 8949) decoder written by hand for WebAuthn: no Swift CBOR or WebAuthn
// package is available to this project, and WebAuthn needs only a narrow subset. It decodes exactly
// what attestation objects, COSE keys and authenticator extension maps use and refuses the rest:
//
// * major types 0-5 (unsigned, negative, byte string, text string, array, map) and from type 7 only
//   false / true / null; tags, floats, simple values, indefinite lengths and the reserved additional
//   information values 28-30 are errors;
// * every read is bounds-checked; a declared length beyond the remaining input is an error;
// * nesting deeper than `maxDepth` and containers with more than `maxItems` entries are errors;
// * map keys must be integers or text strings, and a key may not repeat;
// * text strings must be valid UTF-8.
// Non-minimal integer/length encodings are accepted (they are harmless here).
// The decoder reports how many bytes one item took, so callers can find what follows it.

/// One decoded CBOR data item.
public indirect enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer stored as CBOR does: the value is -1 - n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Entries in encoded order (duplicates are refused while decoding).
    case map([CBORMapEntry])
    case bool(Bool)
    case null

    /// The value as an `Int` when it is an integer that fits.
    public var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    /// Looks up a map entry by key (nil for non-maps or a missing key).
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first(where: { $0.key == key })?.value
    }

    public subscript(text key: String) -> CBORValue? { self[.text(key)] }

    public subscript(int key: Int) -> CBORValue? {
        self[key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))]
    }
}

public struct CBORMapEntry: Sendable, Hashable {
    public var key: CBORValue
    public var value: CBORValue
    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}

public enum CBOR {
    /// Deepest nesting accepted (the top-level item is depth 1).
    public static let maxDepth = 8
    /// Most entries accepted in one array or map.
    public static let maxItems = 64

    /// Decodes the first data item of `bytes` and returns it with the number of bytes it used.
    public static func decodePrefix(_ bytes: ArraySlice<UInt8>) throws(WebAuthnError) -> (value: CBORValue, consumed: Int) {
        var reader = Reader(bytes: bytes)
        let value = try reader.item(depth: 1)
        return (value, reader.position - bytes.startIndex)
    }

    /// Decodes `bytes` as exactly one data item; trailing bytes are an error.
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(WebAuthnError) -> CBORValue {
        let (value, consumed) = try decodePrefix(bytes)
        guard consumed == bytes.count else { throw .malformed("CBOR: trailing bytes") }
        return value
    }

    public static func decode(_ bytes: [UInt8]) throws(WebAuthnError) -> CBORValue {
        try decode(bytes[...])
    }

    private struct Reader {
        let bytes: ArraySlice<UInt8>
        var position: Int

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            self.position = bytes.startIndex
        }

        var remaining: Int { bytes.endIndex - position }

        mutating func byte() throws(WebAuthnError) -> UInt8 {
            guard position < bytes.endIndex else { throw .malformed("CBOR: truncated") }
            let b = bytes[position]
            position += 1
            return b
        }

        mutating func take(_ count: Int) throws(WebAuthnError) -> ArraySlice<UInt8> {
            guard count >= 0, count <= remaining else { throw .malformed("CBOR: length beyond input") }
            let slice = bytes[position..<(position + count)]
            position += count
            return slice
        }

        /// The argument of a head: the additional information itself or the 1/2/4/8 bytes after it.
        mutating func argument(_ info: UInt8) throws(WebAuthnError) -> UInt64 {
            let width: Int
            switch info {
            case 0...23: return UInt64(info)
            case 24: width = 1
            case 25: width = 2
            case 26: width = 4
            case 27: width = 8
            case 31: throw .malformed("CBOR: indefinite length")
            default: throw .malformed("CBOR: reserved additional information")
            }
            var value: UInt64 = 0
            for b in try take(width) { value = value << 8 | UInt64(b) }
            return value
        }

        /// A length that must fit in what is left of the input (`unit` bytes per element at least).
        mutating func length(_ info: UInt8, unit: Int) throws(WebAuthnError) -> Int {
            let raw = try argument(info)
            guard raw <= UInt64(remaining / unit) else { throw .malformed("CBOR: length beyond input") }
            return Int(raw)
        }

        mutating func item(depth: Int) throws(WebAuthnError) -> CBORValue {
            guard depth <= CBOR.maxDepth else { throw .malformed("CBOR: nested too deeply") }
            let head = try byte()
            let major = head >> 5
            let info = head & 0x1F
            switch major {
            case 0:
                return .unsigned(try argument(info))
            case 1:
                return .negative(try argument(info))
            case 2:
                return .bytes(Array(try take(try length(info, unit: 1))))
            case 3:
                let raw = try take(try length(info, unit: 1))
                guard let text = String(validating: raw, as: UTF8.self) else { throw .malformed("CBOR: invalid UTF-8 text") }
                return .text(text)
            case 4:
                let count = try length(info, unit: 1)
                guard count <= CBOR.maxItems else { throw .malformed("CBOR: too many array items") }
                var items: [CBORValue] = []
                items.reserveCapacity(count)
                for _ in 0..<count { items.append(try item(depth: depth + 1)) }
                return .array(items)
            case 5:
                let count = try length(info, unit: 2)
                guard count <= CBOR.maxItems else { throw .malformed("CBOR: too many map entries") }
                var entries: [CBORMapEntry] = []
                entries.reserveCapacity(count)
                var seen = Set<CBORValue>()
                for _ in 0..<count {
                    let key = try item(depth: depth + 1)
                    switch key {
                    case .unsigned, .negative, .text: break
                    default: throw .malformed("CBOR: map key is not an integer or text")
                    }
                    guard seen.insert(key).inserted else { throw .malformed("CBOR: duplicate map key") }
                    let value = try item(depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: value))
                }
                return .map(entries)
            case 6:
                throw .malformed("CBOR: tags are not accepted")
            default:
                switch head {
                case 0xF4: return .bool(false)
                case 0xF5: return .bool(true)
                case 0xF6: return .null
                default: throw .malformed("CBOR: unsupported simple value or float")
                }
            }
        }
    }
}
