import CosyncAuth
import Hummingbird

/// Who is calling the admin API.
enum AdminPrincipal: Sendable {
    case appOperator
    case appDeveloper(appId: String)

    var auditName: String {
        switch self {
        case .appOperator: "operator"
        case .appDeveloper: "app-secret"
        }
    }
}

/// `Authorization: Bearer <operator token | app secret>`. The operator may do everything; an app
/// secret only acts on its own app (403 elsewhere).
struct AdminAuthorization: Sendable {
    let services: CosyncServices

    func bearer(_ request: Request) throws -> String {
        guard let header = request.headers[.authorization] else {
            throw AdminError(status: .unauthorized, code: "unauthenticated", message: "Authorization: Bearer <token> is required")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            throw AdminError(status: .unauthorized, code: "unauthenticated", message: "Authorization must be 'Bearer <token>'")
        }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }

    /// Operator only (e.g. listing or creating apps).
    func requireOperator(_ request: Request) async throws -> AdminPrincipal {
        let token = try bearer(request)
        if await services.operatorToken.matches(token) { return .appOperator }
        if try await services.apps.app(forSecret: token) != nil {
            throw AdminError(status: .forbidden, code: "forbidden", message: "an app secret cannot use this route")
        }
        throw AdminError(status: .unauthorized, code: "unauthenticated", message: "the token is not valid")
    }

    /// The operator, or the secret of the app named in the path. While that app is suspended its
    /// secret may only read (GET/HEAD): anything else is 403 `app_suspended`. The operator may do
    /// everything, un-suspending included.
    /// Returns the principal and the app (nil when the operator names an app that does not exist).
    func requireApp(_ request: Request, appId: String) async throws -> (AdminPrincipal, App?) {
        let token = try bearer(request)
        if await services.operatorToken.matches(token) {
            return (.appOperator, try await services.apps.currentApp(appId: appId))
        }
        if let owner = try await services.apps.app(forSecret: token) {
            guard owner.appId == appId else {
                throw AdminError(status: .forbidden, code: "forbidden", message: "this app secret belongs to another app")
            }
            if AppStatus(stored: owner.status) == .suspended, request.method != .get, request.method != .head {
                throw AdminError(status: .forbidden, code: "app_suspended", message: "the app is suspended: its secret may only read")
            }
            return (.appDeveloper(appId: appId), try await services.apps.currentApp(appId: appId))
        }
        throw AdminError(status: .unauthorized, code: "unauthenticated", message: "the token is not valid")
    }
}
