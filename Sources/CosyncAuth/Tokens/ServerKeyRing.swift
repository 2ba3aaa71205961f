import Foundation
import JWTKit
import Logging
import PostgresNIO

/// The deployment-wide signing key. It signs app tokens in the legacy shape `{appId, scope:"app"}`
/// (and, with the end-user API, access and login tokens). The key is created on first use and kept in
/// `server_keys`, sealed under the master key. App tokens are never trusted from their signature
/// alone: they are looked up by exact string.
public actor ServerKeyRing {
    public let kid: String
    let keys: JWTKeyCollection

    init(kid: String, keys: JWTKeyCollection) {
        self.kid = kid
        self.keys = keys
    }

    /// Loads the active server key, creating it when none exists (race-safe across nodes).
    public static func load(client: PostgresClient, box: SecretBox, logger: Logger) async throws -> ServerKeyRing {
        if let ring = try await existing(client: client, box: box, logger: logger) { return ring }
        let material = try RSAKeyMaterial.generate()
        let sealed = try box.seal(material.privateKeyPEM, purpose: .serverKey(kid: material.kid))
        try await client.withConnection {
            try await ServerKeyStore.insertIfAbsent(
                $0, kid: material.kid, publicKeyPEM: material.publicKeyPEM, privateKeySealed: sealed, logger: logger)
        }
        guard let ring = try await existing(client: client, box: box, logger: logger) else {
            throw StoreError.noRowReturned
        }
        return ring
    }

    static func existing(client: PostgresClient, box: SecretBox, logger: Logger) async throws -> ServerKeyRing? {
        guard let active = try await client.withConnection({ try await ServerKeyStore.active($0, logger: logger) }) else { return nil }
        let kid = active.kid
        let pem = try box.openString(active.sealed, purpose: .serverKey(kid: kid))
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: pem), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return ServerKeyRing(kid: kid, keys: keys)
    }

    public func sign(_ payload: some JWTPayload) async throws -> String {
        try await keys.sign(payload, kid: JWKIdentifier(string: kid))
    }

    public func verify<Payload: JWTPayload>(_ token: String, as type: Payload.Type) async throws -> Payload {
        try await keys.verify(token, as: type)
    }
}

/// Claims of an app token: the legacy shape plus a `jti`, so that two tokens minted in the same second
/// for the same app differ.
public struct AppTokenClaims: JWTPayload, Equatable {
    public var appId: String
    public var scope: String
    public var iat: Int
    public var jti: String

    public init(appId: String, issuedAt: Date = Date()) {
        self.appId = appId
        self.scope = "app"
        self.iat = Int(issuedAt.timeIntervalSince1970)
        self.jti = Secrets.hexIdentifier()
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try requireScope(scope, "app")
    }
}
