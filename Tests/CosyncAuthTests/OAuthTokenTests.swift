import CosyncAuth
import CosyncAuthHTTP
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import PostgresNIO
import Testing

/// The token endpoint, refresh-token families, revocation, introspection and userinfo (<doc:OAuth>
/// §4, §5, §7), through the HTTP routes against PostgreSQL. A code is made the way the hosted page
/// makes one: a session signed in through the end-user flows, then an `oauth_codes` row for it.
@Suite("OAuth: token endpoint, refresh families, revocation, introspection, userinfo")
struct OAuthTokenTests {
    static let redirectURI = "com.example.app:/callback"
    static let verifier = "verifier-" + String(repeating: "abcdefgh", count: 6)

    /// A new app with one user signed in through the end-user API (its session and access token).
    struct SignedIn {
        let api: API
        let sdk: SDK
        let appId: String
        let appRef: Int64
        let handle: String
        let password: String
        /// The end-user API's access token (what the Cosync SDKs hold).
        let accessToken: String
        let sid: UUID
        let userId: UUID
    }

    static func signIn(_ api: API, _ name: String, settings: [String: JSONValue] = [:]) async throws -> SignedIn {
        var all = settings
        all["signupFlow"] = all["signupFlow"] ?? .string("none")
        let created = try await api.createApp(name, settings: all)
        let sdk = SDK(api: api, appToken: created.string("appToken"))
        let handle = "oauth\(Secrets.hexIdentifier().prefix(8))@example.com"
        #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("one"))]).status == .ok)
        let token = try await sdk.login(handle, "one").object.string("access-token")
        let claims = try #require(Base64URL.jwtPart(token, 1))
        let appId = created.string("appId")
        let appRef = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
        return SignedIn(
            api: api, sdk: sdk, appId: appId, appRef: appRef, handle: handle, password: "one", accessToken: token,
            sid: try #require(UUID(uuidString: claims["sid"]?.stringValue ?? "")), userId: try #require(UUID(uuidString: claims["uid"]?.stringValue ?? "")))
    }

    /// A registered client, inserted as the admin API stores one.
    struct Client {
        let ref: UUID
        let clientId: String
        let secret: String?
    }

    static func client(
        _ user: SignedIn, confidential: Bool = false, grants: [String] = ["authorization_code", "refresh_token", OAuthGrantType.tokenExchange.rawValue],
        scopes: [String] = ["openid", "profile", "email", "offline_access"], accessSeconds: Int = 600, sliding: Int = 86400,
        absolute: Int = 30 * 86400, grace: Int = 30, dpopRequired: Bool = false
    ) async throws -> Client {
        let ref = UUID()
        let clientId = "client-" + Secrets.hexIdentifier().prefix(12)
        let secret = confidential ? "s3cret:+/" + Secrets.hexIdentifier() : nil
        let hash = secret.map(Secrets.sha256)
        try await TestEnvironment.sql(
            """
            INSERT INTO oauth_clients (id, app_ref, client_id, name, kind, auth_method, secret_hash, redirect_uris, grant_types, scopes,
                access_token_seconds, refresh_sliding_seconds, refresh_absolute_seconds, refresh_grace_seconds, dpop_required)
            VALUES (\(ref), \(user.appRef), \(clientId), 'Test client', \(confidential ? "confidential" : "public"),
                \(confidential ? "client_secret_basic" : "none"), \(hash), \([redirectURI]), \(grants), \(scopes),
                \(accessSeconds), \(sliding), \(absolute), \(grace), \(dpopRequired))
            """)
        return Client(ref: ref, clientId: clientId, secret: secret)
    }

    /// An authorization code for the user's session, as the hosted page issues one.
    static func code(_ user: SignedIn, _ client: Client, scope: String = "openid profile email", nonce: String? = "n-0S6_WzA2Mj",
                     verifier: String = verifier, dpopJKT: String? = nil) async throws -> String {
        let code = Secrets.token(prefix: "")
        let challenge = Base64URL.encode(SHA256.hash(data: Data(verifier.utf8)))
        try await TestEnvironment.sql(
            """
            INSERT INTO oauth_codes (code_hash, app_ref, client_ref, session_id, user_id, redirect_uri, scope, nonce, code_challenge,
                dpop_jkt, auth_time, amr, expires_at)
            VALUES (\(Secrets.sha256(code)), \(user.appRef), \(client.ref), \(user.sid), \(user.userId), \(redirectURI), \(scope), \(nonce),
                \(challenge), \(dpopJKT), now() - interval '1 minute', \(["pwd"]), now() + interval '60 seconds')
            """)
        return code
    }

    static func form(_ pairs: [String: String]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return pairs.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }

    static func basic(_ client: Client) -> String {
        let encode = { (s: String) in s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? s }
        return "Basic " + Data("\(encode(client.clientId)):\(encode(client.secret ?? ""))".utf8).base64EncodedString()
    }

    /// POSTs a form to the issuer's `path` (`/oauth/token`, …), as `client`.
    static func post(_ user: SignedIn, _ path: String, _ client: Client, _ fields: [String: String], headers: HTTPFields = [:]) async throws
        -> API.Reply
    {
        var pairs = fields
        var extra = headers
        if client.secret != nil { extra[.authorization] = basic(client) } else { pairs["client_id"] = client.clientId }
        return try await user.api.call(
            .post, "/apps/\(user.appId)\(path)", token: nil, body: form(pairs), headers: extra, contentType: "application/x-www-form-urlencoded")
    }

    static func exchange(_ user: SignedIn, _ client: Client, code: String, verifier: String = verifier, redirect: String = redirectURI) async throws
        -> API.Reply
    {
        try await post(user, "/oauth/token", client, ["grant_type": "authorization_code", "code": code, "code_verifier": verifier, "redirect_uri": redirect])
    }

    static func refresh(_ user: SignedIn, _ client: Client, _ token: String) async throws -> API.Reply {
        try await post(user, "/oauth/token", client, ["grant_type": "refresh_token", "refresh_token": token])
    }

    static func userinfo(_ user: SignedIn, _ accessToken: String) async throws -> API.Reply {
        try await user.api.call(.get, "/apps/\(user.appId)/oauth/userinfo", token: accessToken)
    }

    static func error(_ reply: API.Reply) -> String? { reply.object["error"]?.stringValue }

    /// The payload of a JWT verified with the app's published JWKS (by its `kid`).
    struct Claims: JWTPayload {
        var claims: [String: JSONValue]
        init(from decoder: any Decoder) throws { claims = try [String: JSONValue](from: decoder) }
        func encode(to encoder: any Encoder) throws { try claims.encode(to: encoder) }
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func verified(_ user: SignedIn, _ jwt: String) async throws -> [String: JSONValue] {
        let jwks = try await user.api.call(.get, "/apps/\(user.appId)/.well-known/jwks.json", token: nil)
        let keys = JWTKeyCollection()
        try await keys.add(jwksJSON: jwks.text)
        let header = try #require(Base64URL.jwtPart(jwt, 0))
        let kid = try #require(header["kid"]?.stringValue)
        #expect(jwks.json["keys"]?.arrayValue?.contains { $0["kid"]?.stringValue == kid } == true, "kid \(kid) is in the JWKS")
        return try await keys.verify(jwt, as: Claims.self).claims
    }

    static func count(_ query: PostgresQuery) async throws -> Int { try await TestEnvironment.value(query, as: Int.self) ?? -1 }

    // MARK: authorization_code

    @Test("a code exchange answers an RFC 9068 access token and an ID token signed with the app's key (kid in the JWKS); userinfo answers the user")
    func codeExchange() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken code")
            let client = try await Self.client(user)
            let before = try #require(try await TestEnvironment.value("SELECT expires_at FROM sessions WHERE id = \(user.sid)", as: Date.self))
            let reply = try await Self.exchange(user, client, code: try await Self.code(user, client))
            try #require(reply.status == .ok, "\(reply.text)")
            #expect(reply.headers[.cacheControl] == "no-store")
            let body = reply.object
            #expect(body["token_type"] == .string("Bearer") && body["expires_in"] == .int(600) && body["scope"] == .string("openid profile email"))
            let access = body.string("access_token"), idToken = body.string("id_token")
            #expect(body.string("refresh_token").hasPrefix("crt_"))

            #expect(Base64URL.jwtPart(access, 0)?["typ"] == .string("at+jwt"))
            let issuer = "http://localhost:8080/apps/\(user.appId)"
            let at = try await Self.verified(user, access)
            let sub = user.userId.uuidString.lowercased()
            #expect(at["iss"] == .string(issuer) && at["sub"] == .string(sub) && at["aud"] == .string(client.clientId))
            #expect(at["client_id"] == .string(client.clientId) && at["sid"] == .string(user.sid.uuidString.lowercased()))
            #expect(at["scope"] == .string("openid profile email") && at["jti"]?.stringValue?.isEmpty == false && at["auth_time"] != nil)
            #expect(at["cnf"] == nil)

            let id = try await Self.verified(user, idToken)
            #expect(id["iss"] == .string(issuer) && id["sub"] == .string(sub) && id["aud"] == .string(client.clientId))
            #expect(id["azp"] == .string(client.clientId) && id["nonce"] == .string("n-0S6_WzA2Mj") && id["amr"] == .array([.string("pwd")]))
            #expect(id["sid"] == .string(user.sid.uuidString.lowercased()) && id["email"] == .string(user.handle))
            let hash = Base64URL.encode(Array(SHA256.hash(data: Data(access.utf8))).prefix(16))
            #expect(id["at_hash"] == .string(hash))

            // The session now lives as long as the grant (30 days), not its sign-in's lifetime.
            let after = try #require(try await TestEnvironment.value("SELECT expires_at FROM sessions WHERE id = \(user.sid)", as: Date.self))
            #expect(after > before && after.timeIntervalSinceNow > 29 * 86400)

            let info = try await Self.userinfo(user, access)
            #expect(info.status == .ok && info.object["sub"] == .string(sub) && info.object["email"] == .string(user.handle), "\(info.text)")
            #expect(info.object["email_verified"] == .bool(false))
            // The ID token is not an access token.
            #expect(try await Self.userinfo(user, idToken).status == .unauthorized)
        }
    }

