import CosyncAuth
import Foundation

/// Reads a `mongoexport` file one document at a time, whether it holds JSON lines or one JSON array
/// (`--jsonArray`), without loading the file: a byte scanner finds each top-level object.
public final class DocumentReader {
    let url: URL
    let handle: FileHandle
    let chunkSize: Int
    var buffer: [UInt8] = []
    var position = 0  // next byte of buffer to scan
    var start = -1  // where the object in progress began
    var depth = 0
    var inString = false
    var escaped = false
    var atEnd = false
    /// Documents returned so far.
    public private(set) var count = 0

    public init(url: URL, chunkSize: Int = 1 << 20) throws {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw ImportFailure("cannot open \(url.path)") }
        self.url = url
        self.handle = handle
        self.chunkSize = chunkSize
    }

    deinit { try? handle.close() }

    /// The next document's bytes, or nil at the end of the file.
    public func next() throws -> ArraySlice<UInt8>? {
        while true {
            while position < buffer.count {
                let byte = buffer[position]
                let i = position
                position += 1
                if inString {
                    if escaped { escaped = false } else if byte == 0x5C { escaped = true } else if byte == 0x22 { inString = false }
                } else if byte == 0x22 {
                    if depth > 0 { inString = true }
                } else if byte == 0x7B {
                    if depth == 0 { start = i }
                    depth += 1
                } else if byte == 0x7D {
                    depth -= 1
                    if depth < 0 { throw ImportFailure("\(url.lastPathComponent): unbalanced braces near document \(count + 1)") }
                    if depth == 0 && start >= 0 {
                        let document = buffer[start...i]
                        start = -1
                        count += 1
                        return document
                    }
                }
            }
            if atEnd {
                if depth != 0 { throw ImportFailure("\(url.lastPathComponent): the file ends inside document \(count + 1)") }
                return nil
            }
            // Keep only the object in progress, then read more.
            let keepFrom = start >= 0 ? start : buffer.count
            buffer.removeFirst(keepFrom)
            position -= keepFrom
            if start >= 0 { start = 0 }
            let chunk = handle.readData(ofLength: chunkSize)
            if chunk.isEmpty { atEnd = true } else { buffer.append(contentsOf: chunk) }
        }
    }

    /// Skips `n` documents without decoding them.
    public func skip(_ n: Int) throws {
        var left = n
        while left > 0, try next() != nil { left -= 1 }
    }
}

/// A document of MongoDB Extended JSON (canonical, relaxed or the old v1 form), read through
/// accessors that unwrap `$oid`, `$date`, `$numberLong`, `$numberInt` and `$numberDouble`.
public struct LegacyDocument: Sendable {
    public let fields: [String: JSONValue]

    public init(bytes: ArraySlice<UInt8>) throws {
        guard let object = try DocumentParser.parse(bytes).objectValue else {
            throw ImportFailure("a document is not a JSON object")
        }
        fields = object
    }

    public init(fields: [String: JSONValue]) { self.fields = fields }

    public subscript(_ key: String) -> JSONValue? { fields[key] }

    /// `_id` as text (`$oid` unwrapped).
    public var id: String? { Self.text(fields["_id"]) }

    public func string(_ key: String) -> String? {
        guard case .string(let s)? = fields[key] else { return Self.text(fields[key]) }
        return s
    }

    public func int(_ key: String) -> Int? { Self.number(fields[key]) }

    public func bool(_ key: String) -> Bool? {
        switch fields[key] {
        case .bool(let b)?: return b
        case .string(let s)?: return s == "true" ? true : (s == "false" ? false : nil)
        default: return nil
        }
    }

    public func date(_ key: String) -> Date? { Self.date(fields[key]) }

    public func object(_ key: String) -> [String: JSONValue]? { fields[key]?.objectValue.map(Self.plain) }

    public func array(_ key: String) -> [JSONValue]? { fields[key]?.arrayValue?.map(Self.plain) }

