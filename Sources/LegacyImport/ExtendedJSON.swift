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
        guard let object = try JSONDecoder().decode(JSONValue.self, from: Data(bytes)).objectValue else {
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
