import CosyncAuth
import Foundation
import Hummingbird

/// `/admin/v1/apps…`: apps CRUD and credential rotation.
struct AppRoutes {
    let services: CosyncServices
    var auth: AdminAuthorization { AdminAuthorization(services: services) }

    func register(on admin: RouterGroup<ServerRequestContext>, app: RouterGroup<AdminAppContext>) {
        admin.post("apps", use: create)
        admin.get("apps", use: list)
        app.get("", use: show)
        app.patch("", use: update)
        app.delete("", use: delete)
        app.post("app-token/rotate", use: rotateToken)
        app.post("app-secret/rotate", use: rotateSecret)
        app.post("keys/rotate", use: rotateKeys)
    }

    @Sendable func create(_ request: Request, context: ServerRequestContext) async throws -> Response {
        let principal = try await auth.requireOperator(request)
        let input = try await JSONBody.object(request, context: context)
        let created = try await services.apps.create(input, actor: principal.auditName)
        var object = try created.app.json()
        object["appSecret"] = .string(created.appSecret)
        return JSONBody.response(object, status: .created, headers: [.location: "/admin/v1/apps/\(created.app.appId)"])
    }

    @Sendable func list(_ request: Request, context: ServerRequestContext) async throws -> Response {
        _ = try await auth.requireOperator(request)
        let query = AdminQuery(request: request)
        let page = try await services.apps.list(query: try query.string("query"), limit: try query.limit(), cursor: query.cursor)
        return JSONBody.response([
            "apps": .array(try page.apps.map { .object(try $0.json()) }),
            "nextCursor": page.nextCursor.map { .string($0) } ?? .null,
        ])
    }

    @Sendable func show(_ request: Request, context: AdminAppContext) async throws -> Response {
        return JSONBody.response(try await services.apps.view(app: context.scope.resolvedApp()).json())
    }

    @Sendable func update(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let principal = scope.principal
        let patch = try await JSONBody.object(request, context: context)
        if case .appDeveloper = principal, patch["status"] != nil {
            throw AdminError(status: .forbidden, code: "forbidden", message: "only the operator can change status", field: "status")
        }
        // `attestation: required` needs trust anchors; when the request does not give both, the stored
        // settings decide, and a refusal conflicts with them.
        let intrinsic = patch["attestation"]?.stringValue == "required" && patch["trustAnchors"]?.arrayValue?.isEmpty == true
        let view = try await StateRule.applying([StateRule("attestation", ["trust_anchors_required"]) { !intrinsic }]) {
            try await services.apps.update(app: try scope.resolvedApp(), patch: patch, actor: principal.auditName)
        }
        return JSONBody.response(try view.json())
    }

    @Sendable func delete(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        try await services.apps.delete(app: try scope.resolvedApp(), actor: scope.principal.auditName)
        return Response(status: .noContent)
    }

    /// Body (optional): `{"gracePeriodSeconds": 0…2592000}`: how long the old token keeps working.
    @Sendable func rotateToken(_ request: Request, context: AdminAppContext) async throws -> Response {
        let (appId, principal) = context.scope.parts
        let input = try await JSONBody.object(request, context: context, allowEmpty: true)
        if let unknown = input.keys.sorted().first(where: { $0 != "gracePeriodSeconds" }) {
            throw AdminError.from(.invalid(FieldError(unknown, "unknown_field", "is not accepted here")))
        }
        var grace = 0
        if let value = input["gracePeriodSeconds"] {
            guard case .int(let seconds) = value, (0...2_592_000).contains(seconds) else {
                throw AdminError.from(.invalid(FieldError("gracePeriodSeconds", "out_of_range", "must be an integer from 0 to 2592000")))
            }
            grace = seconds
        }
        let app = try context.scope.resolvedApp()
        let rotation = try await services.apps.rotateAppToken(app: app, graceSeconds: grace, actor: principal.auditName)
        return JSONBody.response([
            "appId": .string(appId), "appToken": .string(rotation.appToken),
            "previousTokenExpiresAt": rotation.previousTokenExpiresAt.map { .string(ISO8601.milliseconds($0)) } ?? .null,
        ])
    }

    @Sendable func rotateSecret(_ request: Request, context: AdminAppContext) async throws -> Response {
        let (appId, principal) = context.scope.parts
        let secret = try await services.apps.rotateAppSecret(app: context.scope.resolvedApp(), actor: principal.auditName)
        return JSONBody.response(["appId": .string(appId), "appSecret": .string(secret)])
    }

    /// Body (optional): `{"retireAfterHours": 0…8760}`; default: the app's userJWTExpiration.
    @Sendable func rotateKeys(_ request: Request, context: AdminAppContext) async throws -> Response {
        let principal = context.scope.principal
        let input = try await JSONBody.object(request, context: context, allowEmpty: true)
        if let unknown = input.keys.sorted().first(where: { $0 != "retireAfterHours" }) {
            throw AdminError.from(.invalid(FieldError(unknown, "unknown_field", "is not accepted here")))
        }
        var hours: Int? = nil
        if let value = input["retireAfterHours"] {
            guard case .int(let h) = value, (0...8760).contains(h) else {
                throw AdminError.from(.invalid(FieldError("retireAfterHours", "out_of_range", "must be an integer from 0 to 8760")))
            }
            hours = h
        }
        let rotation = try await services.apps.rotateKeys(
            app: context.scope.resolvedApp(), retireAfterHours: hours, actor: principal.auditName)
        var object = try rotation.app.json()
        object["previousKeyRetiresAt"] = .string(ISO8601.milliseconds(rotation.previousKeyRetiresAt))
        return JSONBody.response(object)
    }
}
