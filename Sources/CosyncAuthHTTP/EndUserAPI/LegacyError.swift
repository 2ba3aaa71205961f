import CosyncAuth
import Hummingbird

/// The end-user API's error: HTTP 400 with `{"code": <int>, "message": <string>}` (enduser-api.md §3).
/// The codes and messages are the legacy ones the shipped SDKs map.
struct LegacyError: HTTPResponseError, Equatable {
    let code: Int
    let message: String

    var status: HTTPResponse.Status { .badRequest }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        JSONBody.response(["code": .int(code), "message": .string(message)], status: .badRequest)
    }

    static let invalidAppToken = LegacyError(code: 400, message: "invalid app token")
    static let appNotFound = LegacyError(code: 401, message: "app not found")
    static let invalidAccessToken = LegacyError(code: 405, message: "invalid access token")
    static let internalError = LegacyError(code: 500, message: "internal server error")
    static let invalidData = LegacyError(code: 602, message: "invalid data")
}

/// Header lookups by lower-case name (`app-token`, `access-token`).
enum LegacyHeaders {
    static func value(_ name: String, in headers: HTTPFields) -> String? {
        headers.first(where: { $0.name.canonicalName == name })?.value
    }
}
