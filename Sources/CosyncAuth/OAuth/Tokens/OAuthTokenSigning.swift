import Foundation
import JWTKit

/// Signing and checking the tokens of an app's issuer (<doc:OAuth> §4): RS256 with the app's active
/// signing key, its `kid` in the header so that a relying party finds the key in the app's JWKS
/// (`/apps/{appId}/.well-known/jwks.json`). The user JWT of the end-user API keeps its header
/// without `kid` (the SDKs compare it byte for byte); these tokens are new and carry it.
extension TokenIssuer {
    /// The `typ` header of an access token (RFC 9068 §2.1).
    static let accessTokenType = "at+jwt"

    /// The app's active signing key and its kid. No query when the app cache knows the kid and this
    /// node already parsed that key (`appKeys`, shared with `signingKeys`).
    func activeSigningKey(appRef: Int64) async throws -> (kid: String, keys: JWTKeyCollection) {
        if let kid = cache?.signingKid(ref: appRef), let cached = appKeys[kid] { return (kid, cached) }
        let generation = cache?.beginLoad()
        let rows = try await client.withConnection { try await AppStore.keys($0, ref: appRef, logger: logger) }
        guard let active = rows.first(where: \.active) else { throw OAuthError.serverError("the app has no signing key") }
        if let generation { cache?.storeSigningKid(active.kid, ref: appRef, generation: generation) }
        return (active.kid, try await parsedKey(active))
    }

    /// The key `kid` of the app, for checking a token it signed: the active key or one still within
    /// its retirement window; nil when the app has no such key (another app's, or one retired).
    func verificationKey(appRef: Int64, kid: String) async throws -> JWTKeyCollection? {
        if cache?.signingKid(ref: appRef) == kid, let cached = appKeys[kid] { return cached }
        let generation = cache?.beginLoad()
        let rows = try await client.withConnection { try await AppStore.keys($0, ref: appRef, logger: logger) }
        if let generation, let active = rows.first(where: \.active) { cache?.storeSigningKid(active.kid, ref: appRef, generation: generation) }
        guard let row = rows.first(where: { $0.kid == kid }) else { return nil }
        return try await parsedKey(row)
    }

    /// A key row as a collection that signs and verifies (kept by kid: a kid names one immutable key).
    func parsedKey(_ row: AppStore.KeyRow) async throws -> JWTKeyCollection {
        if let cached = appKeys[row.kid] { return cached }
        let pem = try box.openString(row.privateKeySealed, purpose: .appKey(kid: row.kid))
        let collection = JWTKeyCollection()
        await collection.add(rsa: try Insecure.RSA.PrivateKey(pem: pem), digestAlgorithm: .sha256)
        appKeys[row.kid] = collection
        return collection
    }

    /// Signs `claims` as a JWT of type `type` (`at+jwt`, `JWT`) with the app's key, `kid` in the header.
    public func signOAuthToken(_ claims: [String: JSONValue], type: String, appRef: Int64) async throws -> String {
        let (kid, keys) = try await activeSigningKey(appRef: appRef)
        var header = JWTHeader()
        header.typ = type
        header.kid = kid
        return try await keys.sign(ClaimSet(claims), header: header)
    }

    /// The claims of an access token the issuer `issuer` of app `appRef` signed, or nil when `token`
    /// is not one: a malformed token, another type (an ID token is not an access token), another
    /// algorithm, a key the app does not have, a bad signature, another issuer, or (unless
    /// `allowExpired`) an expired one. Nothing here says the session is still live.
    public func verifyOAuthAccessToken(_ token: String, appRef: Int64, issuer: String, allowExpired: Bool = false) async -> [String: JSONValue]? {
        guard token.utf8.count <= 8192, let header = Base64URL.jwtPart(token, 0),
            header["typ"]?.stringValue?.lowercased() == Self.accessTokenType, header["alg"]?.stringValue == "RS256",
            let kid = header["kid"]?.stringValue, !kid.isEmpty, kid.utf8.count <= 128,
            let keys = try? await verificationKey(appRef: appRef, kid: kid),
            let claims = try? await keys.verify(token, as: ClaimSet.self).claims,
            claims["iss"]?.stringValue == issuer, case .int(let exp)? = claims["exp"]
        else { return nil }
        if !allowExpired && Double(exp) <= Date().timeIntervalSince1970 { return nil }
        return claims
    }
}
