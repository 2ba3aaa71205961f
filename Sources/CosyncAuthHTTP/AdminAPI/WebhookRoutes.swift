import CosyncAuth
import Hummingbird

/// `/admin/v1/apps/{appId}/webhooks…`: the app's webhook endpoints, their attempt log and replays.
struct WebhookRoutes {
    let services: CosyncServices
    var webhooks: WebhookAdministration { services.webhooks }

    func register(on app: RouterGroup<AdminAppContext>) {
        app.get("webhooks", use: list)
        app.post("webhooks", use: create)
        app.get("webhooks/:webhookId", use: show)
        app.patch("webhooks/:webhookId", use: update)
        app.delete("webhooks/:webhookId", use: delete)
        app.post("webhooks/:webhookId/disable", use: disable)
        app.post("webhooks/:webhookId/rotate-secret", use: rotateSecret)
        app.get("webhooks/:webhookId/attempts", use: attempts)
        app.post("webhooks/:webhookId/messages/:messageId/replay", use: replayMessage)
        app.post("webhooks/:webhookId/replay", use: replaySince)
    }

    func webhookId(_ context: AdminAppContext) -> String { context.parameters.get("webhookId") ?? "" }

    @Sendable func list(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let endpoints = try await webhooks.list(app: try scope.resolvedApp())
        return JSONBody.response(["webhooks": .array(endpoints.map { .object($0.json()) }), "nextCursor": .null])
    }

    /// The answer of a create: the endpoint and its secret, which is shown only here (and on rotation).
    @Sendable func create(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        let (endpoint, secret) = try await webhooks.create(app: try scope.resolvedApp(), input: input, actor: principal.auditName)
        var body = endpoint.json()
        body["secret"] = .string(secret)
        return JSONBody.response(body, status: .created)
    }

    @Sendable func show(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        return JSONBody.response(try await webhooks.get(app: try scope.resolvedApp(), id: webhookId(context)).json())
    }

    @Sendable func update(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let patch = try await JSONBody.object(request, context: context)
        let endpoint = try await webhooks.update(app: try scope.resolvedApp(), id: webhookId(context), patch: patch, actor: principal.auditName)
        return JSONBody.response(endpoint.json())
    }

    @Sendable func delete(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        try await webhooks.delete(app: try scope.resolvedApp(), id: webhookId(context), actor: principal.auditName)
        return Response(status: .noContent)
    }

    @Sendable func disable(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        return JSONBody.response(try await webhooks.disable(app: try scope.resolvedApp(), id: webhookId(context), actor: principal.auditName).json())
    }

    @Sendable func rotateSecret(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let (endpoint, secret) = try await webhooks.rotateSecret(app: try scope.resolvedApp(), id: webhookId(context), actor: principal.auditName)
        return JSONBody.response([
            "webhookId": .string(endpoint.id.uuidString.lowercased()), "secret": .string(secret),
            "previousSecretExpiresAt": endpoint.previousSecretExpiresAt.map { .string(ISO8601.milliseconds($0)) } ?? .null,
        ])
    }

    @Sendable func attempts(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let query = AdminQuery(request: request)
        // The query is checked before the app is (a bad limit is a 400 even for a missing app).
        let limit = try query.limit()
        let page = try await webhooks.attempts(app: try scope.resolvedApp(), id: webhookId(context), limit: limit, cursor: query.cursor)
        return JSONBody.response([
            "attempts": .array(page.attempts.map { .object($0.json()) }),
            "nextCursor": page.nextCursor.map { .string($0) } ?? .null,
        ])
    }

    @Sendable func replayMessage(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let messageId = context.parameters.get("messageId") ?? ""
        try await webhooks.replay(app: try scope.resolvedApp(), id: webhookId(context), messageId: messageId, actor: principal.auditName)
        return JSONBody.response(["messageId": .string(messageId), "status": .string("pending")], status: .accepted)
    }

    @Sendable func replaySince(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        let count = try await webhooks.replay(app: try scope.resolvedApp(), id: webhookId(context), input: input, actor: principal.auditName)
        return JSONBody.response(["replayed": .int(count)], status: .accepted)
    }
}
