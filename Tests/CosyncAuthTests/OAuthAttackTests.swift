import CosyncAuth
import Foundation
import HTTPTypes
import Testing

/// Attacks on the OAuth provider (issue 22) that the security review found to succeed. Each test states
/// what SHOULD hold; while the weakness is there, its failing expectation is wrapped in
/// `withKnownIssue`, so the suite stays green. When a finding is fixed, Swift Testing reports "known
/// issue was not recorded" for its test: remove the `withKnownIssue` wrapper then.
@Suite("OAuth: attacks found by the security review (known issues until fixed)")
struct OAuthAttackTests {
    typealias T = OAuthTokenTests
    typealias A = OAuthAuthorizeTests

    /// `post` of OAuthTokenTests, from a client at `address` (through the trusted proxy on 127.0.0.1).
    static func post(_ user: T.SignedIn, _ path: String, _ client: T.Client, _ fields: [String: String], secret: String?, from address: String)
        async throws -> API.Reply
    {
        var headers: HTTPFields = [HTTPField.Name("x-forwarded-for")!: address]
        let encode = { (s: String) in s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? s }
        headers[.authorization] = "Basic " + Data("\(encode(client.clientId)):\(encode(secret ?? ""))".utf8).base64EncodedString()
        return try await user.api.call(
            .post, "/apps/\(user.appId)\(path)", token: nil, body: T.form(fields), headers: headers, contentType: "application/x-www-form-urlencoded")
    }

