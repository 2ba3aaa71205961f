import AsyncHTTPClient
import Foundation
import Logging
import PostgresNIO

/// Admin operations on an app's upstream OpenID providers: create (the discovery document is fetched
/// and checked), list, read, change, delete. The client secret is sealed before it is stored and is
/// never answered.
public struct UpstreamProviderAdministration: Sendable {
    let client: PostgresClient
    let box: SecretBox
    let http: HTTPClient
    /// The operator's rule for outgoing calls (`GuardedFetch`).
    let outbound: WebhookURLGuard
    let logger: Logger

    /// An app may configure this many providers.
    public static let maxProvidersPerApp = 20
    static let maxScopes = 20
    static let maxAudiences = 20

    func invalid(_ field: String, _ code: String, _ message: String) -> AdminFailure { .invalid(FieldError(field, code, message)) }

    func providerId(_ text: String) throws -> UUID {
        guard let id = UUID(uuidString: text) else { throw AdminFailure.notFound("upstream provider") }
        return id
    }

    // MARK: fields

    func name(_ value: JSONValue?) throws -> String {
        guard let text = value?.stringValue, SignedJWT.isPlainText(text, max: 100), !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw invalid("name", "required", "is required: 1-100 characters without control characters")
        }
        return text
    }

    func clientId(_ value: JSONValue?) throws -> String {
        guard let text = value?.stringValue, SignedJWT.isPlainText(text, max: 256) else {
            throw invalid("clientId", "required", "is required: the app's client id at the provider, 1-256 characters")
        }
        return text
    }

    /// A secret, or nil (`null` or absent: a public client at the provider).
    func secret(_ value: JSONValue?) throws -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)? where !text.isEmpty && text.utf8.count <= 1024 && !text.unicodeScalars.contains("\u{0}"): return text
        default: throw invalid("clientSecret", "invalid_value", "must be a string of 1-1024 bytes, or null")
        }
    }

    /// Scope values (RFC 6749 §3.3): printable ASCII without spaces, quotes or backslashes; `openid`
    /// is always among them.
    func scopes(_ value: JSONValue?) throws -> [String] {
        guard let value else { return ["openid", "email", "profile"] }
        guard let items = value.arrayValue, items.count <= Self.maxScopes else {
            throw invalid("scopes", "invalid_value", "must be an array of at most \(Self.maxScopes) scopes")
        }
        var scopes: [String] = []
        for item in items {
            guard let text = item.stringValue, !text.isEmpty, text.utf8.count <= 128,
                  text.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x5b).contains($0) || (0x5d...0x7e).contains($0) })
            else { throw invalid("scopes", "invalid_value", "each scope is 1-128 printable ASCII characters without spaces, quotes or backslashes") }
            if !scopes.contains(text) { scopes.append(text) }
        }
        guard scopes.contains("openid") else { throw invalid("scopes", "invalid_value", "must include openid") }
        return scopes
    }

    func audiences(_ value: JSONValue?) throws -> [String] {
        guard let value else { return [] }
        guard let items = value.arrayValue, items.count <= Self.maxAudiences else {
            throw invalid("audiences", "invalid_value", "must be an array of at most \(Self.maxAudiences) client ids")
        }
        var audiences: [String] = []
        for item in items {
            guard let text = item.stringValue, SignedJWT.isPlainText(text, max: 256) else {
                throw invalid("audiences", "invalid_value", "each is a client id of 1-256 characters")
            }
            if !audiences.contains(text) { audiences.append(text) }
        }
        return audiences
    }

    func enabled(_ value: JSONValue?) throws -> Bool {
        guard let value else { return true }
        guard let flag = value.boolValue else { throw invalid("enabled", "invalid_value", "must be true or false") }
        return flag
    }

    func discovery(_ value: JSONValue?) async throws -> (url: String, document: UpstreamDiscovery) {
        guard let given = value?.stringValue else {
            throw invalid("discoveryUrl", "required", "is required: the provider's issuer or its /.well-known/openid-configuration URL")
        }
        if let refusal = FetchableURL.refusal(given) { throw invalid("discoveryUrl", "invalid_url", refusal) }
        let url = UpstreamDiscovery.documentURL(given)
        if let refusal = FetchableURL.refusal(url) { throw invalid("discoveryUrl", "invalid_url", refusal) }
        do {
            return (url, try await UpstreamDiscovery.fetch(url, http: http, outbound: outbound))
        } catch {
            throw invalid("discoveryUrl", "discovery_failed", error.reason)
        }
    }

    func authMethod(_ document: UpstreamDiscovery, hasSecret: Bool) throws -> UpstreamProvider.TokenAuthMethod {
        guard let method = document.tokenAuthMethod(hasSecret: hasSecret) else {
            throw invalid("clientSecret", "unsupported", "the provider accepts neither client_secret_basic nor client_secret_post")
        }
        return method
    }

    func audit(_ db: PostgresConnection, app: App, actor: String, action: String, _ provider: UpstreamProvider) async throws {
        try await AuditLog.record(
            db, appRef: app.ref, appId: app.appId, actor: actor, action: action,
            detail: ["providerId": .string(provider.id.uuidString.lowercased()), "issuer": .string(provider.issuer)], logger: logger)
    }

    /// A unique-index clash: the app already has a provider of this issuer.
    static func issuerTaken(_ error: PSQLError) -> AdminFailure? {
        guard error.uniqueViolationConstraint != nil else { return nil }
        return .conflict(code: "issuer_taken", message: "the app already has a provider with this issuer")
    }

    // MARK: operations

    /// `{name, discoveryUrl, clientId, clientSecret?, scopes?, audiences?, enabled?}`.
    public func create(app: App, input: [String: JSONValue], actor: String) async throws -> UpstreamProvider {
        let allowed: Set<String> = ["name", "discoveryUrl", "clientId", "clientSecret", "scopes", "audiences", "enabled"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw invalid(unknown, "unknown_field", "is not a field of an upstream provider")
        }
        let name = try name(input["name"])
        let clientId = try clientId(input["clientId"])
        let secret = try secret(input["clientSecret"])
        let scopes = try scopes(input["scopes"])
        let audiences = try audiences(input["audiences"])
        let enabled = try enabled(input["enabled"])
        let (url, document) = try await discovery(input["discoveryUrl"])
        let method = try authMethod(document, hasSecret: secret != nil)
        let id = UUID()
        let sealed = try secret.map { try box.seal($0, purpose: .upstreamClientSecret(id)) }
        let now = Date()
        let provider = UpstreamProvider(
            id: id, appRef: app.ref, name: name, discoveryURL: url, issuer: document.issuer, authorizationEndpoint: document.authorizationEndpoint,
            tokenEndpoint: document.tokenEndpoint, jwksURI: document.jwksURI, tokenAuthMethod: method, clientId: clientId, clientSecretSealed: sealed,
            scopes: scopes, audiences: audiences, enabled: enabled, createdAt: now, updatedAt: now)
        do {
            return try await client.transaction(logger: logger) { db in
                guard try await AppStore.lockForChange(db, ref: app.ref, logger: logger) else { throw AdminFailure.notFound("app") }
                guard try await OAuthUpstreamProviderStore.count(db, appRef: app.ref, logger: logger) < Self.maxProvidersPerApp else {
                    throw AdminFailure.conflict(
                        code: "too_many_providers", message: "an app may configure at most \(Self.maxProvidersPerApp) upstream providers")
                }
                let stored = try await OAuthUpstreamProviderStore.insert(db, provider, logger: logger)
                try await audit(db, app: app, actor: actor, action: "oauth.upstreamProvider.create", stored)
                return stored
            }
        } catch let error as PSQLError {
            throw Self.issuerTaken(error) ?? error
        }
    }

    public func list(app: App) async throws -> [UpstreamProvider] {
        try await client.withConnection { try await OAuthUpstreamProviderStore.list($0, appRef: app.ref, logger: logger) }
    }

    public func get(app: App, id text: String) async throws -> UpstreamProvider {
        let id = try providerId(text)
        guard let provider = try await client.withConnection({ try await OAuthUpstreamProviderStore.find($0, appRef: app.ref, id: id, logger: logger) })
        else { throw AdminFailure.notFound("upstream provider") }
        return provider
    }

    /// PATCH: any of the create fields. A new `discoveryUrl` fetches the document again; `clientSecret:
    /// null` removes the secret (a public client there).
    public func update(app: App, id text: String, patch: [String: JSONValue], actor: String) async throws -> UpstreamProvider {
        let id = try providerId(text)
        let allowed: Set<String> = ["name", "discoveryUrl", "clientId", "clientSecret", "scopes", "audiences", "enabled"]
        if let unknown = patch.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw invalid(unknown, "unknown_field", "cannot be changed here")
        }
        let name = try patch["name"].map { try self.name($0) }
        let clientId = try patch["clientId"].map { try self.clientId($0) }
        let secretGiven = patch.keys.contains("clientSecret")
        let secret = try secret(patch["clientSecret"])
        let scopes = try patch["scopes"].map { try self.scopes($0) }
        let audiences = try patch["audiences"].map { try self.audiences($0) }
        let enabled = try patch["enabled"].map { try self.enabled($0) }
        let discovered = patch["discoveryUrl"] == nil ? nil : try await discovery(patch["discoveryUrl"])
        // The token endpoint's methods: from the new document, or fetched again when only the secret changes.
        var document = discovered?.document
        if document == nil, secretGiven, secret != nil {
            let current = try await get(app: app, id: text)
            document = try await discovery(.string(current.discoveryURL)).document
        }
        let sealed = try secret.map { try box.seal($0, purpose: .upstreamClientSecret(id)) }
        do {
            return try await client.transaction(logger: logger) { db in
                guard var provider = try await OAuthUpstreamProviderStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger) else {
                    throw AdminFailure.notFound("upstream provider")
                }
                if let name { provider.name = name }
                if let clientId { provider.clientId = clientId }
                if let scopes { provider.scopes = scopes }
                if let audiences { provider.audiences = audiences }
                if let enabled { provider.enabled = enabled }
                if let discovered {
                    provider.discoveryURL = discovered.url
                    provider.issuer = discovered.document.issuer
                    provider.authorizationEndpoint = discovered.document.authorizationEndpoint
                    provider.tokenEndpoint = discovered.document.tokenEndpoint
                    provider.jwksURI = discovered.document.jwksURI
                }
                if secretGiven { provider.clientSecretSealed = sealed }
                if let document {
                    provider.tokenAuthMethod = try authMethod(document, hasSecret: provider.clientSecretSealed != nil)
                } else if provider.clientSecretSealed == nil {
                    provider.tokenAuthMethod = .none
                }
                let stored = try await OAuthUpstreamProviderStore.update(db, provider, logger: logger)
                try await audit(db, app: app, actor: actor, action: "oauth.upstreamProvider.update", stored)
                return stored
            }
        } catch let error as PSQLError {
            throw Self.issuerTaken(error) ?? error
        }
    }

    public func delete(app: App, id text: String, actor: String) async throws {
        let id = try providerId(text)
        try await client.transaction(logger: logger) { db in
            guard let provider = try await OAuthUpstreamProviderStore.find(db, appRef: app.ref, id: id, forUpdate: true, logger: logger),
                  try await OAuthUpstreamProviderStore.delete(db, appRef: app.ref, id: id, logger: logger)
            else { throw AdminFailure.notFound("upstream provider") }
            try await audit(db, app: app, actor: actor, action: "oauth.upstreamProvider.delete", provider)
        }
    }
}

extension OAuthServices {
    /// The app's upstream OpenID providers, for the admin API.
    public var upstreamProviders: UpstreamProviderAdministration {
        UpstreamProviderAdministration(client: client, box: box, http: .shared, outbound: remoteKeys.outbound, logger: logger)
    }

    /// Where an upstream provider sends the browser back: one URL per app, registered at the provider.
    public func upstreamRedirectURI(appId: String) -> String { endpoint(appId: appId, "/oauth/upstream/callback") }

    /// Where the hosted page's button starts a sign-in through `provider` (with `?r=` the waiting request).
    public func upstreamStartURL(appId: String, provider: UUID) -> String {
        endpoint(appId: appId, "/oauth/upstream/\(provider.uuidString.lowercased())/start")
    }
}
