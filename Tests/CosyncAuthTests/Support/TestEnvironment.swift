import CosyncAuth
import CosyncAuthHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PostgresNIO
import Testing

/// One PostgreSQL client and one set of services for the whole test run, against the throwaway
/// database that Tests/test.sh starts (DATABASE_URL). Tests isolate themselves by creating their
/// own apps; nothing is mocked.
enum TestEnvironment {
    static let operatorToken = "cop_test_" + Secrets.hexIdentifier()
    static let masterKey = SecretBox.generateMasterKey()

    /// The fake SendGrid every e-mail of the test run goes to.
    static let sendGrid = Task<FakeSendGrid, any Error> { try await FakeSendGrid.start() }
    static let sendGridKey = "SG.test-" + Secrets.hexIdentifier()
    /// The fake Twilio every SMS goes to, and the fake Apple/Google key endpoints.
    static let twilio = Task<FakeTwilio, any Error> { try await FakeTwilio.start() }
    static let identityProviders = Task<FakeIdentityProviders, any Error> { try await FakeIdentityProviders.start() }

    static let shared = Task<CosyncServices, any Error> {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw ConfigurationError("DATABASE_URL", "is not set: run the tests with Tests/test.sh")
        }
        var logger = Logger(label: "tests")
        logger.logLevel = .warning
        let base = ServerConfiguration(
            database: try DatabaseURL(url), operatorToken: operatorToken, secretBox: try SecretBox(masterKey: masterKey),
            publicURL: "http://localhost:8080", bcryptCost: 10, databaseMaxConnections: 30)
        var settings = base
        let fake = try await sendGrid.value
        let sms = try await twilio.value
        let idp = try await identityProviders.value
        try settings.readDeliverySettings([
            "COSYNC_EMAIL_TRANSPORT": "sendgrid", "COSYNC_SENDGRID_BASE_URL": "http://127.0.0.1:\(await fake.port)",
            "COSYNC_SENDGRID_API_KEY": sendGridKey, "COSYNC_EMAIL_FROM": "auth@cosync.test",
            "COSYNC_SMS_TRANSPORT": "twilio", "COSYNC_TWILIO_BASE_URL": "http://127.0.0.1:\(await sms.port)",
            "COSYNC_APPLE_JWKS_URL": await idp.appleURL, "COSYNC_GOOGLE_JWKS_URL": await idp.googleURL,
            "COSYNC_JWKS_MIN_REFETCH_SECONDS": "0",
            // Tests play several clients from 127.0.0.1 through X-Forwarded-For.
            "COSYNC_TRUSTED_PROXIES": "127.0.0.0/8",
            // Webhooks go to receivers on 127.0.0.1 over http, with short waits (WebhookTests).
            "COSYNC_WEBHOOK_ALLOW_HTTP": "1", "COSYNC_WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8",
            "COSYNC_WEBHOOK_RETRY_SECONDS": WebhookTests.retrySchedule, "COSYNC_WEBHOOK_DISABLE_AFTER": "\(WebhookTests.disableAfter)",
            // The whole suite runs at once on 2 cores (the WebAuthn fuzz suite included): creating an app
            // (an RSA key on the shared thread pool) can wait longer than the production 15 s.
            "COSYNC_REQUEST_TIMEOUT_SECONDS": "90",
        ])
        // The suite floods bcrypt on purpose (40 logins at once, on a loaded 2-core machine): a long bound
        // keeps those tests about what they test. KDFSchedulerTests checks the 503 with a short one.
        settings.kdfMaxWait = .seconds(60)
        let configuration = settings
        let client = PostgresClient(configuration: configuration.database.clientConfiguration(maxConnections: 30), backgroundLogger: logger)
        Task.detached { await client.run() }
        let (services, _) = try await CosyncServices.prepare(
            configuration: configuration, client: client, migrator: try migrator(), logger: logger)
        // One delivery worker for the whole run, polling often, with 4 lanes (as `run()` has): one slow
        // provider call holds one lane, not the outbox.
        let worker = services.deliveryWorker(pollInterval: .milliseconds(30))
        for _ in 0..<4 {
            Task.detached {
                while true {
                    if (try? await worker.deliverDue()) ?? 0 == 0 { try? await Task.sleep(for: .milliseconds(30)) }
                }
            }
        }
        // The app cache is on for the whole suite, as in a server: every test also checks that a change
        // is seen at once by the next request (AppCacheTests checks the other nodes).
        if ProcessInfo.processInfo.environment["COSYNC_TEST_NO_APP_CACHE"] == nil {
            let listener = services.appCacheListener()
            Task.detached { try? await listener.run() }
            for _ in 0..<500 where !services.apps.cache.isLive { try await Task.sleep(for: .milliseconds(10)) }
        }
        let webhooks = services.webhookWorker(pollInterval: .milliseconds(30))
        for _ in 0..<4 {
            Task.detached {
                while true {
                    if (try? await webhooks.deliverDue()) ?? 0 == 0 { try? await Task.sleep(for: .milliseconds(30)) }
                }
            }
        }
        return services
    }

    /// Runs `body` against the whole server (path normalizer included) on a live port, with real HTTP.
    static func withLiveServer(_ body: @Sendable (API) async throws -> Void) async throws {
        let services = try await services()
        let app = Application(router: buildResponder(services: services), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            try await body(API(client: client))
        }
    }

    static func services() async throws -> CosyncServices { try await shared.value }

    static func migrator() throws -> Migrator {
        if let dir = ProcessInfo.processInfo.environment["COSYNC_SQL_DIR"], !dir.isEmpty {
            return try Migrator(directory: URL(fileURLWithPath: dir))
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return try Migrator(directory: root.appendingPathComponent("sql"))
    }

    /// Runs `body` against the in-process router.
    static func withAPI(_ body: @Sendable (API) async throws -> Void) async throws {
        let services = try await services()
        let app = Application(router: buildRouter(services: services))
        try await app.test(.router) { client in
            try await body(API(client: client))
        }
    }
}

