import CosyncAuth
import Hummingbird

/// `/admin/v1/apps/{appId}/users…`.
struct UserRoutes {
    let services: CosyncServices

    func register(on app: RouterGroup<AdminAppContext>) {
        app.get("users", use: list)
        app.post("users", use: create)
        app.get("users/:userId", use: show)
        app.patch("users/:userId", use: update)
        app.delete("users/:userId", use: delete)
        app.post("users/:userId/password", use: setPassword)
        app.get("users/:userId/sessions", use: sessions)
        app.post("users/:userId/revoke-sessions", use: endAllSessions)
        app.delete("users/:userId/sessions/:sessionId", use: endSession)
    }

    func userId(_ context: AdminAppContext) throws -> String { try context.pathParameter("userId", naming: "user") }

    @Sendable func list(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let query = AdminQuery(request: request)
        // The query is checked before the app is (a bad limit is a 400 even for a missing app).
        let (text, limit) = (try query.string("query"), try query.limit())
        let page = try await services.users.list(app: try scope.resolvedApp(), query: text, limit: limit, cursor: query.cursor)
        return JSONBody.response([
            "users": .array(page.users.map { .object($0.json()) }),
            "nextCursor": page.nextCursor.map { .string($0) } ?? .null,
        ])
    }

    @Sendable func create(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        let user = try await StateRule.applying([.appLocale(input)]) {
            try await services.users.create(app: try scope.resolvedApp(), input: input, actor: principal.auditName)
        }
        return JSONBody.response(user.json(), status: .created)
    }

    @Sendable func show(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        return JSONBody.response(try await services.users.get(app: try scope.resolvedApp(), userId: try userId(context)).json())
    }

    @Sendable func update(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let patch = try await JSONBody.object(request, context: context)
        let user = try await StateRule.applying([.appLocale(patch)]) {
            try await services.users.update(app: try scope.resolvedApp(), userId: try userId(context), patch: patch, actor: principal.auditName)
        }
        return JSONBody.response(user.json())
    }

    @Sendable func delete(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        try await services.users.delete(app: try scope.resolvedApp(), userId: try userId(context), actor: principal.auditName)
        return Response(status: .noContent)
    }

    @Sendable func setPassword(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        try await services.users.setPassword(app: try scope.resolvedApp(), userId: try userId(context), input: input, actor: principal.auditName)
        return Response(status: .noContent)
    }

    // MARK: sessions

    @Sendable func sessions(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let sessions = try await services.users.sessions(app: try scope.resolvedApp(), userId: try userId(context))
        return JSONBody.response(["sessions": .array(sessions.map { .object($0.json()) })])
    }

    @Sendable func endSession(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        try await services.users.endSession(
            app: try scope.resolvedApp(), userId: try userId(context), sessionId: try context.pathParameter("sessionId", naming: "session"),
            actor: principal.auditName)
        return Response(status: .noContent)
    }

    @Sendable func endAllSessions(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let ended = try await services.users.endAllSessions(app: try scope.resolvedApp(), userId: try userId(context), actor: principal.auditName)
        return JSONBody.response(["revokedSessions": .int(ended)])
    }
}

/// `/admin/v1/apps/{appId}/users/{userId}/identities…` and `…/upgrade`.
struct IdentityRoutes {
    let services: CosyncServices

    func register(on app: RouterGroup<AdminAppContext>) {
        app.get("users/:userId/identities", use: list)
        app.post("users/:userId/identities", use: link)
        app.delete("users/:userId/identities/:identityId", use: detach)
        app.post("users/:userId/upgrade", use: upgrade)
        app.get("users/:userId/passkeys", use: passkeys)
        app.delete("users/:userId/passkeys/:passkeyId", use: removePasskey)
        app.post("users/:userId/passkey-reset", use: resetPasskeys)
    }

    @Sendable func resetPasskeys(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let (expires, removed) = try await AppKeyFlows(flows: services.flows).resetPasskeys(
            app: try scope.resolvedApp(), userId: try context.pathParameter("userId", naming: "user"), actor: principal.auditName)
        return JSONBody.response(["resetExpiresAt": .string(ISO8601.milliseconds(expires)), "passkeysRemoved": .int(removed)])
    }

    @Sendable func passkeys(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let passkeys = try await services.users.passkeys(app: try scope.resolvedApp(), userId: try context.pathParameter("userId", naming: "user"))
        return JSONBody.response(["passkeys": .array(passkeys.map { .object($0.adminJSON()) })])
    }

    @Sendable func removePasskey(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        try await services.users.removePasskey(
            app: try scope.resolvedApp(), userId: try context.pathParameter("userId", naming: "user"),
            passkeyId: try context.pathParameter("passkeyId", naming: "passkey"), actor: principal.auditName)
        return Response(status: .noContent)
    }

    @Sendable func list(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let identities = try await services.users.identities(app: try scope.resolvedApp(), userId: try context.pathParameter("userId", naming: "user"))
        return JSONBody.response(["identities": .array(identities.map { .object($0.json()) })])
    }

    @Sendable func link(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        let userId = try context.pathParameter("userId", naming: "user")
        let identity = try await StateRule.applying(StateRule.provider) {
            try await services.users.linkIdentity(app: try scope.resolvedApp(), userId: userId, input: input, actor: principal.auditName)
        }
        return JSONBody.response(identity.json(), status: .created)
    }

    @Sendable func detach(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let flag = try AdminQuery(request: request).string("deleteAccount")
        guard flag == nil || flag == "true" || flag == "false" else {
            throw AdminError(status: .badRequest, code: "invalid_parameter", message: "deleteAccount must be true or false", field: "deleteAccount")
        }
        _ = try await services.users.detachIdentity(
            app: try scope.resolvedApp(), userId: try context.pathParameter("userId", naming: "user"), identityId: try context.pathParameter("identityId", naming: "identity"),
            deleteAccount: flag == "true", actor: principal.auditName)
        return Response(status: .noContent)
    }

    @Sendable func upgrade(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        let userId = try context.pathParameter("userId", naming: "user")
        let user = try await StateRule.applying(StateRule.provider) {
            try await services.users.upgrade(app: try scope.resolvedApp(), userId: userId, input: input, actor: principal.auditName)
        }
        return JSONBody.response(user.json())
    }
}
