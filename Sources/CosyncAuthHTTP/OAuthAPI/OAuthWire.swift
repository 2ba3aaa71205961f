import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The wire rules every OAuth endpoint shares: strict form bodies and query strings, and errors in
/// the RFC 6749 §5.2 JSON shape.
enum OAuthWire {
    /// Form bodies and query strings are small; a bigger one is refused before it is parsed.
    static let maxFormBytes = 64 * 1024

    /// Why a form could not be read: the request's `invalid_request` description.
    struct Malformed: Error { let reason: String }

    /// Parses `application/x-www-form-urlencoded` (or a query string): `+` is a space, `%XX` a byte,
    /// the result must be UTF-8 and hold no NUL. A parameter given twice, or malformed percent-encoding,
    /// is an error (RFC 6749 §3.1: parameters must not be included more than once). Empty names are skipped.
    static func parseForm(_ bytes: some Collection<UInt8>) throws(Malformed) -> [String: String] {
        guard bytes.count <= maxFormBytes else { throw Malformed(reason: "the request is too large") }
        var fields: [String: String] = [:]
        for piece in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let eq = piece.firstIndex(of: UInt8(ascii: "="))
            let name: String, value: String
            if let eq {
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

    static func decode(_ part: some Collection<UInt8>) throws(Malformed) -> String {
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
    static func printable(_ name: String) -> String {
        String(name.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7f }.prefix(40).map(Character.init))
    }

    /// The form body of a POST; it must be `application/x-www-form-urlencoded`.
    static func formBody(_ request: Request, context: some RequestContext) async throws(OAuthError) -> [String: String] {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else {
            throw .invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: maxFormBytes) } catch { throw .invalidRequest("the request is too large") }
        do { return try parseForm(buffer.readableBytesView) } catch { throw .invalidRequest(error.reason) }
    }

    /// The query string of a request as parameters.
    static func query(_ request: Request) throws(OAuthError) -> [String: String] {
        guard let query = request.uri.query else { return [:] }
        do { return try parseForm(Array(query.utf8)) } catch { throw .invalidRequest(error.reason) }
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