extension TestEnvironment {
    /// Runs a statement on the test database (set-up with bound parameters).
    static func sql(_ query: PostgresQuery) async throws {
        let services = try await services()
        try await services.client.query(query, logger: services.logger)
    }

    /// Starts a transaction that runs `first`, holds what it locked for `hold`, then runs `then` and
    /// commits; waits 200 ms so that it holds its locks before the caller's racing request starts.
    /// Await the task's value: it throws if PostgreSQL aborted it (a deadlock, 40P01).
    static func holding(_ first: PostgresQuery, for hold: Duration, then rest: [PostgresQuery] = []) async throws -> Task<Void, any Error> {
        let services = try await services()
        let task = Task {
            try await services.client.withTransaction(logger: services.logger) { tx in
                try await tx.query(first, logger: services.logger)
                try await Task.sleep(for: hold)
                for query in rest { try await tx.query(query, logger: services.logger) }
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        return task
    }

    /// An account deletion as PostgreSQL runs it, held open between its two halves: the user row
    /// first, then (after `hold`) the delete whose cascade reaches the rows hanging off the user.
    static func deletingUser(_ userId: UUID, holding hold: Duration) async throws -> Task<Void, any Error> {
        try await holding("SELECT 1 FROM users WHERE id = \(userId) FOR UPDATE", for: hold, then: ["DELETE FROM users WHERE id = \(userId)"])
    }

    /// The first column of the first row of `query`, on `client` (default: the test database), or nil.
    static func value<T: PostgresDecodable & Sendable>(_ query: PostgresQuery, as type: T.Type, on client: PostgresClient? = nil) async throws -> T? {
        let services = try await services()
        for try await value in try await (client ?? services.client).query(query, logger: services.logger).decode(T.self) { return value }
        return nil
    }
}

/// A small JSON client over HummingbirdTesting.
struct API: Sendable {
    let client: any TestClientProtocol

    struct Reply: Sendable {
        let status: HTTPResponse.Status
        let headers: HTTPFields
        let text: String
        var json: JSONValue { (try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) ?? .null }
        var object: [String: JSONValue] { json.objectValue ?? [:] }
        var errorCode: String? { json["error"]?["code"]?.stringValue }
        var errorField: String? { json["error"]?["field"]?.stringValue }
    }

    func call(
        _ method: HTTPRequest.Method, _ path: String, token: String? = TestEnvironment.operatorToken, body: String? = nil,
        headers extra: HTTPFields = [:], contentType: String? = "application/json"
    ) async throws -> Reply {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        if body != nil, let contentType { headers[.contentType] = contentType }
        return try await client.execute(
            uri: path, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }
        ) { response in
            Reply(status: response.status, headers: response.headers, text: String(buffer: response.body))
        }
    }

    func call(_ method: HTTPRequest.Method, _ path: String, token: String? = TestEnvironment.operatorToken, json: JSONValue) async throws -> Reply {
        try await call(method, path, token: token, body: String(decoding: try JSONCoding.encode(json), as: UTF8.self))
    }

    /// Creates an app and returns the creation reply's object (with appSecret).
    func createApp(_ name: String = "Test App", settings: [String: JSONValue] = [:]) async throws -> [String: JSONValue] {
        var input = settings
        input["name"] = .string(name)
        let reply = try await call(.post, "/admin/v1/apps", json: .object(input))
        try #require(reply.status == .created, "create app: \(reply.status) \(reply.text)")
        return reply.object
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    func string(_ key: String) -> String { self[key]?.stringValue ?? "" }
}
