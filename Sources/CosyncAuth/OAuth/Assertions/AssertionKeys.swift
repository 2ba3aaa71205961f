import Foundation
import Logging
import PostgresNIO

/// A key an app's backend signs JWT-bearer assertions with (<doc:OAuth> §8): a public key, or the URL
/// of the backend's JWK set. Assertions checked with it must carry `issuer` as their `iss`.
public struct AssertionKey: Sendable, Equatable {
    public let id: UUID
    public let appRef: Int64
    public let issuer: String
    /// The key id assertions name in their header (a public key's; a JWK set's keys carry their own).
    public let kid: String?
    /// The public key as a JWK (registered as a JWK or a PEM).
    public let jwk: JSONValue?
    public let jwksURI: String?
    public let createdAt: Date

    /// The admin API's view (all of it is public).
    public func json() -> [String: JSONValue] {
        [
            "keyId": .string(id.uuidString.lowercased()), "issuer": .string(issuer), "kid": kid.map(JSONValue.string) ?? .null,
            "jwk": jwk ?? .null, "jwksUri": jwksURI.map(JSONValue.string) ?? .null, "createdAt": .string(ISO8601.milliseconds(createdAt)),
        ]
    }
}

/// Admin operations on an app's assertion keys: register (a JWK, a PEM or a JWK-set URL), list, delete.
public struct AssertionKeyAdministration: Sendable {
    let client: PostgresClient
    let keySets: RemoteKeySets
    let logger: Logger

    /// An app may register this many keys (JWK-set URLs count as one each).
    public static let maxKeysPerApp = 20

    func invalid(_ field: String, _ code: String, _ message: String) -> AdminFailure { .invalid(FieldError(field, code, message)) }

    /// `{issuer, jwk | pem | jwksUri, kid?}`. A JWK-set URL is fetched now and must answer a set with
    /// a usable key.
    public func create(app: App, input: [String: JSONValue], actor: String) async throws -> AssertionKey {
        let allowed: Set<String> = ["issuer", "jwk", "pem", "jwksUri", "kid"]
        if let unknown = input.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw invalid(unknown, "unknown_field", "is not a field of an assertion key")
        }
        guard let issuer = input["issuer"]?.stringValue, SignedJWT.isPlainText(issuer, max: 512) else {
            throw invalid("issuer", "required", "is required: the iss of the assertions, 1-512 characters without control characters")
        }
        let given = ["jwk", "pem", "jwksUri"].filter { input[$0] != nil }
        guard given.count == 1, let source = given.first else {
            throw invalid(given.count > 1 ? given[1] : "jwk", "invalid_value", "give exactly one of jwk, pem and jwksUri")
        }
        var kid: String?
        if let value = input["kid"] {
            guard let text = value.stringValue, SignedJWT.isPlainText(text, max: 256) else {
                throw invalid("kid", "invalid_value", "must be 1-256 characters without control characters")
            }
            guard source != "jwksUri" else { throw invalid("kid", "invalid_value", "a JWK set's keys carry their own kid") }
            kid = text
        }
        var jwk: [String: JSONValue]?
        var jwksURI: String?
        switch source {
        case "jwk":
            guard let object = input["jwk"]?.objectValue else { throw invalid("jwk", "invalid_value", "must be a JWK object") }
            do { jwk = try PublicJWK.normalized(object) } catch { throw invalid("jwk", "invalid_key", "the key \(error.reason)") }
        case "pem":
            guard let text = input["pem"]?.stringValue else { throw invalid("pem", "invalid_value", "must be a PEM string") }
            do { jwk = try PublicJWK.fromPEM(text) } catch { throw invalid("pem", "invalid_key", "the key \(error.reason)") }
        default:
            guard let url = input["jwksUri"]?.stringValue else { throw invalid("jwksUri", "invalid_value", "must be a string") }
            if let refusal = FetchableURL.refusal(url) { throw invalid("jwksUri", "invalid_url", refusal) }
            let keys: [[String: JSONValue]]
            do { keys = try await keySets.fetch(url) } catch { throw invalid("jwksUri", "unusable_key_set", error.reason) }
            guard !keys.isEmpty else { throw invalid("jwksUri", "unusable_key_set", "the set holds no RSA, P-256 or Ed25519 signing key") }
            jwksURI = url
        }
        if var key = jwk {
            if let own = key["kid"]?.stringValue {
                if let kid, kid != own { throw invalid("kid", "invalid_value", "differs from the JWK's kid") }
                kid = own
            }
            key["kid"] = nil
            jwk = key
        }
        let new = AssertionKey(
            id: UUID(), appRef: app.ref, issuer: issuer, kid: kid, jwk: jwk.map(JSONValue.object), jwksURI: jwksURI, createdAt: Date())
        return try await client.transaction(logger: logger) { db in
            // The app row is locked so that two registrations cannot both pass the count.
            guard try await AppStore.lockForChange(db, ref: app.ref, logger: logger) else { throw AdminFailure.notFound("app") }
            guard try await OAuthAssertionKeyStore.count(db, appRef: app.ref, logger: logger) < Self.maxKeysPerApp else {
                throw AdminFailure.conflict(code: "too_many_keys", message: "an app may register at most \(Self.maxKeysPerApp) assertion keys")
            }
            let stored = try await OAuthAssertionKeyStore.insert(db, new, logger: logger)
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "oauth.assertionKey.create",
                detail: ["keyId": .string(stored.id.uuidString.lowercased()), "issuer": .string(issuer)], logger: logger)
            return stored
        }
    }

    public func list(app: App) async throws -> [AssertionKey] {
        try await client.withConnection { try await OAuthAssertionKeyStore.list($0, appRef: app.ref, logger: logger) }
    }

    public func delete(app: App, id text: String, actor: String) async throws {
        guard let id = UUID(uuidString: text) else { throw AdminFailure.notFound("assertion key") }
        try await client.transaction(logger: logger) { db in
            guard try await OAuthAssertionKeyStore.delete(db, appRef: app.ref, id: id, logger: logger) else {
                throw AdminFailure.notFound("assertion key")
            }
            try await AuditLog.record(
                db, appRef: app.ref, appId: app.appId, actor: actor, action: "oauth.assertionKey.delete",
                detail: ["keyId": .string(id.uuidString.lowercased())], logger: logger)
        }
    }
}

extension OAuthServices {
    /// The app backends' assertion keys, for the admin API.
    public var assertionKeys: AssertionKeyAdministration { AssertionKeyAdministration(client: client, keySets: remoteKeys, logger: logger) }
}
