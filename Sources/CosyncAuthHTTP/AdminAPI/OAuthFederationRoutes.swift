import CosyncAuth
import Hummingbird

/// `/admin/v1/apps/{appId}/oauth/assertion-keys…` (the app backend's keys for the JWT-bearer grant) and
/// `/admin/v1/apps/{appId}/oauth/upstream-providers…` (OpenID providers users sign in through)
/// (<doc:OAuth> §8).
struct OAuthFederationRoutes {
    let services: CosyncServices

    func register(on app: RouterGroup<AdminAppContext>) {
        app.get("oauth/assertion-keys", use: listKeys)
        app.post("oauth/assertion-keys", use: createKey)
        app.delete("oauth/assertion-keys/:keyId", use: deleteKey)
        app.get("oauth/upstream-providers", use: listProviders)
        app.post("oauth/upstream-providers", use: createProvider)
        app.get("oauth/upstream-providers/:providerId", use: showProvider)
        app.patch("oauth/upstream-providers/:providerId", use: updateProvider)
        app.delete("oauth/upstream-providers/:providerId", use: deleteProvider)
    }

    @Sendable func listKeys(_ request: Request, context: AdminAppContext) async throws -> Response {
        let keys = try await services.oauth.assertionKeys.list(app: try context.scope.resolvedApp())
        return JSONBody.response(["keys": .array(keys.map { .object($0.json()) })])
    }

    @Sendable func createKey(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let input = try await JSONBody.object(request, context: context)
        let key = try await services.oauth.assertionKeys.create(app: try scope.resolvedApp(), input: input, actor: scope.principal.auditName)
        return JSONBody.response(key.json(), status: .created)
    }

    @Sendable func deleteKey(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        try await services.oauth.assertionKeys.delete(
            app: try scope.resolvedApp(), id: context.parameters.get("keyId") ?? "", actor: scope.principal.auditName)
        return Response(status: .noContent)
    }

    // MARK: upstream providers

    var providers: UpstreamProviderAdministration { services.oauth.upstreamProviders }

    func providerId(_ context: AdminAppContext) -> String { context.parameters.get("providerId") ?? "" }

    func view(_ provider: UpstreamProvider, app: App) -> [String: JSONValue] {
        provider.json(
            redirectURI: services.oauth.upstreamRedirectURI(appId: app.appId),
            startURL: services.oauth.upstreamStartURL(appId: app.appId, provider: provider.id))
    }

    @Sendable func listProviders(_ request: Request, context: AdminAppContext) async throws -> Response {
        let app = try context.scope.resolvedApp()
        let all = try await providers.list(app: app)
        return JSONBody.response(["providers": .array(all.map { .object(view($0, app: app)) })])
    }

    @Sendable func createProvider(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let input = try await JSONBody.object(request, context: context)
        let app = try scope.resolvedApp()
        let provider = try await providers.create(app: app, input: input, actor: scope.principal.auditName)
        return JSONBody.response(view(provider, app: app), status: .created)
    }

    @Sendable func showProvider(_ request: Request, context: AdminAppContext) async throws -> Response {
        let app = try context.scope.resolvedApp()
        return JSONBody.response(view(try await providers.get(app: app, id: providerId(context)), app: app))
    }

    @Sendable func updateProvider(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let patch = try await JSONBody.object(request, context: context)
        let app = try scope.resolvedApp()
        let provider = try await providers.update(app: app, id: providerId(context), patch: patch, actor: scope.principal.auditName)
        return JSONBody.response(view(provider, app: app))
    }

    @Sendable func deleteProvider(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        try await providers.delete(app: try scope.resolvedApp(), id: providerId(context), actor: scope.principal.auditName)
        return Response(status: .noContent)
    }
}
