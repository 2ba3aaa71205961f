import CosyncAuth
import Hummingbird

/// `/admin/v1/apps/{appId}/oauth/clients…`: the app's OAuth clients (<doc:OAuth> §2). A client
/// secret is in the answer of a creation, a rotation, or a change that gave the client one: only there.
struct OAuthClientRoutes {
    let services: CosyncServices
    var clients: OAuthClientAdministration { services.oauthClients }

    func register(on app: RouterGroup<AdminAppContext>) {
        app.get("oauth/clients", use: list)
        app.post("oauth/clients", use: create)
        app.get("oauth/clients/:clientId", use: show)
        app.patch("oauth/clients/:clientId", use: update)
        app.delete("oauth/clients/:clientId", use: delete)
        app.post("oauth/clients/:clientId/secret/rotate", use: rotateSecret)
    }

    func clientId(_ context: AdminAppContext) -> String { context.parameters.get("clientId") ?? "" }

    /// The client, plus `clientSecret` when one was just made.
    static func body(_ written: OAuthClientAdministration.Written) -> [String: JSONValue] {
        var body = written.client.json()
        if let secret = written.secret { body["clientSecret"] = .string(secret) }
        return body
    }

    @Sendable func list(_ request: Request, context: AdminAppContext) async throws -> Response {
        let all = try await clients.list(app: try context.scope.resolvedApp())
        return JSONBody.response(["clients": .array(all.map { .object($0.json()) })])
    }

    @Sendable func create(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let input = try await JSONBody.object(request, context: context)
        let written = try await clients.create(app: try scope.resolvedApp(), input: input, actor: scope.principal.auditName)
        return JSONBody.response(
            Self.body(written), status: .created,
            headers: [.location: "/admin/v1/apps/\(scope.appId)/oauth/clients/\(written.client.clientId)"])
    }

    @Sendable func show(_ request: Request, context: AdminAppContext) async throws -> Response {
        JSONBody.response(try await clients.get(app: try context.scope.resolvedApp(), clientId: clientId(context)).json())
    }

    /// A change that conflicts with the stored client (its kind, its method, its grants or its redirect
    /// URIs) is a 409 naming the field; a change that is wrong by itself stays a 422.
    static let storedRules: [StateRule] = ["tokenEndpointAuthMethod", "grantTypes", "redirectUris", "jwks", "jwksUri"].map {
        StateRule($0, ["public_client", "confidential_client", "redirect_uris_required", "keys_required", "keys_not_allowed"])
    }

    @Sendable func update(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let patch = try await JSONBody.object(request, context: context)
        let written = try await StateRule.applying(Self.storedRules) {
            try await clients.update(app: try scope.resolvedApp(), clientId: clientId(context), patch: patch, actor: scope.principal.auditName)
        }
        return JSONBody.response(Self.body(written))
    }

    @Sendable func delete(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        try await clients.delete(app: try scope.resolvedApp(), clientId: clientId(context), actor: scope.principal.auditName)
        return Response(status: .noContent)
    }

    @Sendable func rotateSecret(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let written = try await clients.rotateSecret(app: try scope.resolvedApp(), clientId: clientId(context), actor: scope.principal.auditName)
        return JSONBody.response(Self.body(written))
    }
}

extension OAuthClient {
    /// The admin API's shape of a client (never its secret or the secret's hash).
    func json() -> [String: JSONValue] {
        [
            "clientId": .string(clientId), "name": .string(name), "kind": .string(kind.rawValue),
            "tokenEndpointAuthMethod": .string(authMethod.rawValue),
            "redirectUris": .array(redirectURIs.map { .string($0) }),
            "postLogoutRedirectUris": .array(postLogoutRedirectURIs.map { .string($0) }),
            "grantTypes": .array(grantTypes.map { .string($0.rawValue) }), "scopes": .array(scopes.map { .string($0) }),
            "accessTokenSeconds": .int(accessTokenSeconds), "refreshSlidingSeconds": .int(refreshSlidingSeconds),
            "refreshAbsoluteSeconds": .int(refreshAbsoluteSeconds), "refreshGraceSeconds": .int(refreshGraceSeconds),
            "dpopRequired": .bool(dpopRequired), "jwks": jwks ?? .null, "jwksUri": jwksURI.map { .string($0) } ?? .null,
            "createdAt": .string(ISO8601.milliseconds(createdAt)), "updatedAt": .string(ISO8601.milliseconds(updatedAt)),
        ]
    }
}