    static func text(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let s)?: return s
        case .object(let o)?:
            if let oid = o["$oid"]?.stringValue { return oid }
            if let n = number(value) { return String(n) }
            return nil
        case .int(let i)?: return String(i)
        default: return nil
        }
    }

    static func number(_ value: JSONValue?) -> Int? {
        switch value {
        case .int(let i)?: return i
        case .double(let d)? where d.rounded() == d && abs(d) < 9e15: return Int(d)
        case .string(let s)?: return Int(s)
        case .object(let o)?:
            for key in ["$numberInt", "$numberLong"] {
                if let s = o[key]?.stringValue { return Int(s) }
            }
            if let s = o["$numberDouble"]?.stringValue, let d = Double(s), d.rounded() == d, abs(d) < 9e15 { return Int(exactly: d) }
            return nil
        default: return nil
        }
    }

    static func date(_ value: JSONValue?) -> Date? {
        guard case .object(let o)? = value, let inner = o["$date"] else { return nil }
        // A date out of the storable range is no date: it would trap when bound to SQL.
        if let ms = number(inner) { return Date.storable(secondsSince1970: Double(ms) / 1000) }
        if let text = inner.stringValue { return LegacyDates.parse(text)?.storable }
        return nil
    }

    /// Extended JSON wrappers inside free-form values (metadata) become plain JSON.
    static func plain(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let o):
            if o.count == 1, let oid = o["$oid"]?.stringValue { return .string(oid) }
            if o.count == 1, let d = date(value) { return .string(CosyncAuth.ISO8601.milliseconds(d)) }
            if o.count == 1, let n = number(value) { return .int(n) }
            return .object(o.mapValues(plain))
        case .array(let a): return .array(a.map(plain))
        default: return value
        }
    }

    static func plain(_ object: [String: JSONValue]) -> [String: JSONValue] { object.mapValues(plain) }
}

public struct ImportFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

enum LegacyDates {
    static func parse(_ text: String) -> Date? {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        if let d = try? withFraction.parse(text) { return d }
        if let d = try? Date.ISO8601FormatStyle().parse(text) { return d }
        // "2024-01-15T10:00:00+0000" / "+00:00" variants
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        for format in ["yyyy-MM-dd'T'HH:mm:ss.SSSZ", "yyyy-MM-dd'T'HH:mm:ssZ", "yyyy-MM-dd'T'HH:mm:ss.SSSXXXXX", "yyyy-MM-dd'T'HH:mm:ssXXXXX"] {
            f.dateFormat = format
            if let d = f.date(from: text) { return d }
        }
        return nil
    }
}

