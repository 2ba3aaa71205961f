import Foundation
import Logging
import PostgresNIO

/// Admin operations on an app's OAuth clients (<doc:OAuth> §2, <doc:AdminAPI>): every input is
/// validated before any SQL, with a field error naming what is wrong. A client secret is 256 random
/// bits, answered once (at creation, on rotation, or when a change moves the client to a secret
/// method) and stored as its SHA-256.
public struct OAuthClientAdministration: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// The operator's rule for outgoing calls: whether a JWKS URL may be http on a loopback address.
    let outbound: WebhookURLGuard

    public init(client: PostgresClient, logger: Logger, outbound: WebhookURLGuard) {
        self.client = client
        self.logger = logger
        self.outbound = outbound
    }

    public static let maxClientsPerApp = 100
    public static let maxURIs = 20
    public static let maxScopes = 50
    public static let maxNameLength = 200
    /// A scope token: ASCII letters, digits and `_ . : / -`, 1 to 128 of them.
    public static let scopePattern = "^[A-Za-z0-9_.:/-]{1,128}$"
    /// What a client id looks like (`cci_` and 22 base64url characters); anything else is not found.
    public static let clientIdPattern = "^cci_[A-Za-z0-9_-]{22}$"

    /// Lifetimes (seconds) a client may have, as the table's CHECKs bound them.
    public static let accessTokenRange = 60...86_400
    public static let refreshRange = 60...31_536_000
    public static let graceRange = 0...300

    /// What the admin API answers after a write: the client, and its secret when one was just made.
    public struct Written: Sendable {
        public let client: OAuthClient
        public let secret: String?
    }

    // MARK: defaults

    /// The defaults of a new client of `kind`: a public client may use the authorization code and
    /// refresh tokens, with DPoP required; a confidential one also client credentials, with
    /// client_secret_basic. Both: 15-minute access tokens, refresh tokens that slide 30 days within
    /// 90, and a 30-second grace for a retried refresh.
    public static func defaults(_ kind: OAuthClient.Kind) -> (method: OAuthClient.AuthMethod, grants: [OAuthGrantType], dpop: Bool) {
        switch kind {
        case .public: (.none, [.authorizationCode, .refreshToken], true)
        case .confidential: (.clientSecretBasic, [.authorizationCode, .refreshToken, .clientCredentials], false)
        }
    }
    public static let defaultAccessTokenSeconds = 900
    public static let defaultRefreshSlidingSeconds = 30 * 86_400
    public static let defaultRefreshAbsoluteSeconds = 90 * 86_400
    public static let defaultRefreshGraceSeconds = 30

    static let createFields: Set<String> = [
        "name", "kind", "tokenEndpointAuthMethod", "redirectUris", "postLogoutRedirectUris", "grantTypes", "scopes", "accessTokenSeconds",
        "refreshSlidingSeconds", "refreshAbsoluteSeconds", "refreshGraceSeconds", "dpopRequired", "jwks", "jwksUri",
    ]
    static let patchFields = createFields.subtracting(["kind"])

    static func invalid(_ field: String, _ code: String, _ message: String) -> AdminFailure { .invalid(FieldError(field, code, message)) }

    // MARK: field rules

    static func name(_ value: JSONValue) throws -> String {
        guard let text = value.stringValue else { throw invalid("name", "invalid_type", "must be a string") }
        guard text.unicodeScalars.count <= maxNameLength else { throw invalid("name", "too_long", "must be at most \(maxNameLength) characters") }
        guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw invalid("name", "invalid_value", "must not be empty") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || [0x85, 0x2028, 0x2029].contains($0.value) }) else {
            throw invalid("name", "invalid_value", "must not contain control characters")
        }
        return text
    }

    static func oneOf<T: RawRepresentable & CaseIterable>(_ field: String, _ value: JSONValue, _ type: T.Type) throws -> T where T.RawValue == String {
        let names = T.allCases.map(\.rawValue).joined(separator: ", ")
        guard let text = value.stringValue, let result = T(rawValue: text) else { throw invalid(field, "invalid_value", "must be one of \(names)") }
        return result
    }

    /// Redirect URIs (and post-logout redirect URIs): each one of RFC 8252's three kinds, no two alike.
    static func uris(_ field: String, _ value: JSONValue) throws -> [String] {
        guard let items = value.arrayValue else { throw invalid(field, "invalid_type", "must be an array of URIs") }
        guard items.count <= maxURIs else { throw invalid(field, "too_many", "must list at most \(maxURIs) URIs") }
        var result: [String] = []
        for item in items {
            guard let uri = item.stringValue else { throw invalid(field, "invalid_type", "must be an array of strings") }
            guard RedirectURIRule.kind(of: uri) != nil else {
                throw invalid(field, "invalid_redirect_uri", """
                    must list only URIs of RFC 8252's kinds: a private-use scheme in reverse-domain form (com.example.app:/cb), \
                    https with a host, or http on a loopback IP address (http://127.0.0.1/cb); no fragment, no user information, \
                    at most 2048 characters (got '\(uri.prefix(100))')
                    """)
            }
            guard !result.contains(uri) else { throw invalid(field, "duplicate", "must not list a URI twice") }
            result.append(uri)
        }
        return result
    }

    static func grantTypes(_ value: JSONValue) throws -> [OAuthGrantType] {
        let names = OAuthGrantType.allCases.map(\.rawValue)
        guard let items = value.arrayValue else { throw invalid("grantTypes", "invalid_type", "must be an array of grant types") }
        guard !items.isEmpty else { throw invalid("grantTypes", "invalid_value", "must list at least one grant type") }
        var result: [OAuthGrantType] = []
        for item in items {
            guard let name = item.stringValue, let grant = OAuthGrantType(rawValue: name) else {
                throw invalid("grantTypes", "invalid_value", "must list only \(names.joined(separator: ", "))")
            }
            guard !result.contains(grant) else { throw invalid("grantTypes", "duplicate", "must not list a grant type twice") }
            result.append(grant)
        }
        return result
    }

    static func scopes(_ value: JSONValue) throws -> [String] {
        guard let items = value.arrayValue else { throw invalid("scopes", "invalid_type", "must be an array of scope names") }
        guard items.count <= maxScopes else { throw invalid("scopes", "too_many", "must list at most \(maxScopes) scopes") }
        var result: [String] = []
        for item in items {
            guard let scope = item.stringValue, (1...128).contains(scope.utf8.count),
                  scope.utf8.allSatisfy({ $0.isASCIILetterOrDigit || "_.:/-".utf8.contains($0) })
            else { throw invalid("scopes", "invalid_value", "must list scope names of 1 to 128 ASCII letters, digits or _ . : / -") }
            guard !result.contains(scope) else { throw invalid("scopes", "duplicate", "must not list a scope twice") }
            result.append(scope)
        }
        return result
    }

    static func seconds(_ field: String, _ value: JSONValue, _ range: ClosedRange<Int>) throws -> Int {
        guard case .int(let number) = value else { throw invalid(field, "invalid_type", "must be an integer") }
        guard range.contains(number) else {
            throw invalid(field, "out_of_range", "must be between \(range.lowerBound) and \(range.upperBound) seconds")
        }
        return number
    }

    static func bool(_ field: String, _ value: JSONValue) throws -> Bool {
        guard let flag = value.boolValue else { throw invalid(field, "invalid_type", "must be true or false") }
        return flag
    }

    static func jwks(_ value: JSONValue) throws -> JSONValue {
        if let problem = ClientKeys.problem(value) { throw invalid("jwks", "invalid_jwks", problem) }
        return value
    }

    func checkedJWKSURI(_ value: JSONValue) async throws -> String {
        guard let uri = value.stringValue else { throw Self.invalid("jwksUri", "invalid_type", "must be a string") }
        if let refusal = await ClientKeys.uriRefusal(uri, operatorRule: outbound) { throw Self.invalid("jwksUri", refusal.code, refusal.message) }
        return uri
    }

    /// The rules between fields, on the client as it would be saved. At creation a refusal is a 422;
    /// on a change, the admin API answers 409 when the stored client is what the change conflicts with.
    static func checkConsistency(_ c: OAuthClient) throws {
        switch c.kind {
        case .public:
            guard c.authMethod == .none else {
                throw invalid("tokenEndpointAuthMethod", "public_client", "must be none for a public client: it keeps no secret and no key")
            }
            guard !c.allows(.clientCredentials) else {
                throw invalid("grantTypes", "public_client", "must not hold client_credentials for a public client (it cannot authenticate)")
            }
        case .confidential:
            guard c.authMethod != .none else {
                throw invalid("tokenEndpointAuthMethod", "confidential_client", "must be client_secret_basic, client_secret_post or private_key_jwt for a confidential client")
            }
        }
        if c.authMethod == .privateKeyJWT {
            guard c.jwks != nil || c.jwksURI != nil else { throw invalid("jwks", "keys_required", "or jwksUri is required for private_key_jwt") }
        } else {
            if c.jwks != nil { throw invalid("jwks", "keys_not_allowed", "is only for a private_key_jwt client") }
            if c.jwksURI != nil { throw invalid("jwksUri", "keys_not_allowed", "is only for a private_key_jwt client") }
        }
        if c.allows(.authorizationCode) && c.redirectURIs.isEmpty {
            throw invalid("redirectUris", "redirect_uris_required", "must list at least one URI for the authorization_code grant")
        }
    }

    func clientId(_ text: String) throws -> String {
        guard text.utf8.count == 26, text.hasPrefix("cci_"), text.utf8.dropFirst(4).allSatisfy({ $0.isASCIILetterOrDigit || $0 == 0x2d || $0 == 0x5f })
        else { throw AdminFailure.notFound("client") }
        return text
    }

    func audit(_ db: PostgresConnection, app: App, actor: String, action: String, clientId: String, detail: [String: JSONValue] = [:]) async throws {
        var all = detail
        all["clientId"] = .string(clientId)
        try await AuditLog.record(db, appRef: app.ref, appId: app.appId, actor: actor, action: action, detail: all, logger: logger)
    }

    static func newSecret() -> (secret: String, hash: Data) {
        let secret = Secrets.token(prefix: "ccs_")
        return (secret, Secrets.sha256(secret))
    }

    // MARK: operations

    /// A new client from `input` (`name` and `kind` required; everything else has a default).
    public func create(app: App, input: [String: JSONValue], actor: String) async throws -> Written {
        if let unknown = input.keys.sorted().first(where: { !Self.createFields.contains($0) }) {
            throw Self.invalid(unknown, "unknown_field", "is not a field of an OAuth client")
        }
        guard let nameValue = input["name"] else { throw Self.invalid("name", "required", "is required") }
        let name = try Self.name(nameValue)
        guard let kindValue = input["kind"] else { throw Self.invalid("kind", "required", "is required (public or confidential)") }
        let kind = try Self.oneOf("kind", kindValue, OAuthClient.Kind.self)
        let defaults = Self.defaults(kind)
        let method = try input["tokenEndpointAuthMethod"].map { try Self.oneOf("tokenEndpointAuthMethod", $0, OAuthClient.AuthMethod.self) }
            ?? defaults.method
        let grants = try input["grantTypes"].map(Self.grantTypes) ?? defaults.grants
        let redirects = try input["redirectUris"].map { try Self.uris("redirectUris", $0) } ?? []
        let logouts = try input["postLogoutRedirectUris"].map { try Self.uris("postLogoutRedirectUris", $0) } ?? []
        let scopes = try input["scopes"].map(Self.scopes) ?? OAuthClient.standardScopes
        let access = try input["accessTokenSeconds"].map { try Self.seconds("accessTokenSeconds", $0, Self.accessTokenRange) }
            ?? Self.defaultAccessTokenSeconds
        let sliding = try input["refreshSlidingSeconds"].map { try Self.seconds("refreshSlidingSeconds", $0, Self.refreshRange) }
            ?? Self.defaultRefreshSlidingSeconds
        let absolute = try input["refreshAbsoluteSeconds"].map { try Self.seconds("refreshAbsoluteSeconds", $0, Self.refreshRange) }
            ?? Self.defaultRefreshAbsoluteSeconds
        let grace = try input["refreshGraceSeconds"].map { try Self.seconds("refreshGraceSeconds", $0, Self.graceRange) }
            ?? Self.defaultRefreshGraceSeconds
        let dpop = try input["dpopRequired"].map { try Self.bool("dpopRequired", $0) } ?? defaults.dpop
        let jwks = try input["jwks"].map(Self.jwks)
        if input["jwks"] != nil && input["jwksUri"] != nil {
            throw Self.invalid("jwksUri", "jwks_conflict", "cannot be given with jwks: the keys are registered one way")
        }
        let jwksURI = try await input["jwksUri"].asyncMap { try await checkedJWKSURI($0) }
        var fresh = OAuthClient(
            ref: UUID(), appRef: app.ref, clientId: Secrets.token(prefix: "cci_", bytes: 16), name: name, kind: kind, authMethod: method,
            secretHash: nil, jwks: jwks, jwksURI: jwksURI, redirectURIs: redirects, postLogoutRedirectURIs: logouts, grantTypes: grants,
            scopes: scopes, accessTokenSeconds: access, refreshSlidingSeconds: sliding, refreshAbsoluteSeconds: absolute,
            refreshGraceSeconds: grace, dpopRequired: dpop, createdAt: Date(), updatedAt: Date())
        try Self.checkConsistency(fresh)
        var secret: String?
        if method == .clientSecretBasic || method == .clientSecretPost {
            let made = Self.newSecret()
            secret = made.secret
            fresh.secretHash = made.hash
        }
        let toInsert = fresh
        let stored: OAuthClient = try await client.transaction(logger: logger) { db in
            // The app row is locked so that two creations cannot both pass the count; an app deleted
            // meanwhile is not found.
            guard try await AppStore.lockForChange(db, ref: app.ref, logger: logger) else { throw AdminFailure.notFound("app") }
            guard try await OAuthClientStore.count(db, appRef: app.ref, logger: logger) < Self.maxClientsPerApp else {
                throw AdminFailure.conflict(code: "too_many_clients", message: "an app may have at most \(Self.maxClientsPerApp) OAuth clients")
            }
            try await OAuthClientStore.insert(db, toInsert, logger: logger)
            guard let stored = try await OAuthClientStore.find(db, ref: toInsert.ref, logger: logger) else { throw AdminFailure.notFound("client") }
            try await audit(db, app: app, actor: actor, action: "oauth-client.create", clientId: toInsert.clientId,
                            detail: ["kind": .string(kind.rawValue), "tokenEndpointAuthMethod": .string(method.rawValue)])
            return stored
        }
        return Written(client: stored, secret: secret)
    }

    public func list(app: App) async throws -> [OAuthClient] {
        try await client.withConnection { try await OAuthClientStore.list($0, appRef: app.ref, logger: logger) }
    }

    public func get(app: App, clientId text: String) async throws -> OAuthClient {
        let clientId = try clientId(text)
        guard let found = try await client.withConnection({ try await OAuthClientStore.find($0, appRef: app.ref, clientId: clientId, logger: logger) })
        else { throw AdminFailure.notFound("client") }
        return found
    }

    /// PATCH: any field but `kind`. Giving `jwks` replaces a `jwksUri` and the other way round; moving
    /// to private_key_jwt drops the secret; moving from it to a secret method drops the keys and makes
    /// a secret (answered once). A change that conflicts with the stored client (a public client's
    /// method or grants, keys for a client that does not use them, no redirect URI left for the
    /// authorization code) is refused naming the field.
    public func update(app: App, clientId text: String, patch: [String: JSONValue], actor: String) async throws -> Written {
        if let unknown = patch.keys.sorted().first(where: { !Self.patchFields.contains($0) }) {
            throw Self.invalid(unknown, unknown == "kind" ? "read_only" : "unknown_field",
                               unknown == "kind" ? "is chosen when the client is created and cannot change" : "cannot be changed here")
        }
        let clientId = try clientId(text)
        let name = try patch["name"].map(Self.name)
        let method = try patch["tokenEndpointAuthMethod"].map { try Self.oneOf("tokenEndpointAuthMethod", $0, OAuthClient.AuthMethod.self) }
        let grants = try patch["grantTypes"].map(Self.grantTypes)
        let redirects = try patch["redirectUris"].map { try Self.uris("redirectUris", $0) }
        let logouts = try patch["postLogoutRedirectUris"].map { try Self.uris("postLogoutRedirectUris", $0) }
        let scopes = try patch["scopes"].map(Self.scopes)
        let access = try patch["accessTokenSeconds"].map { try Self.seconds("accessTokenSeconds", $0, Self.accessTokenRange) }
        let sliding = try patch["refreshSlidingSeconds"].map { try Self.seconds("refreshSlidingSeconds", $0, Self.refreshRange) }
        let absolute = try patch["refreshAbsoluteSeconds"].map { try Self.seconds("refreshAbsoluteSeconds", $0, Self.refreshRange) }
        let grace = try patch["refreshGraceSeconds"].map { try Self.seconds("refreshGraceSeconds", $0, Self.graceRange) }
        let dpop = try patch["dpopRequired"].map { try Self.bool("dpopRequired", $0) }
        let jwks = try patch["jwks"].map(Self.jwks)
        // The rules a change breaks by itself, whatever is stored (422).
        if patch["jwks"] != nil && patch["jwksUri"] != nil {
            throw Self.invalid("jwksUri", "jwks_conflict", "cannot be given with jwks: the keys are registered one way")
        }
        if let method, method != .privateKeyJWT, patch["jwks"] != nil || patch["jwksUri"] != nil {
            throw Self.invalid(patch["jwks"] != nil ? "jwks" : "jwksUri", "invalid_combination", "is only for private_key_jwt, not \(method.rawValue)")
        }
        if let grants, grants.contains(.authorizationCode), redirects?.isEmpty == true {
            throw Self.invalid("redirectUris", "invalid_combination", "must list at least one URI for the authorization_code grant")
        }
        let jwksURI = try await patch["jwksUri"].asyncMap { try await checkedJWKSURI($0) }

        return try await client.transaction(logger: logger) { db in
            guard var c = try await OAuthClientStore.lock(db, appRef: app.ref, clientId: clientId, logger: logger) else {
                throw AdminFailure.notFound("client")
            }
            let before = c.authMethod
            if let name { c.name = name }
            if let method { c.authMethod = method }
            if let grants { c.grantTypes = grants }
            if let redirects { c.redirectURIs = redirects }
            if let logouts { c.postLogoutRedirectURIs = logouts }
            if let scopes { c.scopes = scopes }
            if let access { c.accessTokenSeconds = access }
            if let sliding { c.refreshSlidingSeconds = sliding }
            if let absolute { c.refreshAbsoluteSeconds = absolute }
            if let grace { c.refreshGraceSeconds = grace }
            if let dpop { c.dpopRequired = dpop }
            if let jwks { c.jwks = jwks; c.jwksURI = nil }
            if let jwksURI { c.jwksURI = jwksURI; c.jwks = nil }
            var secret: String?
            switch c.authMethod {
            case .privateKeyJWT, .none:
                c.secretHash = nil
            case .clientSecretBasic, .clientSecretPost:
                // Keys are dropped only when the change moves the client off private_key_jwt; keys
                // given to a secret client are refused below.
                if before == .privateKeyJWT && method != nil && patch["jwks"] == nil && patch["jwksUri"] == nil {
                    c.jwks = nil
                    c.jwksURI = nil
                }
                if c.secretHash == nil {
                    let made = Self.newSecret()
                    secret = made.secret
                    c.secretHash = made.hash
                }
            }
            try Self.checkConsistency(c)
            guard let updated = try await OAuthClientStore.update(db, c, logger: logger) else { throw AdminFailure.notFound("client") }
            var detail: [String: JSONValue] = ["fields": .array(patch.keys.sorted().map { .string($0) })]
            if secret != nil { detail["secretIssued"] = .bool(true) }
            try await audit(db, app: app, actor: actor, action: "oauth-client.update", clientId: clientId, detail: detail)
            return Written(client: updated, secret: secret)
        }
    }

    /// Deletes the client; its authorization codes, grants and refresh tokens go with it, so what it
    /// was issued stops working (the sessions themselves stay: they may serve other clients and APIs).
    public func delete(app: App, clientId text: String, actor: String) async throws {
        let clientId = try clientId(text)
        try await client.transaction(logger: logger) { db in
            guard try await OAuthClientStore.delete(db, appRef: app.ref, clientId: clientId, logger: logger) != nil else {
                throw AdminFailure.notFound("client")
            }
            try await audit(db, app: app, actor: actor, action: "oauth-client.delete", clientId: clientId)
        }
    }

    /// A new secret for a client that authenticates with one (answered once); the old one stops
    /// working at once.
    public func rotateSecret(app: App, clientId text: String, actor: String) async throws -> Written {
        let clientId = try clientId(text)
        let made = Self.newSecret()
        let rotated: OAuthClient = try await client.transaction(logger: logger) { db in
            guard let c = try await OAuthClientStore.lock(db, appRef: app.ref, clientId: clientId, logger: logger) else {
                throw AdminFailure.notFound("client")
            }
            guard c.authMethod == .clientSecretBasic || c.authMethod == .clientSecretPost else {
                throw AdminFailure.conflict(
                    code: "no_secret", message: "the client authenticates with \(c.authMethod.rawValue): it has no secret to rotate")
            }
            guard let rotated = try await OAuthClientStore.setSecret(db, ref: c.ref, secretHash: made.hash, logger: logger) else {
                throw AdminFailure.notFound("client")
            }
            try await audit(db, app: app, actor: actor, action: "oauth-client.rotate-secret", clientId: clientId)
            return rotated
        }
        return Written(client: rotated, secret: made.secret)
    }
}

extension CosyncServices {
    /// The admin side of OAuth clients; JWKS URLs follow the operator's rule for outgoing calls.
    public var oauthClients: OAuthClientAdministration {
        OAuthClientAdministration(client: client, logger: logger, outbound: configuration.webhooks.guardRule)
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

extension UInt8 {
    fileprivate var isASCIILetterOrDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5a).contains(self) || (0x61...0x7a).contains(self)
    }
}