    // F1 (high, availability; fixed): the routes called OAuthClients.authenticate without
    // `clientAddress`, so only a client-wide counter (200 failures) existed: one address that sent 200
    // wrong secrets locked the client out for everyone. Now failures count per client and address only.
    @Test("F1: one address's failed client authentications do not lock the client out for its own backend")
    func clientLockoutFromOneAddress() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await T.signIn(api, "Attack F1")
            let client = try await T.client(user, confidential: true, grants: ["client_credentials"], scopes: ["api:read"])
            for _ in 0..<200 {
                _ = try await Self.post(user, "/oauth/token", client, ["grant_type": "client_credentials"], secret: "wrong", from: "203.0.113.9")
            }
            let legit = try await Self.post(user, "/oauth/token", client, ["grant_type": "client_credentials"], secret: client.secret, from: "198.51.100.7")
            #expect(legit.status == .ok, "the client's own backend is locked out: \(legit.status) \(legit.text)")
        }
    }

    // F2 (medium; fixed: tokens carry `gid`, the grant they were issued under, and only that grant keeps
    // them live): an access token was live while its client held ANY grant on its session
    // (OAuthGrantStore.liveUser), and carries no grant id. A token revoked through RFC 7009 (or by a
    // replayed code) comes back to life when the same client opens a new grant on the same session
    // (a silent re-authorization through the browser's single sign-on, or another code exchange).
    @Test("F2: an access token revoked with RFC 7009 stays dead after the client re-authorizes on the same session")
    func revokedAccessTokenResurrects() async throws {
        try await TestEnvironment.withAPI { api in
            let user = try await T.signIn(api, "Attack F2")
            let client = try await T.client(user)
            let first = try await T.exchange(user, client, code: try await T.code(user, client))
            try #require(first.status == .ok, "\(first.text)")
            let revoked = first.object.string("access_token")
            let revoke = try await T.post(user, "/oauth/revoke", client, ["token": revoked])
            try #require(revoke.status == .ok)
            try #require(try await T.userinfo(user, revoked).status == .unauthorized)

            // The same client, the same session: a new code (what single sign-on issues) and its exchange.
            let second = try await T.exchange(user, client, code: try await T.code(user, client))
            try #require(second.status == .ok, "\(second.text)")
            let again = try await T.userinfo(user, revoked)
            #expect(again.status == .unauthorized, "the revoked access token is live again: \(again.status)")
        }
    }

    // F3 (low): logout with an id_token_hint deletes the browser session of the cookie the browser sent
    // whoever it belongs to (OAuthLogout.answer deletes OAuthBrowserSessionStore by the cookie
    // unconditionally, and AuthorizeRoutes.logout clears the cookie). Any user of the app holds an ID
    // token; a cross-site top-level GET (SameSite=Lax sends the cookie) to
    // /oauth/logout?id_token_hint=<attacker's own ID token> ends the victim's single sign-on.
    @Test("F3: another user's id_token_hint does not end the victim browser's single sign-on")
    func logoutWithForeignHint() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await A.fixture(api)
            let (_, challenge) = A.pkce()
            var victim = A.Browser(api: api)
            _ = try await A.signIn(f, &victim, challenge: challenge)

            // The attacker: another user of the same app, with its own session and an ID token for it.
            let handle = "attacker\(Secrets.hexIdentifier().prefix(8))@example.com"
            try #require(try await f.sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let token = try await f.sdk.login(handle, "pw").object.string("access-token")
            let claims = try #require(Base64URL.jwtPart(token, 1))
            let hint = try await A.idToken(
                f, sub: try #require(UUID(uuidString: claims["uid"]?.stringValue ?? "")),
                sid: try #require(UUID(uuidString: claims["sid"]?.stringValue ?? "")))

            let out = try await victim.get("\(f.base)/oauth/logout?\(A.form([("id_token_hint", hint)]))")
            #expect(out.status == .ok)
            #expect(victim.cookies["cosync-sso-\(f.appId)"] != nil, "the victim's browser-session cookie was cleared by a foreign hint")
            // The client is public, so a live browser session answers prompt=none with
            // interaction_required (F4); an ended one would be login_required.
            let silent = try await victim.get("\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, extra: [("prompt", "none")]))")
            #expect(A.queryItems(silent.headers[.location] ?? "")["error"] == "interaction_required",
                    "the victim's single sign-on was ended by a foreign hint: \(silent.headers[.location] ?? "")")
            // The hinted session (the attacker's own) still ends.
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM sessions WHERE id = \(try #require(UUID(uuidString: claims["sid"]?.stringValue ?? "")))", as: Int.self) == 0)
        }
    }

    // F4 (medium, design): single sign-on hands a code to a PUBLIC client without any user interaction
    // (OAuthAuthorization.answer: a fresh browser session and no prompt=login issues at once). RFC 8252
    // §8.6: a public client's identity cannot be assured (any local program can listen on a loopback
    // port, any app can claim a private-use scheme), so the server should not process its requests
    // automatically. A malicious local program opens the browser with the legitimate client_id, its
    // own loopback port and its own PKCE verifier, and silently receives a code it can exchange.
    @Test("F4: a signed-in browser does not hand a public client's code to any loopback port without the user's interaction")
    func silentCodeToPublicClient() async throws {
        try await TestEnvironment.withAPI { api in
            let f = try await A.fixture(api, redirectURIs: ["http://127.0.0.1/callback"])
            let (_, challenge) = A.pkce()
            var browser = A.Browser(api: api)
            let start = try await browser.get(
                "\(f.base)/oauth/authorize?\(f.authorizeQuery(challenge: challenge, drop: ["redirect_uri"]))")
            try #require(start.status == .seeOther)
            let page = try await browser.get(try #require(start.headers[.location]))
            let csrf = try #require(A.hidden("csrf", in: page.text)), reference = try #require(A.hidden("r", in: page.text))
            let signed = try await browser.post("\(f.base)/oauth/login", [("r", reference), ("csrf", csrf), ("handle", f.handle), ("password", "pw")])
            try #require(signed.status == .seeOther, "\(signed.text)")
            _ = try await browser.get(try #require(signed.headers[.location]))

            // The attacker's own PKCE pair and loopback port, the legitimate client's id.
            let (_, attackerChallenge) = A.pkce()
            let query = A.form([
                ("response_type", "code"), ("client_id", f.clientId), ("redirect_uri", "http://127.0.0.1:49999/callback"), ("scope", "openid profile"),
                ("code_challenge", attackerChallenge), ("code_challenge_method", "S256"),
            ])
            let silent = try await browser.get("\(f.base)/oauth/authorize?\(query)")
            #expect(A.queryItems(silent.headers[.location] ?? "")["code"] == nil, "a code went to an arbitrary loopback port silently")
            // The user is asked instead ("Continue as", a CSRF-protected form).
            #expect(silent.status == .seeOther && silent.headers[.location]?.contains("/oauth/login/continue?r=") == true, "\(silent.status)")
        }
    }
}
