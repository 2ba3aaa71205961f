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

    static func response(_ object: [String: JSONValue], status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        response(.object(object), status: status, headers: headers)
    }

    /// Reads the body as a JSON object. Malformed JSON or another top-level type is a 400; an empty
    /// body is `{}` when `allowEmpty`.
    static func object(_ request: Request, context: ServerRequestContext, allowEmpty: Bool = false) async throws -> [String: JSONValue] {
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
        return object
    }
}