    @Test("PKCE: a wrong code_verifier is invalid_grant and spends the code; a missing or malformed one is invalid_request; redirect_uri must match")
    func pkce() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken PKCE")
            let client = try await Self.client(user)
            let code = try await Self.code(user, client)
            let missing = try await Self.post(user, "/oauth/token", client, ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirectURI])
            #expect(missing.status == .badRequest && Self.error(missing) == "invalid_request", "\(missing.text)")
            let short = try await Self.exchange(user, client, code: code, verifier: "short")
            #expect(Self.error(short) == "invalid_request")
            let wrong = try await Self.exchange(user, client, code: code, verifier: String(repeating: "x", count: 50))
            #expect(wrong.status == .badRequest && Self.error(wrong) == "invalid_grant", "\(wrong.text)")
            // The code is spent: the right verifier no longer helps.
            let late = try await Self.exchange(user, client, code: code)
            #expect(Self.error(late) == "invalid_grant")

            let other = try await Self.code(user, client)
            let redirect = try await Self.exchange(user, client, code: other, redirect: "com.example.app:/other")
            #expect(Self.error(redirect) == "invalid_grant" && redirect.text.contains("redirect_uri"), "\(redirect.text)")
            // Another client cannot use this client's code.
            let thief = try await Self.client(user)
            let stolen = try await Self.exchange(user, thief, code: try await Self.code(user, client))
            #expect(Self.error(stolen) == "invalid_grant")
            #expect(try await Self.count("SELECT count(*)::int FROM oauth_grants WHERE session_id = \(user.sid)") == 0)
        }
    }

    @Test("a code used twice is invalid_grant and revokes the grant its first use gave (refresh token and access token)")
    func codeReuse() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken reuse")
            let client = try await Self.client(user)
            let code = try await Self.code(user, client)
            let first = try await Self.exchange(user, client, code: code)
            try #require(first.status == .ok, "\(first.text)")
            let again = try await Self.exchange(user, client, code: code)
            #expect(again.status == .badRequest && Self.error(again) == "invalid_grant", "\(again.text)")
            #expect(try await Self.count("SELECT count(*)::int FROM oauth_grants WHERE session_id = \(user.sid)") == 0)
            #expect(Self.error(try await Self.refresh(user, client, first.object.string("refresh_token"))) == "invalid_grant")
            #expect(try await Self.userinfo(user, first.object.string("access_token")).status == .unauthorized)
            // The session itself is not revoked: the end-user API's token still works.
            #expect(try await user.sdk.get("/api/appuser/getUser", accessToken: user.accessToken).status == .ok)
        }
    }

    // MARK: refresh tokens

    @Test("refresh rotates on every use; a retry within the grace window answers the same successor with a fresh access token")
    func rotation() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken rotation")
            let client = try await Self.client(user)
            let first = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let rt1 = first.object.string("refresh_token")
            let second = try await Self.refresh(user, client, rt1)
            try #require(second.status == .ok, "\(second.text)")
            let rt2 = second.object.string("refresh_token")
            #expect(rt2 != rt1 && rt2.hasPrefix("crt_"))
            // A refreshed ID token keeps auth_time and carries no nonce (OIDC Core §12.2).
            let id = try await Self.verified(user, second.object.string("id_token"))
            #expect(id["nonce"] == nil && id["auth_time"] != nil)

            // The response was lost: the app retries with rt1 and gets rt2 again.
            let retried = try await Self.refresh(user, client, rt1)
            #expect(retried.status == .ok && retried.object.string("refresh_token") == rt2, "\(retried.text)")
            #expect(retried.object.string("access_token") != second.object.string("access_token"))

            let third = try await Self.refresh(user, client, rt2)
            #expect(third.status == .ok && third.object.string("refresh_token") != rt2)
            // A narrower scope is fine, a wider one is not.
            let narrow = try await Self.post(user, "/oauth/token", client, ["grant_type": "refresh_token", "refresh_token": third.object.string("refresh_token"), "scope": "openid"])
            #expect(narrow.object["scope"] == .string("openid"), "\(narrow.text)")
            let wide = try await Self.post(user, "/oauth/token", client, ["grant_type": "refresh_token", "refresh_token": narrow.object.string("refresh_token"), "scope": "openid phone"])
            #expect(Self.error(wide) == "invalid_scope")
            // A refresh token is the client's: another client of the app gets invalid_grant.
            let other = try await Self.client(user)
            #expect(Self.error(try await Self.refresh(user, other, narrow.object.string("refresh_token"))) == "invalid_grant")
        }
    }

    @Test("20 concurrent refreshes of one token all succeed with the same successor, and the family lives on")
    func concurrentRefreshes() async throws {
        try await TestEnvironment.withLiveServer { api in
            let user = try await Self.signIn(api, "OAuthToken race")
            let client = try await Self.client(user)
            let first = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let rt1 = first.object.string("refresh_token")
            let replies = try await withThrowingTaskGroup(of: API.Reply.self) { group in
                for _ in 0..<20 { group.addTask { try await Self.refresh(user, client, rt1) } }
                var all: [API.Reply] = []
                for try await reply in group { all.append(reply) }
                return all
            }
            #expect(replies.allSatisfy { $0.status == .ok }, "\(replies.filter { $0.status != .ok }.map(\.text))")
            let successors = Set(replies.map { $0.object.string("refresh_token") })
            #expect(successors.count == 1)
            let next = try await Self.refresh(user, client, try #require(successors.first))
            #expect(next.status == .ok, "\(next.text)")
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE id = \(user.sid)") == 1)
        }
    }

    @Test("a rotated token presented after the grace window revokes the session, with session.revoked (refresh_token_reuse)")
    func reuseAfterGrace() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken reuse detection")
            let client = try await Self.client(user, grace: 5)
            let first = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let rt1 = first.object.string("refresh_token")
            let second = try await Self.refresh(user, client, rt1)
            let rt2 = second.object.string("refresh_token")
            // rt1 was rotated a minute ago: well past the 5-second window.
            try await TestEnvironment.sql(
                "UPDATE oauth_refresh_tokens SET rotated_at = now() - interval '1 minute' WHERE token_hash = \(Secrets.sha256(rt1))")
            let replay = try await Self.refresh(user, client, rt1)
            #expect(replay.status == .badRequest && Self.error(replay) == "invalid_grant", "\(replay.text)")
            #expect(try await Self.count("SELECT count(*)::int FROM sessions WHERE id = \(user.sid)") == 0)
            let event = try await TestEnvironment.value(
                "SELECT body FROM events WHERE app_ref = \(user.appRef) AND type = 'session.revoked' ORDER BY id DESC LIMIT 1", as: String.self)
            let data = try #require(event.flatMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) }?["data"])
            #expect(data["reason"] == .string("refresh_token_reuse") && data["sessionIds"] == .array([.string(user.sid.uuidString.lowercased())]))
            // The whole family is gone, and so is everything else on the session.
            #expect(Self.error(try await Self.refresh(user, client, rt2)) == "invalid_grant")
            #expect(try await Self.userinfo(user, second.object.string("access_token")).status == .unauthorized)
            #expect(try await user.sdk.get("/api/appuser/getUser", accessToken: user.accessToken).status != .ok)
        }
    }

    @Test("a refresh token expires with the grant's absolute lifetime and after its sliding lifetime without use")
    func expiry() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken expiry")
            let client = try await Self.client(user, sliding: 3600, absolute: 7200)
            let first = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let rt1 = first.object.string("refresh_token")
            let expires = try #require(try await TestEnvironment.value(
                "SELECT extract(epoch FROM expires_at - now())::float8 FROM oauth_refresh_tokens WHERE token_hash = \(Secrets.sha256(rt1))", as: Double.self))
            #expect(expires > 3500 && expires <= 3600)
            // Sliding: unused for longer than its lifetime.
            try await TestEnvironment.sql("UPDATE oauth_refresh_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = \(Secrets.sha256(rt1))")
            #expect(Self.error(try await Self.refresh(user, client, rt1)) == "invalid_grant")

            // Absolute: however recently used, the family ends with its grant.
            let again = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let rt = again.object.string("refresh_token")
            try await TestEnvironment.sql("UPDATE oauth_grants SET absolute_expires_at = now() - interval '1 second' WHERE session_id = \(user.sid)")
            let late = try await Self.refresh(user, client, rt)
            #expect(Self.error(late) == "invalid_grant" && late.text.contains("expired"), "\(late.text)")
            // A successor never outlives the grant: with 2 hours left, it expires with the grant, not in a day.
            let short = try await Self.client(user, sliding: 86400, absolute: 7200)
            let issued = try await Self.exchange(user, short, code: try await Self.code(user, short))
            let successor = try await Self.refresh(user, short, issued.object.string("refresh_token"))
            let left = try #require(try await TestEnvironment.value(
                """
                SELECT extract(epoch FROM expires_at - now())::float8 FROM oauth_refresh_tokens
                WHERE token_hash = \(Secrets.sha256(successor.object.string("refresh_token")))
                """, as: Double.self))
            #expect(left <= 7200 && left > 7000)
        }
    }

    @Test("a password change and sign-out-everywhere end the refresh tokens and userinfo of the session")
    func revocationsEndOAuth() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken revocations")
            let client = try await Self.client(user)
            let tokens = try await Self.exchange(user, client, code: try await Self.code(user, client))
            #expect(try await Self.userinfo(user, tokens.object.string("access_token")).status == .ok)
            let changed = try await user.sdk.post(
                "/api/appuser/changePassword", [("password", SDK.md5("one")), ("newPassword", SDK.md5("two"))], accessToken: user.accessToken)
            #expect(changed.status == .ok, "\(changed.text)")
            // changePassword keeps the caller's own session: the OAuth grant lives on it.
            #expect(try await Self.userinfo(user, tokens.object.string("access_token")).status == .ok)

            // A second device signed in through OAuth loses everything on a password change from the first.
            let device = try await user.sdk.login(user.handle, "two").object.string("access-token")
            let deviceSid = try #require(UUID(uuidString: Base64URL.jwtPart(device, 1)?["sid"]?.stringValue ?? ""))
            let onDevice = SignedIn(
                api: api, sdk: user.sdk, appId: user.appId, appRef: user.appRef, handle: user.handle, password: "two", accessToken: device,
                sid: deviceSid, userId: user.userId)
            let deviceTokens = try await Self.exchange(onDevice, client, code: try await Self.code(onDevice, client))
            try #require(deviceTokens.status == .ok)
            _ = try await user.sdk.post(
                "/api/appuser/changePassword", [("password", SDK.md5("two")), ("newPassword", SDK.md5("three"))], accessToken: user.accessToken)
            #expect(Self.error(try await Self.refresh(onDevice, client, deviceTokens.object.string("refresh_token"))) == "invalid_grant")
            #expect(try await Self.userinfo(onDevice, deviceTokens.object.string("access_token")).status == .unauthorized)

            // Sign out everywhere (admin) ends the first one too.
            let out = try await api.call(.post, "/admin/v1/apps/\(user.appId)/users/\(user.userId.uuidString.lowercased())/revoke-sessions")
            #expect(out.status == .ok, "\(out.text)")
            #expect(Self.error(try await Self.refresh(user, client, tokens.object.string("refresh_token"))) == "invalid_grant")
            #expect(try await Self.userinfo(user, tokens.object.string("access_token")).status == .unauthorized)
        }
    }

    // MARK: client_credentials, token exchange

    @Test("client_credentials: a confidential client gets a token for itself (sub = client_id), no refresh or ID token; public clients may not")
    func clientCredentials() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken client credentials")
            let backend = try await Self.client(user, confidential: true, grants: ["client_credentials"], scopes: ["orders.read", "openid"])
            let reply = try await Self.post(user, "/oauth/token", backend, ["grant_type": "client_credentials"])
            try #require(reply.status == .ok, "\(reply.text)")
            #expect(reply.object["refresh_token"] == nil && reply.object["id_token"] == nil && reply.object["scope"] == .string("orders.read"))
            let claims = try await Self.verified(user, reply.object.string("access_token"))
            #expect(claims["sub"] == .string(backend.clientId) && claims["sid"] == nil)
            #expect(Self.error(try await Self.post(user, "/oauth/token", backend, ["grant_type": "client_credentials", "scope": "openid"])) == "invalid_scope")
            // RFC 8707: a resource becomes the audience.
            let api2 = try await Self.post(user, "/oauth/token", backend, ["grant_type": "client_credentials", "resource": "https://api.example.com/"])
            #expect(Base64URL.jwtPart(api2.object.string("access_token"), 1)?["aud"] == .string("https://api.example.com/"))
            // Userinfo is for users.
            #expect(try await Self.userinfo(user, reply.object.string("access_token")).status == .unauthorized)

            let wrongSecret = Client(ref: backend.ref, clientId: backend.clientId, secret: "nope")
            let refused = try await Self.post(user, "/oauth/token", wrongSecret, ["grant_type": "client_credentials"])
            #expect(refused.status == .unauthorized && Self.error(refused) == "invalid_client")
            let native = try await Self.client(user, grants: ["client_credentials"])
            #expect(Self.error(try await Self.post(user, "/oauth/token", native, ["grant_type": "client_credentials"])) == "unauthorized_client")
            let noGrant = try await Self.client(user, grants: ["authorization_code"])
            #expect(Self.error(try await Self.refresh(user, noGrant, "crt_x")) == "unauthorized_client")
            #expect(Self.error(try await Self.post(user, "/oauth/token", noGrant, ["grant_type": "password"])) == "unsupported_grant_type")
        }
    }

    @Test("token exchange turns an end-user API access token into OAuth tokens on the same session, extending it")
    func tokenExchange() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken exchange")
            let client = try await Self.client(user)
            let before = try #require(try await TestEnvironment.value("SELECT expires_at FROM sessions WHERE id = \(user.sid)", as: Date.self))
            let fields = [
                "grant_type": OAuthGrantType.tokenExchange.rawValue, "subject_token": user.accessToken,
                "subject_token_type": "urn:ietf:params:oauth:token-type:access_token", "scope": "openid email",
            ]
            let reply = try await Self.post(user, "/oauth/token", client, fields)
            try #require(reply.status == .ok, "\(reply.text)")
            #expect(reply.object["issued_token_type"] == .string("urn:ietf:params:oauth:token-type:access_token"))
            let claims = try await Self.verified(user, reply.object.string("access_token"))
            #expect(claims["sid"] == .string(user.sid.uuidString.lowercased()) && claims["sub"] == .string(user.userId.uuidString.lowercased()))
            let id = try await Self.verified(user, reply.object.string("id_token"))
            #expect(id["amr"] == .array([.string("pwd")]) && id["email"] == .string(user.handle))
            let after = try #require(try await TestEnvironment.value("SELECT expires_at FROM sessions WHERE id = \(user.sid)", as: Date.self))
            #expect(after > before)
            #expect(try await Self.refresh(user, client, reply.object.string("refresh_token")).status == .ok)
            #expect(try await Self.userinfo(user, reply.object.string("access_token")).status == .ok)

            var garbage = fields
            garbage["subject_token"] = "not-a-token"
            #expect(Self.error(try await Self.post(user, "/oauth/token", client, garbage)) == "invalid_grant")
            // Another app's token is not this app's.
            let stranger = try await Self.signIn(api, "OAuthToken exchange other")
            var foreign = fields
            foreign["subject_token"] = stranger.accessToken
            #expect(Self.error(try await Self.post(user, "/oauth/token", client, foreign)) == "invalid_grant")
            var unknownType = fields
            unknownType["subject_token_type"] = "urn:example:unknown"
            #expect(Self.error(try await Self.post(user, "/oauth/token", client, unknownType)) == "invalid_request")
            // An ended session cannot be exchanged.
            let ended = try await api.call(
                .delete, "/admin/v1/apps/\(user.appId)/users/\(user.userId.uuidString.lowercased())/sessions/\(user.sid.uuidString.lowercased())")
            #expect(ended.status == .ok || ended.status == .noContent, "\(ended.text)")
            #expect(Self.error(try await Self.post(user, "/oauth/token", client, fields)) == "invalid_grant")
        }
    }

    // MARK: revocation, introspection

    @Test("introspection (confidential clients only) and revocation of refresh and access tokens; unknown tokens answer 200")
    func revokeAndIntrospect() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken revoke")
            let client = try await Self.client(user)
            let backend = try await Self.client(user, confidential: true, grants: ["client_credentials"], scopes: ["orders.read"])
            let tokens = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let access = tokens.object.string("access_token"), refresh = tokens.object.string("refresh_token")

            let inspected = try await Self.post(user, "/oauth/introspect", backend, ["token": access])
            #expect(inspected.object["active"] == .bool(true) && inspected.object["client_id"] == .string(client.clientId), "\(inspected.text)")
            #expect(inspected.object["sid"] == .string(user.sid.uuidString.lowercased()) && inspected.object["token_type"] == .string("Bearer"))
            let inspectedRefresh = try await Self.post(user, "/oauth/introspect", backend, ["token": refresh, "token_type_hint": "refresh_token"])
            #expect(inspectedRefresh.object["active"] == .bool(true) && inspectedRefresh.object["token_type"] == .string("refresh_token"))
            let junk = try await Self.post(user, "/oauth/introspect", backend, ["token": "junk"])
            #expect(junk.status == .ok && junk.object == ["active": .bool(false)])
            // A public client may not introspect.
            let nosy = try await Self.post(user, "/oauth/introspect", client, ["token": access])
            #expect(nosy.status == .unauthorized && Self.error(nosy) == "invalid_client")

            // Unknown tokens, and other clients' tokens, answer 200 and change nothing.
            #expect(try await Self.post(user, "/oauth/revoke", client, ["token": "crt_unknown"]).status == .ok)
            #expect(try await Self.post(user, "/oauth/revoke", backend, ["token": refresh]).status == .ok)
            #expect(try await Self.refresh(user, client, refresh).status == .ok)
            #expect(Self.error(try await Self.post(user, "/oauth/revoke", client, [:])) == "invalid_request")

            // Revoking the refresh token ends the grant: its access token is inactive at once.
            let second = try await Self.exchange(user, client, code: try await Self.code(user, client))
            let revoked = try await Self.post(user, "/oauth/revoke", client, ["token": second.object.string("refresh_token")])
            #expect(revoked.status == .ok)
            #expect(try await Self.post(user, "/oauth/introspect", backend, ["token": second.object.string("access_token")]).object["active"] == .bool(false))
            #expect(try await Self.userinfo(user, second.object.string("access_token")).status == .unauthorized)

            // Revoking an access token ends its grant too (and its refresh tokens).
            let third = try await Self.exchange(user, client, code: try await Self.code(user, client))
            #expect(try await Self.post(user, "/oauth/revoke", client, ["token": third.object.string("access_token"), "token_type_hint": "access_token"]).status == .ok)
            #expect(Self.error(try await Self.refresh(user, client, third.object.string("refresh_token"))) == "invalid_grant")
            let deadRefresh = try await Self.post(user, "/oauth/introspect", backend, ["token": third.object.string("refresh_token")])
            #expect(deadRefresh.object == ["active": .bool(false)])
            // The session itself lives on.
            #expect(try await user.sdk.get("/api/appuser/getUser", accessToken: user.accessToken).status == .ok)
        }
    }

    // MARK: DPoP

    /// A DPoP proof by `signer` for `method` on the issuer's `path`, with the app's current nonce, and
    /// `ath` when it presents an access token.
    static func proof(_ user: SignedIn, _ signer: DPoPTests.Signer, method: String = "POST", path: String = "/oauth/token", accessToken: String? = nil) async throws -> String {
        let services = try await TestEnvironment.services()
        let header: [String: JSONValue] = ["typ": .string("dpop+jwt"), "alg": .string(signer.alg), "jwk": .object(signer.jwk)]
        var claims: [String: JSONValue] = [
            "jti": .string(UUID().uuidString), "htm": .string(method), "htu": .string("http://localhost:8080/apps/\(user.appId)\(path)"),
            "iat": .int(Int(Date().timeIntervalSince1970)), "nonce": .string(services.oauth.dpop.currentNonce(appRef: user.appRef) ?? ""),
        ]
        if let accessToken { claims["ath"] = .string(Base64URL.encode(SHA256.hash(data: Data(accessToken.utf8)))) }
        let input = DPoPTests.json(header) + "." + DPoPTests.json(claims)
        return input + "." + Base64URL.encode(try signer.sign(Array(input.utf8)))
    }

    /// The RFC 7638 thumbprint of a P-256 signer's key.
    static func thumbprint(_ signer: DPoPTests.Signer) -> String {
        let jwk = signer.jwk
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(jwk["x"]?.stringValue ?? "")","y":"\#(jwk["y"]?.stringValue ?? "")"}"#
        return Base64URL.encode(SHA256.hash(data: Data(canonical.utf8)))
    }

    static func dpop(_ proof: String) -> HTTPFields { [HTTPField.Name("DPoP")!: proof] }

    @Test("DPoP: a proof binds the grant and its tokens (cnf.jkt, token_type DPoP); required clients, bound codes and bound refreshes need the key; userinfo checks ath")
    func dpopBinding() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await Self.signIn(api, "OAuthToken DPoP")
            let client = try await Self.client(user, dpopRequired: true)
            let key = DPoPTests.Signer.p256(), other = DPoPTests.Signer.p256()
            let code = try await Self.code(user, client)
            // No proof from a client that must send one: refused with a nonce, and the code is not spent.
            let bare = try await Self.exchange(user, client, code: code)
            #expect(bare.status == .badRequest && Self.error(bare) == "invalid_dpop_proof" && bare.headers[HTTPField.Name("DPoP-Nonce")!] != nil, "\(bare.text)")
            let fields = ["grant_type": "authorization_code", "code": code, "code_verifier": Self.verifier, "redirect_uri": Self.redirectURI]
            let bound = try await Self.post(user, "/oauth/token", client, fields, headers: Self.dpop(try await Self.proof(user, key)))
            try #require(bound.status == .ok, "\(bound.text)")
            #expect(bound.object["token_type"] == .string("DPoP") && bound.headers[HTTPField.Name("DPoP-Nonce")!] != nil)
            let access = bound.object.string("access_token"), refresh = bound.object.string("refresh_token")
            let jkt = Self.thumbprint(key)
            #expect(try await Self.verified(user, access)["cnf"] == .object(["jkt": .string(jkt)]))
            #expect(try await TestEnvironment.value("SELECT dpop_jkt FROM oauth_grants WHERE session_id = \(user.sid)", as: String.self) == jkt)

            let backend = try await Self.client(user, confidential: true, grants: ["client_credentials"], scopes: ["orders.read"])
            let inspected = try await Self.post(user, "/oauth/introspect", backend, ["token": access])
            #expect(inspected.object["token_type"] == .string("DPoP") && inspected.object["cnf"] == .object(["jkt": .string(jkt)]))

            // Userinfo: not as a bearer token, not without a proof, not with a proof of another token or key.
            let url = "/apps/\(user.appId)/oauth/userinfo"
            #expect(try await Self.userinfo(user, access).status == .unauthorized)
            var headers: HTTPFields = [.authorization: "DPoP \(access)"]
            #expect(try await api.call(.get, url, token: nil, headers: headers).status == .unauthorized)
            headers[HTTPField.Name("DPoP")!] = try await Self.proof(user, key, method: "GET", path: "/oauth/userinfo", accessToken: "another")
            #expect(try await api.call(.get, url, token: nil, headers: headers).status == .unauthorized)
            headers[HTTPField.Name("DPoP")!] = try await Self.proof(user, other, method: "GET", path: "/oauth/userinfo", accessToken: access)
            #expect(try await api.call(.get, url, token: nil, headers: headers).status == .unauthorized)
            headers[HTTPField.Name("DPoP")!] = try await Self.proof(user, key, method: "GET", path: "/oauth/userinfo", accessToken: access)
            let info = try await api.call(.get, url, token: nil, headers: headers)
            #expect(info.status == .ok && info.object["sub"] == .string(user.userId.uuidString.lowercased()), "\(info.text)")

            // A bound refresh token needs a proof by the same key.
            let refreshFields = ["grant_type": "refresh_token", "refresh_token": refresh]
            #expect(Self.error(try await Self.post(user, "/oauth/token", client, refreshFields)) == "invalid_dpop_proof")
            let stolen = try await Self.post(user, "/oauth/token", client, refreshFields, headers: Self.dpop(try await Self.proof(user, other)))
            #expect(Self.error(stolen) == "invalid_grant", "\(stolen.text)")
            let refreshed = try await Self.post(user, "/oauth/token", client, refreshFields, headers: Self.dpop(try await Self.proof(user, key)))
            #expect(refreshed.status == .ok && refreshed.object["token_type"] == .string("DPoP"), "\(refreshed.text)")
            #expect(try await Self.verified(user, refreshed.object.string("access_token"))["cnf"] == .object(["jkt": .string(jkt)]))

            // A code bound to a key at the authorization endpoint (dpop_jkt) takes a proof by that key only.
            let plain = try await Self.client(user)
            let boundCode = try await Self.code(user, plain, dpopJKT: jkt)
            var codeFields = fields
            codeFields["code"] = boundCode
            let wrongKey = try await Self.post(user, "/oauth/token", plain, codeFields, headers: Self.dpop(try await Self.proof(user, other)))
            #expect(Self.error(wrongKey) == "invalid_grant", "\(wrongKey.text)")
            let boundCode2 = try await Self.code(user, plain, dpopJKT: jkt)
            codeFields["code"] = boundCode2
            #expect(Self.error(try await Self.post(user, "/oauth/token", plain, codeFields)) == "invalid_grant")
            let boundCode3 = try await Self.code(user, plain, dpopJKT: jkt)
            codeFields["code"] = boundCode3
            let right = try await Self.post(user, "/oauth/token", plain, codeFields, headers: Self.dpop(try await Self.proof(user, key)))
            #expect(right.status == .ok && right.object["token_type"] == .string("DPoP"), "\(right.text)")
            // A client that need not use DPoP gets bearer tokens without a proof.
            let unbound = try await Self.exchange(user, plain, code: try await Self.code(user, plain))
            #expect(unbound.object["token_type"] == .string("Bearer") && unbound.headers[HTTPField.Name("DPoP-Nonce")!] == nil)
        }
    }
}
