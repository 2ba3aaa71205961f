import Foundation
import Logging
import PostgresNIO

/// Everything a running server (or a CLI command) needs, built once from the configuration and a
/// running PostgresClient. No globals: the HTTP layer receives this value.
public struct CosyncServices: Sendable {
    public let client: PostgresClient
    public let configuration: ServerConfiguration
    public let migrator: Migrator
    public let serverKeys: ServerKeyRing
    public let operatorToken: OperatorToken
    public let apps: AppAdministration
    public let users: UserAdministration
    public let records: AppRecords
    public let flows: EndUserFlows
    /// Resolves end-user credentials (app-token, access-token) before a flow runs.
    public let resolver: TenantResolver
    public let logger: Logger
    /// Draining and database reachability, for `/readyz` and the availability gate.
    public let state: ServerState
    /// The OAuth 2.1 / OpenID Connect side (<doc:OAuth>).
    public let oauth: OAuthServices
    /// The Portal's accounts, sessions and roles (issue 23).
    public let portal: PortalAccounts

    /// Applies migrations, loads (or creates) the server key and resolves the operator token. The
    /// client must already be running. `generatedOperatorToken` is set when this start created one.
    public static func prepare(
        configuration: ServerConfiguration, client: PostgresClient, migrator: Migrator, logger: Logger
    ) async throws -> (CosyncServices, generatedOperatorToken: String?) {
        try await migrator.migrate(client, logger: logger)
        let serverKeys = try await ServerKeyRing.load(client: client, box: configuration.secretBox, logger: logger)
        let (operatorToken, generated) = try await OperatorToken.resolve(
            configured: configuration.operatorToken, client: client, logger: logger)
        let cache = AppCache(ttl: configuration.appCacheTTL)
        let apps = AppAdministration(client: client, box: configuration.secretBox, serverKeys: serverKeys, logger: logger, cache: cache)
        let hasher = PasswordHasher(cost: configuration.bcryptCost, maxWait: configuration.kdfMaxWait, niceness: configuration.bcryptNice)
        let tokens = TokenIssuer(
            client: client, box: configuration.secretBox, serverKeys: serverKeys,
            accessTokenLifetime: configuration.accessTokenLifetime, logger: logger, cache: cache)
        let outbox = Outbox(defaultSender: configuration.emailFrom, publicURL: configuration.publicURL)
        let flows = EndUserFlows(
            client: client, apps: apps, tokens: tokens, hasher: hasher,
            outbox: outbox,
            social: SocialTokenVerifier(providers: configuration.social, logger: logger),
            settings: configuration.flows, logger: logger)
        let services = CosyncServices(
            client: client, configuration: configuration, migrator: migrator, serverKeys: serverKeys,
            operatorToken: operatorToken, apps: apps, users: UserAdministration(apps: apps, hasher: hasher, social: flows.social),
            records: AppRecords(apps: apps), flows: flows,
            resolver: TenantResolver(client: client, apps: apps, tokens: tokens, logger: logger), logger: logger, state: ServerState(),
            oauth: OAuthServices(
                client: client, apps: apps, tokens: tokens, flows: flows, box: configuration.secretBox, publicURL: configuration.publicURL,
                outbound: configuration.webhooks.guardRule, logger: logger),
            portal: PortalAccounts(
                client: client, box: configuration.secretBox, hasher: hasher, apps: apps, outbox: outbox, logger: logger,
                limits: configuration.flows.passwordLimits))
        return (services, generated)
    }

    /// The outbox delivery worker for this configuration.
    public func deliveryWorker(pollInterval: Duration? = nil) -> DeliveryWorker {
        let log = LogTransport(logger: logger)
        let email: any EmailTransport = configuration.emailTransport == "sendgrid"
            ? SendGridTransport(baseURL: configuration.sendGridBaseURL, apiKey: configuration.sendGridAPIKey) : log
        let sms: any SMSTransport = configuration.smsTransport == "twilio" ? TwilioTransport(baseURL: configuration.twilioBaseURL) : log
        var worker = DeliveryWorker(
            client: client, box: configuration.secretBox, email: email, sms: sms, logger: logger,
            operatorFrom: configuration.emailFrom, pollInterval: pollInterval ?? configuration.courierPollInterval)
        worker.wake = state.outboxWork
        worker.idlePoll = configuration.workerIdlePoll
        return worker
    }

    /// The same services with a state of their own (a second "node" in one process, for tests), and
    /// another configuration when given.
    public func withOwnState(configuration: ServerConfiguration? = nil) -> CosyncServices {
        CosyncServices(
            client: client, configuration: configuration ?? self.configuration, migrator: migrator, serverKeys: serverKeys,
            operatorToken: operatorToken, apps: apps, users: users, records: records, flows: flows, resolver: resolver, logger: logger,
            state: ServerState(), oauth: oauth, portal: portal)
    }

    /// Keeps RSA key pairs generated ahead for new apps (`COSYNC_KEY_POOL_SIZE`).
    public func keyPoolFiller() -> KeyPoolFiller {
        KeyPoolFiller(
            client: client, box: configuration.secretBox, size: configuration.keyPoolSize, logger: logger, taken: apps.keyPoolTaken)
    }

    /// The listener that keeps this node's app cache in step with every node's changes (without it
    /// running, the cache serves nothing).
    public func appCacheListener() -> AppCacheListener {
        AppCacheListener(cache: apps.cache, client: client, logger: logger, state: state)
    }

    /// The same services with another AppKey path prefix (tests mount it without a new environment).
    public func with(appKeyPrefix: String?) -> CosyncServices {
        var configuration = self.configuration
        configuration.appKeyPrefix = appKeyPrefix
        return withOwnState(configuration: configuration)
    }

    /// The probe that watches PostgreSQL for this node (and samples the pool and outbox metrics).
    public func databaseMonitor() -> DatabaseMonitor {
        DatabaseMonitor(database: configuration.database, client: client, state: state, logger: logger)
    }

    /// What `/readyz` answers: draining first, then the monitor's view of the database, then whether
    /// every migration this binary knows is applied.
    public func readiness() async -> ServerState.Readiness {
        if state.isDraining { return .draining }
        if !state.isDatabaseUp { return .databaseUnavailable }
        do {
            let version = try await withDeadline(.seconds(1)) { [migrator, client, logger] in
                try await migrator.appliedVersion(client, logger: logger)
            }
            // A newer release may already have migrated further (a rolling upgrade): this node keeps
            // serving; only a database behind the binary is not ready.
            return (version ?? 0) >= migrator.latestVersion ? .ready : .migrationsPending
        } catch {
            return .databaseUnavailable
        }
    }
}
