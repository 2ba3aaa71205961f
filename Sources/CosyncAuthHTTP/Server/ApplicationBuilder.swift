import CosyncAuth
import CosyncPortal
import Hummingbird
import Logging

/// Builds the HTTP application from its services. No globals: everything a route needs arrives here.
/// The public router does not serve `/metrics`: the metrics have a listener of their own
/// (`buildMetricsApplication`).
public func buildRouter(services: CosyncServices) -> Router<ServerRequestContext> {
    let router = Router(context: ServerRequestContext.self)
    let configuration = services.configuration
    // Without a tracer (no OTLP endpoint configured) the span middleware is left out: it built span
    // attributes for every request that nothing read (about 7 % of a cheap request's CPU, issue 24).
    if configuration.tracing {
        // Query strings carry codes and tokens (the e-mailed completeSignup link, getApplication?appToken=,
        // OAuth's login page reference, pushed request_uri, login_hint and id_token_hint): spans record
        // their keys only.
        router.add(middleware: TracingMiddleware(redactingQueryParameters: [
            "code", "appToken", "app-token", "handle", "token", "accessToken", "access-token", "password", "userName", "cursor",
            "r", "request_uri", "login_hint", "id_token_hint",
        ]))
    }
    router.add(middleware: MetricsMiddleware())
    if configuration.accessLog != .off {
        router.add(middleware: AccessLogMiddleware(everyRequest: configuration.accessLog == .all))
    }
    router.add(middleware: AvailabilityMiddleware(state: services.state))
    // Before any route is added: router middleware wraps only the routes registered after it.
    router.add(middleware: MethodNotAllowedMiddleware(operations: openAPIOperations()))
    OperationalRoutes(services: services).register(on: router)
    GetApplication(services: services).register(on: router)
    EndUserRoutes(services: services).register(on: router)
    AppKeyRoutes(services: services).register(on: router)
    OAuthRoutes(services: services).register(on: router)
    PortalRoutes<ServerRequestContext>(services: services).register(on: router)

    let admin = router.group("admin/v1").add(middleware: AdminErrorMiddleware())
        .add(middleware: FlowSpanMiddleware(prefix: "admin ", enabled: configuration.tracing))
    let document = OpenAPIDocument.document()
    admin.get("openapi.json") { _, _ in JSONBody.response(document) }
    // Every route under apps/{appId}: the authenticator puts the principal (and the app) into the
    // context before the handler runs, and its handlers take the typed AdminAppContext.
    let app = admin.group("apps/:appId").add(middleware: AppAuthenticator(services: services)).group(context: AdminAppContext.self)
    AppRoutes(services: services).register(on: admin, app: app)
    UserRoutes(services: services).register(on: app)
    IdentityRoutes(services: services).register(on: app)
    RecordRoutes(services: services).register(on: app)
    WebhookRoutes(services: services).register(on: app)
    OAuthFederationRoutes(services: services).register(on: app)
    OAuthClientRoutes(services: services).register(on: app)
    return router
}

/// The router behind the path normalizer: what the server runs.
public func buildResponder(services: CosyncServices) -> PathNormalizingBuilder {
    PathNormalizingBuilder(
        router: buildRouter(services: services), endUserNames: EndUserRoutes.names,
        timeout: services.configuration.requestTimeout, state: services.state, appKeyNames: AppKeyRoutes.names,
        resolver: AppProductResolver(apps: services.apps), appKeyPrefix: services.configuration.appKeyPrefix)
}

public func buildApplication(
    services: CosyncServices, logger: Logger, runDeliveryWorker: Bool = true
) -> some ApplicationProtocol {
    let configuration = services.configuration
    return Application(
        router: buildResponder(services: services),
        // A connection that sends nothing for 60 s (idle keep-alive, a half-sent request head, a CONNECT
        // "tunnel") is closed; without it such connections stayed open for ever (found by Tests/system/fuzz).
        server: .http1(configuration: .init(idleTimeout: .seconds(60))),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "CosyncAuth"),
        services: runDeliveryWorker
            ? [services.appCacheListener(), services.databaseMonitor(), services.deliveryWorker(), services.webhookWorker(),
               LimitHousekeeping(client: services.client, logger: services.logger), services.keyPoolFiller()]
            : [services.appCacheListener()],
        logger: logger)
}

/// For tests: the route table (method and path) as the router holds it.
public func routeTable(_ router: Router<ServerRequestContext>) -> [(method: String, path: String)] {
    router.routes.map { (method: $0.method.rawValue, path: $0.path.description) }
}

/// For tests: the OpenAPI document.
public func openAPIDocument() -> JSONValue { OpenAPIDocument.document() }

/// For tests: (method, path) of every operation the OpenAPI document declares.
public func openAPIOperations() -> [(method: String, path: String)] {
    OpenAPIDocument.operations.map { (method: $0.method.uppercased(), path: $0.path) }
}
