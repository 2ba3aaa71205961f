import Crypto
import Foundation

/// The claims of the tokens the token endpoint signs (<doc:OAuth> §4), and of userinfo.
enum OAuthTokenClaims {
    /// An access token in the RFC 9068 profile. `sub` is the user id (lower-case) or, for
    /// client_credentials, the client id; `sid` names the session every resource check requires to
    /// be live; `gid` names the grant (the refresh-token family) it was issued under, which must still
    /// exist: revoking a grant ends its access tokens even if the client opens a new grant on the same
    /// session; `cnf.jkt` binds the token to a DPoP key (RFC 9449 §6).
    static func accessToken(
        issuer: String, subject: String, audience: String, clientId: String, scope: String, lifetime: Int, sessionId: UUID?,
        grantId: UUID? = nil, authTime: Date?, jkt: String?, now: Date
    ) -> [String: JSONValue] {
        let iat = Int(now.timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string(subject), "aud": .string(audience), "client_id": .string(clientId),
            "iat": .int(iat), "exp": .int(iat + lifetime), "jti": .string(Secrets.hexIdentifier()), "scope": .string(scope),
        ]
        if let sessionId { claims["sid"] = .string(sessionId.uuidString.lowercased()) }
        if let grantId { claims["gid"] = .string(grantId.uuidString.lowercased()) }
        if let authTime { claims["auth_time"] = .int(Int(authTime.timeIntervalSince1970)) }
        if let jkt { claims["cnf"] = .object(["jkt": .string(jkt)]) }
        return claims
    }

    /// An OpenID Connect ID token (Core §2, §3.1.3.6): `aud` and `azp` are the client, `at_hash`
    /// binds it to the access token answered with it, `nonce` only at the code exchange (a refreshed
    /// ID token carries none, §12.2), and the user's claims by scope.
    static func idToken(
        issuer: String, user: User, app: App, clientId: String, scopes: [String], lifetime: Int, sessionId: UUID, authTime: Date,
        amr: [String], nonce: String?, accessToken: String, now: Date
    ) -> [String: JSONValue] {
        let iat = Int(now.timeIntervalSince1970)
        var claims = userClaims(user: user, app: app, scopes: scopes)
        claims["iss"] = .string(issuer)
        claims["aud"] = .string(clientId)
        claims["azp"] = .string(clientId)
        claims["iat"] = .int(iat)
        claims["exp"] = .int(iat + lifetime)
        claims["auth_time"] = .int(Int(authTime.timeIntervalSince1970))
        claims["sid"] = .string(sessionId.uuidString.lowercased())
        claims["at_hash"] = .string(atHash(accessToken))
        if !amr.isEmpty { claims["amr"] = .array(amr.map(JSONValue.string)) }
        if let nonce { claims["nonce"] = .string(nonce) }
        return claims
    }

    /// `at_hash`: the left half of the SHA-256 of the access token, base64url (RS256, Core §3.1.3.6).
    static func atHash(_ accessToken: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Data(accessToken.utf8))).prefix(16))
    }

    /// `sub` and the user's claims the scopes allow (Core §5.4), as userinfo and the ID token show them.
    /// - `profile`: `name`, `given_name`, `family_name` from the user's metadata (top-level fields of
    ///   those names, or `firstName` / `lastName`), `preferred_username` (the user name), `locale`,
    ///   `updated_at`;
    /// - `email`: the handle when it is an e-mail address; `email_verified` is true when the app's
    ///   signup flow proves the address (a code or a link) and false otherwise;
    /// - `phone`: `phone_number` and `phone_number_verified`.
    static func userClaims(user: User, app: App, scopes: [String]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = ["sub": .string(user.id.uuidString.lowercased())]
        if scopes.contains("profile") {
            let text = { (keys: [String]) -> String? in
                for key in keys { if let value = user.metaData[key]?.stringValue, !value.isEmpty { return value } }
                return nil
            }
            let given = text(["given_name", "givenName", "firstName", "first_name"])
            let family = text(["family_name", "familyName", "lastName", "last_name"])
            if let name = text(["name", "fullName", "full_name"]) ?? [given, family].compactMap({ $0 }).joined(separator: " ").nonEmpty {
                claims["name"] = .string(name)
            }
            if let given { claims["given_name"] = .string(given) }
            if let family { claims["family_name"] = .string(family) }
            if let userName = user.userName, !userName.isEmpty { claims["preferred_username"] = .string(userName) }
            if !user.locale.isEmpty { claims["locale"] = .string(user.locale) }
            claims["updated_at"] = .int(Int(user.updatedAt.timeIntervalSince1970))
        }
        if scopes.contains("email"), Identifiers.hasAt(user.handle), !Identifiers.isAnonymous(user.handle) {
            claims["email"] = .string(user.handle)
            claims["email_verified"] = .bool(app.settings.signupFlow != .none)
        }
        if scopes.contains("phone"), let phone = user.phone, !phone.isEmpty {
            claims["phone_number"] = .string(phone)
            claims["phone_number_verified"] = .bool(user.phoneVerified)
        }
        return claims
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
