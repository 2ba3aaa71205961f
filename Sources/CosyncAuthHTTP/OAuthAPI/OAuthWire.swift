import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The wire rules every OAuth endpoint shares: strict form bodies and query strings, and errors in
/// the RFC 6749 §5.2 JSON shape.
enum OAuthWire {
    /// Form bodies and query strings are small; a bigger one is refused before it is parsed.
    static let maxFormBytes = StrictForm.maxBytes

    /// The form body of a POST; it must be `application/x-www-form-urlencoded`.
    static func formBody(_ request: Request, context: some RequestContext) async throws(OAuthError) -> [String: String] {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else {
            throw .invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: maxFormBytes) } catch { throw .invalidRequest("the request is too large") }
        do { return try StrictForm.parse(buffer.readableBytesView) } catch { throw .invalidRequest(error.reason) }
    }

    /// The query string of a request as parameters.
    static func query(_ request: Request) throws(OAuthError) -> [String: String] {
        guard let query = request.uri.query else { return [:] }
        do { return try StrictForm.parse(Array(query.utf8)) } catch { throw .invalidRequest(error.reason) }
    }

    /// The RFC 6749 §5.2 error response (`Cache-Control: no-store`), with `WWW-Authenticate`,
    /// `DPoP-Nonce` and `Retry-After` when the error names them.
    static func errorResponse(_ error: OAuthError) -> Response {
        var headers: HTTPFields = [.cacheControl: "no-store", pragma: "no-cache"]
        if let scheme = error.challenge {
            var challenge = scheme
            if scheme != "Basic" { challenge += " error=\"\(error.code)\"" }
            if scheme == "DPoP" { challenge += ", algs=\"\(DPoPAlgorithms.supported.joined(separator: " "))\"" }
            headers[.wwwAuthenticate] = challenge
        }
        if let nonce = error.dpopNonce { headers[dpopNonce] = nonce }
        if let retry = error.retryAfter { headers[.retryAfter] = String(retry) }
        return JSONBody.response(
            ["error": .string(error.code), "error_description": .string(error.description)],
            status: HTTPResponse.Status(code: error.status), headers: headers)
    }

    /// A successful JSON answer of an OAuth endpoint: never cached (RFC 6749 §5.1).
    static func response(_ object: [String: JSONValue], headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.cacheControl] = "no-store"
        fields[pragma] = "no-cache"
        return JSONBody.response(object, headers: fields)
    }

    static let pragma = HTTPField.Name("Pragma")!
    static let dpopNonce = HTTPField.Name("DPoP-Nonce")!
    static let dpop = HTTPField.Name("DPoP")!
}

/// The signature algorithms accepted in DPoP proofs.
enum DPoPAlgorithms {
    static let supported = ["ES256", "RS256", "PS256", "EdDSA"]
}
