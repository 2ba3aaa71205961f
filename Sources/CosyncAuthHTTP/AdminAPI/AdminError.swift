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
            AdminError(status: .unprocessableContent, code: field.code, message: "\(field.field) \(field.message)", field: field.field)
        case .badRequest(let code, let message): AdminError(status: .badRequest, code: code, message: message)
        case .conflict(let code, let message): AdminError(status: .conflict, code: code, message: message)
        }
    }
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
