import CosyncAuth
import Foundation
import Hummingbird

/// Building JSON responses and reading JSON bodies.
enum JSONBody {
    static func response(_ value: JSONValue, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        let data = (try? JSONCoding.encode(value)) ?? Data("{}".utf8)
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A response whose JSON was encoded once, ahead (`/healthz`): the same bytes as `response(_:)`
    /// gives for that value, without a JSON encoder on every request.
    struct Fixed: Sendable {
        let body: ByteBuffer
        init(_ value: JSONValue) {
            body = ByteBuffer(bytes: (try? JSONCoding.encode(value)) ?? Data("{}".utf8))
        }
        func response() -> Response {
            Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: body))
        }
    }

    static func response(_ object: [String: JSONValue], status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        response(.object(object), status: status, headers: headers)
    }

    /// Reads the body as a JSON object. Malformed JSON or another top-level type is a 400; an empty
    /// body is `{}` when `allowEmpty`.
    static func object(_ request: Request, context: some RequestContext, allowEmpty: Bool = false) async throws -> [String: JSONValue] {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: context.maxUploadSize)
        } catch {
            throw AdminError(status: .contentTooLarge, code: "body_too_large", message: "the body must be at most 1 MiB")
        }
        let bytes = Array(buffer.readableBytesView)
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }) {
            if allowEmpty { return [:] }
            throw AdminError(status: .badRequest, code: "empty_body", message: "a JSON object body is required")
        }
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw AdminError(status: .badRequest, code: "malformed_json", message: "the body is not valid JSON")
        }
        guard let object = value.objectValue else {
            throw AdminError(status: .badRequest, code: "invalid_body", message: "the body must be a JSON object, got \(value.typeName)")
        }
        // PostgreSQL text and jsonb cannot hold U+0000 (SQLSTATE 22P05/22021): refuse it here, before any SQL.
        if let field = firstNULField(value, path: "") {
            throw AdminError(
                status: .unprocessableContent, code: "invalid_character",
                message: "\(field.isEmpty ? "a key" : field) must not contain the NUL character (U+0000)", field: field.isEmpty ? nil : field)
        }
        return object
    }

    /// The path (`a.b[2].c`) of the first key or string holding U+0000, or nil when there is none. A
    /// NUL inside a key names the key with the NUL written as `\u0000`.
    static func firstNULField(_ value: JSONValue, path: String) -> String? {
        switch value {
        case .string(let text): return text.unicodeScalars.contains("\u{0}") ? path : nil
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let found = firstNULField(item, path: "\(path)[\(index)]") { return found }
            }
            return nil
        case .object(let members):
            for key in members.keys.sorted() {
                let name = key.replacingOccurrences(of: "\u{0}", with: "\\u0000")
                let child = path.isEmpty ? name : "\(path).\(name)"
                if key.unicodeScalars.contains("\u{0}") { return child }
                if let member = members[key], let found = firstNULField(member, path: child) { return found }
            }
            return nil
        case .null, .bool, .int, .double: return nil
        }
    }
}
