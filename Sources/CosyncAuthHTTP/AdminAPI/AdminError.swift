import CosyncAuth
import Hummingbird
import Logging
import PostgresNIO

/// The admin API's error: `{"error": {"code", "message", "field"?}}` with a 4xx status. 5xx bodies
/// never carry internals.
struct AdminError: HTTPResponseError {
    let status: HTTPResponse.Status
    let code: String
    let message: String
    var field: String? = nil

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var error: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
        if let field { error["field"] = .string(field) }
        var headers: HTTPFields = [:]
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        return JSONBody.response(["error": .object(error)], status: status, headers: headers)
    }

    static func from(_ failure: AdminFailure) -> AdminError {
        switch failure {
        case .notFound(let what): AdminError(status: .notFound, code: "not_found", message: "\(what) not found")
        case .invalid(let field):
            // The app's password policy is stored state: a well-formed password that it refuses conflicts with it.
            AdminError(status: field.code == "password_policy" ? .conflict : .unprocessableContent, code: field.code,
                       message: "\(field.field) \(field.message)", field: field.field)
        case .badRequest(let code, let message): AdminError(status: .badRequest, code: code, message: message)
        case .conflict(let code, let message): AdminError(status: .conflict, code: code, message: message)
        }
    }
}

/// A field rule that a JSON Schema cannot state because it depends on something stored (the app's
/// settings, the user's handle) or on a third party (a provider token's signature): a well-formed value
/// that it refuses is answered `status` (409 conflict with the stored state, 403 a refused credential)
/// instead of 422, so that "schema-valid" keeps meaning "accepted or refused for a documented reason".
struct StateRule {
    let field: String
    let codes: Set<String>
    let status: HTTPResponse.Status
    /// Whether the request's value is well-formed (a 422 stays a 422 for a malformed one).
    let wellFormed: @Sendable () -> Bool

    init(_ field: String, _ codes: Set<String>, _ status: HTTPResponse.Status = .conflict, when wellFormed: @escaping @Sendable () -> Bool = { true }) {
        self.field = field
        self.codes = codes
        self.status = status
        self.wellFormed = wellFormed
    }

    /// Runs `body`; a field failure matching one of `rules` becomes that rule's status (same code and field).
    static func applying<T>(_ rules: [StateRule], _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch AdminFailure.invalid(let field) {
            guard let rule = rules.first(where: { $0.field == field.field && $0.codes.contains(field.code) && $0.wellFormed() }) else {
                throw AdminFailure.invalid(field)
            }
            throw AdminError(status: rule.status, code: field.code, message: "\(field.field) \(field.message)", field: field.field)
        }
    }

    /// `locale` is two ASCII letters (the document's pattern) but not one of the app's locales.
    static func appLocale(_ input: [String: JSONValue]) -> StateRule {
        let value = input["locale"]?.stringValue
        return StateRule("locale", ["invalid_value"]) {
            guard let value else { return false }
            return value.utf8.count == 2 && value.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
        }
    }

    /// A provider sign-in that the app is not set up for (409), or a provider token that does not
    /// verify, carries no verified e-mail or another one (403).
    static let provider: [StateRule] = [
        StateRule("provider", ["not_configured"]),
        StateRule("idToken", ["invalid_token", "email_missing", "email_mismatch"], .forbidden),
    ]
}

/// Maps every error thrown below it on the admin routes to the admin error shape.
struct AdminErrorMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as AdminError {
            return try error.response(from: request, context: context)
        } catch let failure as AdminFailure {
            return try AdminError.from(failure).response(from: request, context: context)
        } catch let busy as KDFOverloaded {
            var response = try AdminError(status: .serviceUnavailable, code: "busy", message: busy.description)
                .response(from: request, context: context)
            response.headers[.retryAfter] = String(busy.retryAfterSeconds)
            return response
        } catch let error as HTTPError {
            let code = error.status == .notFound ? "not_found" : "http_\(error.status.code)"
            return try AdminError(status: error.status, code: code, message: error.body ?? error.status.reasonPhrase)
                .response(from: request, context: context)
        } catch where DatabaseAvailability.isUnavailable(error) {
            context.logger.warning("admin request caught by a database outage: answered 503", metadata: operatorMetadata(error))
            var response = try AdminError(status: .serviceUnavailable, code: "database_unavailable", message: "database unavailable; try again shortly")
                .response(from: request, context: context)
            response.headers[.retryAfter] = "2"
            return response
        } catch {
            context.logger.error("admin request failed", metadata: operatorMetadata(error))
            return try AdminError(status: .internalServerError, code: "internal", message: "internal server error")
                .response(from: request, context: context)
        }
    }
}

/// Log metadata of an unexpected error, for the admin and the end-user routes alike: its type and,
/// through `describeForOperator`, the SQLSTATE and server message of an SQL error (never values).
func operatorMetadata(_ error: any Error) -> Logger.Metadata {
    var metadata: Logger.Metadata = ["error": "\(String(reflecting: type(of: error)))"]
    if let psql = error as? PSQLError {
        metadata["sqlstate"] = "\(psql.serverInfo?[.sqlState] ?? "")"
        metadata["reason"] = "\(describeForOperator(psql))"
    }
    return metadata
}