/// A JSON parser for the import's documents. It gives the values that decoding `JSONValue` with
/// JSONDecoder gives (an integral number is `.int`, also when written `1.0` or `1e3`; the first of two
/// equal keys wins; a trailing comma is taken; a lone surrogate, a control character in a string,
/// invalid UTF-8 or a number out of Double's range is an error), without Codable, whose attempt of
/// every type in turn for every value took half of an import's time.
struct DocumentParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var i = 0

    static func parse(_ slice: ArraySlice<UInt8>) throws -> JSONValue {
        try slice.withUnsafeBufferPointer { buffer in
            var parser = DocumentParser(bytes: buffer)
            parser.skipSpace()
            let value = try parser.value(depth: 0)
            parser.skipSpace()
            guard parser.i == buffer.count else { throw parser.failure("unexpected characters after the document") }
            return value
        }
    }

    func failure(_ what: String) -> ImportFailure { ImportFailure("a document is not valid JSON: \(what) at byte \(i)") }

    var current: UInt8? { i < bytes.count ? bytes[i] : nil }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func expect(_ byte: UInt8) throws {
        guard current == byte else { throw failure("expected '\(Character(Unicode.Scalar(byte)))'") }
        i += 1
    }

    mutating func value(depth: Int) throws -> JSONValue {
        guard depth < 512 else { throw failure("nested too deeply") }
        switch current {
        case UInt8(ascii: "{")?:
            i += 1
            var object: [String: JSONValue] = [:]
            skipSpace()
            if current == UInt8(ascii: "}") {
                i += 1
                return .object(object)
            }
            while true {
                skipSpace()
                if current == UInt8(ascii: "}"), !object.isEmpty {  // a trailing comma, as JSONDecoder takes it
                    i += 1
                    return .object(object)
                }
                guard current == UInt8(ascii: "\"") else { throw failure("expected a key") }
                let key = try string()
                skipSpace()
                try expect(UInt8(ascii: ":"))
                skipSpace()
                let item = try value(depth: depth + 1)
                if object[key] == nil { object[key] = item }
                skipSpace()
                if current == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                return .object(object)
            }
        case UInt8(ascii: "[")?:
            i += 1
            var array: [JSONValue] = []
            skipSpace()
            if current == UInt8(ascii: "]") {
                i += 1
                return .array(array)
            }
            while true {
                skipSpace()
                if current == UInt8(ascii: "]"), !array.isEmpty {  // a trailing comma, as JSONDecoder takes it
                    i += 1
                    return .array(array)
                }
                array.append(try value(depth: depth + 1))
                skipSpace()
                if current == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                try expect(UInt8(ascii: "]"))
                return .array(array)
            }
        case UInt8(ascii: "\"")?:
            return .string(try string())
        case UInt8(ascii: "t")?:
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f")?:
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n")?:
            try literal("null")
            return .null
        case nil:
            throw failure("unexpected end")
        default:
            return try number()
        }
    }

    mutating func literal(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard i + count <= bytes.count, let base = bytes.baseAddress, memcmp(base + i, word.utf8Start, count) == 0 else { throw failure("unknown literal") }
        i += count
    }

    /// A string; `i` is at its opening quote.
    mutating func string() throws -> String {
        i += 1
        let start = i
        while i < bytes.count, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\"), bytes[i] >= 0x20 { i += 1 }
        guard let stop = current else { throw failure("unterminated string") }
        if stop == UInt8(ascii: "\"") {
            defer { i += 1 }
            guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self) else { throw failure("invalid UTF-8") }
            return text
        }
        var out = Array(bytes[start..<i])
        while true {
            guard let byte = current else { throw failure("unterminated string") }
            i += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else { throw failure("invalid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                guard let escape = current else { throw failure("unterminated string") }
                i += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard current == UInt8(ascii: "\\"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "u") else { throw failure("lone surrogate") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure("lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw failure("lone surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar), let encoded = UTF8.encode(unicode) else { throw failure("invalid escape") }
                    out.append(contentsOf: encoded)
                default: throw failure("invalid escape")
                }
            case 0..<0x20:
                throw failure("control character in a string")
            default:
                out.append(byte)
            }
        }
    }

    mutating func hex4() throws -> UInt32 {
        guard i + 4 <= bytes.count else { throw failure("invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[i]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            i += 1
        }
        return value
    }

    /// A number (JSON's grammar): `.int` when it is an integer Int holds, else `.double`.
    mutating func number() throws -> JSONValue {
        let start = i
        func digits() -> Int {
            let from = i
            while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
            return i - from
        }
        if current == UInt8(ascii: "-") { i += 1 }
        let leading = i
        guard digits() > 0 else { throw failure("invalid value") }
        if bytes[leading] == UInt8(ascii: "0"), i - leading > 1 { throw failure("leading zero") }
        var integral = true
        if current == UInt8(ascii: ".") {
            i += 1
            integral = false
            guard digits() > 0 else { throw failure("invalid number") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            i += 1
            integral = false
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw failure("invalid number") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        if integral, let value = Int(text) { return .int(value) }
        guard let double = Double(text), double.isFinite else { throw failure("number out of range") }
        if let value = Int(exactly: double) { return .int(value) }
        return .double(double)
    }
}
