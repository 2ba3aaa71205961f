import CosyncAuth
import Foundation
import HTTPTypes
import Testing

/// Passkeys in the Portal (issue 23) at the HTTP level, with a software authenticator against the
/// test server's relying party (public URL http://localhost:8080: RP ID `localhost`): enrolment
/// after an invitation, sign-in without an e-mail, the account page (add, list, remove), the fresh
/// sign-in, and the refusals (CSRF, origin, replay, a bad signature counted and locked, the last
/// factor). The browser walk with Chromium's virtual authenticator is Tests/system/portal/walk.py.
@Suite("Portal passkeys")
struct PortalPasskeyTests {
    typealias Browser = PortalPageTests.Browser
    static let rpId = "localhost"
    static let origin = "http://localhost:8080"

    static func authenticator() -> SoftwareAuthenticator {
        var authenticator = SoftwareAuthenticator(rpId: rpId, origin: origin)
        authenticator.countsSignatures = true
        return authenticator
    }

    /// A JSON call of the page's script, with the browser's cookies.
    static func post(_ browser: Browser, _ path: String, _ object: [String: JSONValue], headers: HTTPFields = [:]) async throws -> API.Reply {
        var fields = browser.cookieHeader
        for field in headers { fields.append(field) }
        let body = String(decoding: try JSONEncoder().encode(JSONValue.object(object)), as: UTF8.self)
        let reply = try await browser.api.call(.post, path, token: nil, body: body, headers: fields, contentType: "application/json")
        browser.keep(reply)
        return reply
    }

    /// The `data-csrf` of the button with id `id`.
    static func buttonToken(_ html: String, id: String) -> String? {
        guard let start = html.range(of: "id=\"\(id)\"") else { return nil }
        let rest = html[start.upperBound...]
        guard let attribute = rest.range(of: "data-csrf=\"") else { return nil }
        let value = rest[attribute.upperBound...]
        return value.firstIndex(of: "\"").map { String(value[..<$0]) }
    }

    static func challenge(_ reply: API.Reply) throws -> [UInt8] {
        let text = try #require(reply.object["publicKey"]?["challenge"]?.stringValue, "\(reply.status) \(reply.text)")
        return try #require(WebAuthn.decodeBase64URL(text))
    }

    static func registration(_ authenticator: SoftwareAuthenticator, _ challenge: [UInt8]) throws -> JSONValue {
        let json = SoftwareAuthenticator.registrationJSON(authenticator.register(challenge: challenge))
        return try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
    }

    static func assertion(_ authenticator: inout SoftwareAuthenticator, _ challenge: [UInt8], tamper: SoftwareAuthenticator.Tamper = .init(), userHandle: UUID? = nil)
        throws -> JSONValue
    {
        let handle = userHandle.map { id in WebAuthn.encodeBase64URL(withUnsafeBytes(of: id.uuid) { Array($0) }) }
        let json = SoftwareAuthenticator.assertionJSON(authenticator.assert(challenge: challenge, userHandle: handle, tamper: tamper))
        return try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
    }

    /// Signs in with `authenticator` from the sign-in page of a new browser; the browser and the reply.
    static func passkeySignIn(_ api: API, _ authenticator: inout SoftwareAuthenticator, accountId: UUID? = nil) async throws -> (Browser, API.Reply) {
        let browser = Browser(api: api)
        let page = try await browser.get("/portal/sign-in")
        #expect(page.text.contains("id=\"passkey-sign-in\""))
        let token = try #require(buttonToken(page.text, id: "passkey-sign-in"))
        let client = from(address())
        let options = try await post(browser, "/portal/passkey/sign-in/options", ["csrf": .string(token)], headers: client)
        #expect(options.status == .ok, "\(options.text)")
        #expect(options.object["publicKey"]?["rpId"] == .string(rpId))
        #expect(options.object["publicKey"]?["allowCredentials"] == .array([]), "no e-mail: a discoverable sign-in")
        let credential = try assertion(&authenticator, try challenge(options), userHandle: accountId)
        let finish = try await post(browser, "/portal/passkey/sign-in/finish", ["csrf": .string(token), "credential": credential], headers: client)
        return (browser, finish)
    }

    /// A client address of its own (sent as X-Forwarded-For; the test server trusts 127.0.0.1 as a proxy),
    /// so the per-address limits of one test do not meet another's.
    static func address() -> String {
        "10.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...254)).\(UInt8.random(in: 1...254))"
    }

    static func from(_ address: String) -> HTTPFields { [HTTPField.Name("x-forwarded-for")!: address] }

    /// Adds a passkey of `authenticator` to the session's account through the core (no page).
    static func addByCore(_ session: PortalSession, _ authenticator: SoftwareAuthenticator) async throws {
        let passkeys = try await TestEnvironment.services().portalPasskeys
        let options = try await passkeys.addOptions(session: session)
        let challenge = try #require(options["challenge"]?.stringValue.flatMap { WebAuthn.decodeBase64URL($0) })
        let credential = try #require(try registration(authenticator, challenge).objectValue)
        try await passkeys.add(session: session, credential: credential, name: "Planted")
    }

    static func invited(_ api: API) async throws -> (code: String, email: String, appId: String) {
        let services = try await TestEnvironment.services()
        let (operatorSession, _) = try await PortalPageTests.account(operator: true)
        let appId = try await api.createApp("Portal passkey app").string("appId")
        let email = PortalPageTests.unique("passkey")
        let code = try await services.portal.invite(email: email, isOperator: false, appId: appId, role: .editor, by: operatorSession)
        return (code, email, appId)
    }

    @Test("an invited developer enrols a passkey instead of TOTP, signs out, and signs in with it without an e-mail")
    func enrolAndSignIn() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (code, email, appId) = try await Self.invited(api)
            let browser = Browser(api: api)
            let invite = try await browser.get("/portal/invite/\(code)")
            let inviteToken = try #require(PortalPageTests.csrf(invite.text))
            let password = "correct horse battery staple"
            let accepted = try await browser.post(
                "/portal/invite/\(code)", [("password", password), ("password-confirm", password), ("csrf", inviteToken)])
            #expect(accepted.status == .seeOther && accepted.headers[.location] == "/portal/enrol")
            let enrol = try await browser.get("/portal/enrol")
            #expect(enrol.status == .ok && enrol.text.contains("id=\"passkey-enrol\"") && enrol.text.contains("id=\"enrol-submit\""))
            PortalPageTests.expectNoInline(enrol.text, "enrol")
            let token = try #require(Self.buttonToken(enrol.text, id: "passkey-enrol"))

            // Without the token, or from another origin: refused.
            #expect(try await Self.post(browser, "/portal/passkey/enrol/options", [:]).status == .forbidden)
            let foreign = try await Self.post(
                browser, "/portal/passkey/enrol/options", ["csrf": .string(token)], headers: [.origin: "https://evil.example"])
            #expect(foreign.status == .forbidden)

            let options = try await Self.post(browser, "/portal/passkey/enrol/options", ["csrf": .string(token)])
            #expect(options.status == .ok, "\(options.text)")
            let publicKey = try #require(options.object["publicKey"])
            #expect(publicKey["rp"]?["id"] == .string(Self.rpId) && publicKey["user"]?["name"] == .string(email))
            #expect(publicKey["authenticatorSelection"]?["residentKey"] == .string("required"))
            var authenticator = Self.authenticator()
            let finish = try await Self.post(
                browser, "/portal/passkey/enrol/finish",
                ["csrf": .string(token), "credential": try Self.registration(authenticator, try Self.challenge(options)), "name": .string("Laptop")])
            #expect(finish.status == .ok && finish.object["location"] == .string("/portal"), "\(finish.text)")
            #expect(browser.cookies["cosync-portal"] != nil, "the enrolment signs in")
            let home = try await browser.get("/portal")
            #expect(home.status == .ok && home.text.contains("/portal/apps/\(appId)"))
            let accountId = try #require(
                try await TestEnvironment.value("SELECT id FROM portal_accounts WHERE email = \(email)", as: UUID.self))
            #expect(try await TestEnvironment.value(
                "SELECT proven_by FROM portal_sessions WHERE account_id = \(accountId)", as: String.self) == "passkey")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE actor = \("portal:" + email) AND action = 'portal.enrol' AND detail->>'method' = 'passkey'",
                as: Int.self) == 1)
            // The ticket is used up: the enrolment cannot run twice.
            #expect(try await Self.post(browser, "/portal/passkey/enrol/options", ["csrf": .string(token)]).status == .badRequest)

            // The password alone never starts a TOTP enrolment for an account with a passkey.
            let other = Browser(api: api)
            let signInToken = try #require(PortalPageTests.csrf(try await other.get("/portal/sign-in").text))
            let byPassword = try await other.post("/portal/sign-in", [("email", email), ("password", password), ("csrf", signInToken)])
            #expect(byPassword.status == .badRequest && byPassword.text.contains("passkey"), "\(byPassword.status)")
            #expect(other.cookies["cosync-portal"] == nil)

            // Sign out, then sign in with the passkey, no e-mail typed.
            let signOutToken = try #require(PortalPageTests.csrf(home.text, after: "id=\"sign-out\""))
            #expect(try await browser.post("/portal/sign-out", [("csrf", signOutToken)]).status == .seeOther)
            let (signedIn, reply) = try await Self.passkeySignIn(api, &authenticator, accountId: accountId)
            #expect(reply.status == .ok && reply.object["location"] == .string("/portal"), "\(reply.text)")
            #expect(try await signedIn.get("/portal").status == .ok)
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE actor = \("portal:" + email) AND action = 'portal.sign-in' AND status = 'success' AND detail->>'method' = 'passkey'",
                as: Int.self) == 1)
            #expect(try await TestEnvironment.value(
                "SELECT sign_count FROM portal_passkeys WHERE account_id = \(accountId)", as: Int64.self) == authenticator.counter.asInt64)

            // The only passkey of an account without TOTP cannot be removed.
            let account = try await signedIn.get("/portal/account")
            #expect(account.status == .ok && account.text.contains("id=\"passkeys\"") && account.text.contains("Laptop"))
            PortalPageTests.expectNoInline(account.text, "account")
            let passkeyId = try #require(
                try await TestEnvironment.value("SELECT id FROM portal_passkeys WHERE account_id = \(accountId)", as: UUID.self))
            let removeToken = try #require(PortalPageTests.csrf(account.text, after: "class=\"remove-passkey\""))
            let refused = try await signedIn.post("/portal/account/passkeys/\(passkeyId.uuidString.lowercased())/remove", [("csrf", removeToken)])
            #expect(refused.status == .conflict && refused.text.contains("id=\"form-error\""))
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM portal_passkeys WHERE account_id = \(accountId)", as: Int.self) == 1)
        }
    }

    @Test("a challenge works once, in the browser that asked; a bad signature is refused and counted against the address, which it locks, not the account")
    func refusals() async throws {
        try await TestEnvironment.withLiveServer { api in
            let services = try await TestEnvironment.services()
            let (session, cookie) = try await PortalPageTests.account()
            // A passkey added through the core.
            var authenticator = Self.authenticator()
            let browser = Browser(api: api, session: cookie)
            let account = try await browser.get("/portal/account")
            let token = try #require(Self.buttonToken(account.text, id: "passkey-add"))
            let options = try await Self.post(browser, "/portal/passkey/add/options", ["csrf": .string(token)])
            let added = try await Self.post(
                browser, "/portal/passkey/add/finish",
                ["csrf": .string(token), "credential": try Self.registration(authenticator, try Self.challenge(options))])
            #expect(added.status == .ok, "\(added.text)")
            #expect(try await services.portalPasskeys.list(session: session).count == 1)

            // Replay: the same assertion again finds no challenge.
            let anonymous = Browser(api: api)
            let page = try await anonymous.get("/portal/sign-in")
            let signInToken = try #require(Self.buttonToken(page.text, id: "passkey-sign-in"))
            let first = try await Self.post(anonymous, "/portal/passkey/sign-in/options", ["csrf": .string(signInToken)])
            let credential = try Self.assertion(&authenticator, try Self.challenge(first))
            let ok = try await Self.post(anonymous, "/portal/passkey/sign-in/finish", ["csrf": .string(signInToken), "credential": credential])
            #expect(ok.status == .ok, "\(ok.text)")
            let replay = try await Self.post(Browser(api: api), "/portal/passkey/sign-in/finish", ["csrf": .string(signInToken), "credential": credential])
            #expect(replay.status == .forbidden, "another browser: its token does not match")
            let again = Browser(api: api)
            again.cookies = anonymous.cookies.filter { $0.key == "cosync-portal-browser" }
            let replayed = try await Self.post(again, "/portal/passkey/sign-in/finish", ["csrf": .string(signInToken), "credential": credential])
            #expect(replayed.status == .badRequest && replayed.object["error"] == .string("expired"), "\(replayed.text)")

            // A challenge asked for by one browser does not sign in another.
            let thief = Browser(api: api)
            let thiefPage = try await thief.get("/portal/sign-in")
            let thiefToken = try #require(Self.buttonToken(thiefPage.text, id: "passkey-sign-in"))
            let victimOptions = try await Self.post(anonymous, "/portal/passkey/sign-in/options", ["csrf": .string(signInToken)])
            let stolen = try Self.assertion(&authenticator, try Self.challenge(victimOptions))
            let crossed = try await Self.post(thief, "/portal/passkey/sign-in/finish", ["csrf": .string(thiefToken), "credential": stolen])
            #expect(crossed.status == .badRequest && thief.cookies["cosync-portal"] == nil)

            // Bad signatures: refused, audited, counted against the client address (not the account: the
            // credential id is no secret); the twentieth locks the address, even for the right passkey.
            var tamper = SoftwareAuthenticator.Tamper()
            tamper.signature = { $0[$0.count - 1] ^= 0x01 }
            let attacker = Self.address()
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<20 {
                let options = try await Self.post(
                    anonymous, "/portal/passkey/sign-in/options", ["csrf": .string(signInToken)], headers: Self.from(Self.address()))
                let bad = try Self.assertion(&authenticator, try Self.challenge(options), tamper: tamper)
                statuses.append(
                    try await Self.post(
                        anonymous, "/portal/passkey/sign-in/finish", ["csrf": .string(signInToken), "credential": bad],
                        headers: Self.from(attacker)).status)
            }
            #expect(statuses.allSatisfy { $0 == .unauthorized }, "\(statuses)")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE actor = \(session.auditActor) AND action = 'portal.sign-in' AND status = 'error' AND detail->>'method' = 'passkey'",
                as: Int.self) == 20)
            // The address is locked: even the right passkey waits there.
            let lastOptions = try await Self.post(
                anonymous, "/portal/passkey/sign-in/options", ["csrf": .string(signInToken)], headers: Self.from(Self.address()))
            let right = try Self.assertion(&authenticator, try Self.challenge(lastOptions))
            let waiting = try await Self.post(
                anonymous, "/portal/passkey/sign-in/finish", ["csrf": .string(signInToken), "credential": right], headers: Self.from(attacker))
            #expect(waiting.status == .tooManyRequests, "\(waiting.text)")
            // The account is not locked: from another address its passkey signs in.
            let (_, elsewhere) = try await Self.passkeySignIn(api, &authenticator)
            #expect(elsewhere.status == .ok, "\(elsewhere.text)")
        }
    }

    @Test("the account page adds and lists passkeys; removing one needs a fresh sign-in, which a passkey gives")
    func accountPage() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (session, cookie) = try await PortalPageTests.account()
            let browser = Browser(api: api, session: cookie)
            let page = try await browser.get("/portal/account")
            #expect(page.status == .ok && page.text.contains("id=\"passkey-add\"") && page.text.contains("id=\"nav-account\""))
            #expect(page.text.contains("id=\"no-passkeys\""))
            let token = try #require(Self.buttonToken(page.text, id: "passkey-add"))
            // The sign-out form's token is not the account page's.
            let signOutToken = try #require(PortalPageTests.csrf(page.text, after: "id=\"sign-out\""))
            #expect(try await Self.post(browser, "/portal/passkey/add/options", ["csrf": .string(signOutToken)]).status == .forbidden)
            // Signed out: no options.
            #expect(try await Self.post(Browser(api: api), "/portal/passkey/add/options", ["csrf": .string(token)]).status == .forbidden)

            var authenticator = Self.authenticator()
            let options = try await Self.post(browser, "/portal/passkey/add/options", ["csrf": .string(token)])
            let registration = try Self.registration(authenticator, try Self.challenge(options))
            let added = try await Self.post(
                browser, "/portal/passkey/add/finish", ["csrf": .string(token), "credential": registration, "name": .string("Security key")])
            #expect(added.status == .ok && added.object["location"] == .string("/portal/account"), "\(added.text)")
            // The same authenticator again: the options exclude it, and a registration of it is refused.
            let second = try await Self.post(browser, "/portal/passkey/add/options", ["csrf": .string(token)])
            #expect(second.object["publicKey"]?["excludeCredentials"]?.arrayValue?.count == 1)
            let duplicate = try await Self.post(
                browser, "/portal/passkey/add/finish",
                ["csrf": .string(token), "credential": try Self.registration(authenticator, try Self.challenge(second))])
            #expect(duplicate.status == .conflict, "\(duplicate.text)")
            let listed = try await browser.get("/portal/account")
            #expect(listed.text.contains("Security key") && !listed.text.contains("id=\"no-passkeys\""))
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE actor = \(session.auditActor) AND action = 'portal.passkey.add'", as: Int.self) == 1)

            // An old proof: removing sends to the fresh sign-in.
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '1 hour' WHERE id = \(session.id)")
            let passkeyId = try #require(try await TestEnvironment.services().portalPasskeys.list(session: session).first?.id)
            let removePath = "/portal/account/passkeys/\(passkeyId.uuidString.lowercased())/remove"
            let removeToken = try #require(PortalPageTests.csrf(listed.text, after: "class=\"remove-passkey\""))
            let stale = try await browser.post(removePath, [("csrf", removeToken)])
            #expect(stale.status == .seeOther && stale.headers[.location]?.hasPrefix("/portal/reauth") == true)

            // The fresh sign-in by passkey.
            let reauth = try await browser.get("/portal/reauth?next=/portal/account")
            #expect(reauth.text.contains("id=\"passkey-reauth\""))
            let reauthToken = try #require(Self.buttonToken(reauth.text, id: "passkey-reauth"))
            let reauthOptions = try await Self.post(browser, "/portal/passkey/reauth/options", ["csrf": .string(reauthToken)])
            #expect(reauthOptions.object["publicKey"]?["allowCredentials"]?.arrayValue?.count == 1)
            let proof = try Self.assertion(&authenticator, try Self.challenge(reauthOptions))
            let proven = try await Self.post(
                browser, "/portal/passkey/reauth/finish",
                ["csrf": .string(reauthToken), "credential": proof, "next": .string("/portal/account")])
            #expect(proven.status == .ok && proven.object["location"] == .string("/portal/account"), "\(proven.text)")
            #expect(try await TestEnvironment.value("SELECT proven_by FROM portal_sessions WHERE id = \(session.id)", as: String.self) == "passkey")

            // The account has TOTP: its last passkey can go.
            let removed = try await browser.post(removePath, [("csrf", removeToken)])
            #expect(removed.status == .seeOther && removed.headers[.location] == "/portal/account")
            #expect(try await TestEnvironment.services().portalPasskeys.list(session: session).isEmpty)
            // Another account's passkey id: 404.
            let (_, strangerCookie) = try await PortalPageTests.account()
            let stranger = Browser(api: api, session: strangerCookie)
            let strangerToken = try PortalPageTests.forgedToken(cookie: strangerCookie, purpose: "account")
            #expect(try await stranger.post(removePath, [("csrf", strangerToken)]).status == .notFound)
        }
    }

    @Test("the operator's recovery invite removes the account's passkeys (a planted passkey no longer signs in)")
    func recoveryRemovesPasskeys() async throws {
        try await TestEnvironment.withLiveServer { api in
            let services = try await TestEnvironment.services()
            let (session, _) = try await PortalPageTests.account(operator: true)
            var planted = Self.authenticator()
            try await Self.addByCore(session, planted)
            #expect(try await services.portalPasskeys.list(session: session).count == 1)

            // The operator recovers the account with the command's invite.
            let code = try await services.portal.bootstrapOperator(email: session.account.email)
            let enrolment = try #require(try await services.portal.acceptInvite(code: code, password: "a new password for the operator"))
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM portal_passkeys WHERE account_id = \(session.account.id)", as: Int.self) == 0)
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM audit_log WHERE actor = \(session.auditActor) AND action = 'portal.passkey.remove' AND detail->>'reason' = 'recovery invite'",
                as: Int.self) == 1)
            let (_, reply) = try await Self.passkeySignIn(api, &planted)
            #expect(reply.status == .unauthorized, "\(reply.text)")
            // The recovered account enrols again, then signs in as usual.
            let totp = TOTP.code(secret: enrolment.totpSecret, step: TOTP.step(at: Date()))
            _ = try await services.portal.confirmTOTP(ticket: enrolment.ticket, code: totp)
        }
    }

    @Test("adding a passkey needs a fresh sign-in: both calls answer reauth_required and where to go")
    func addNeedsFreshSignIn() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (session, cookie) = try await PortalPageTests.account()
            let browser = Browser(api: api, session: cookie)
            let page = try await browser.get("/portal/account")
            let token = try #require(Self.buttonToken(page.text, id: "passkey-add"))
            // Options while fresh; then the proof grows old before the finish.
            let options = try await Self.post(browser, "/portal/passkey/add/options", ["csrf": .string(token)])
            #expect(options.status == .ok, "\(options.text)")
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '1 hour' WHERE id = \(session.id)")
            let finish = try await Self.post(
                browser, "/portal/passkey/add/finish",
                ["csrf": .string(token), "credential": try Self.registration(Self.authenticator(), try Self.challenge(options))])
            #expect(finish.status == .forbidden && finish.object["error"] == .string("reauth_required"), "\(finish.text)")
            #expect(finish.object["location"]?.stringValue?.hasPrefix("/portal/reauth?next=") == true, "\(finish.text)")
            #expect(try await TestEnvironment.services().portalPasskeys.list(session: session).isEmpty)
            let stale = try await Self.post(browser, "/portal/passkey/add/options", ["csrf": .string(token)])
            #expect(stale.status == .forbidden && stale.object["error"] == .string("reauth_required"), "\(stale.text)")
            #expect(stale.object["publicKey"] == nil)
            // The script follows a refusal's location.
            let script = try await browser.get("/portal/assets/portal.js")
            #expect(script.text.contains("json.location"))
        }
    }

    @Test("sign-in options ignore the e-mail; bogus assertions from strangers do not lock the account")
    func signInOptionsTellNothing() async throws {
        try await TestEnvironment.withLiveServer { api in
            let (session, _) = try await PortalPageTests.account()
            var authenticator = Self.authenticator()
            try await Self.addByCore(session, authenticator)
            let browser = Browser(api: api)
            let page = try await browser.get("/portal/sign-in")
            #expect(!page.text.contains("data-email-field"))
            let token = try #require(Self.buttonToken(page.text, id: "passkey-sign-in"))
            let named = try await Self.post(
                browser, "/portal/passkey/sign-in/options", ["csrf": .string(token), "email": .string(session.account.email)],
                headers: Self.from(Self.address()))
            #expect(named.status == .ok && named.object["publicKey"]?["allowCredentials"] == .array([]), "\(named.text)")

            // Strangers repeat the passkey's credential id with bad signatures, each from its own address.
            var tamper = SoftwareAuthenticator.Tamper()
            tamper.signature = { $0[$0.count - 1] ^= 0x01 }
            for _ in 0..<(PortalAccounts.maxLoginAttempts + 2) {
                let address = Self.from(Self.address())
                let options = try await Self.post(browser, "/portal/passkey/sign-in/options", ["csrf": .string(token)], headers: address)
                let bad = try Self.assertion(&authenticator, try Self.challenge(options), tamper: tamper)
                let refused = try await Self.post(
                    browser, "/portal/passkey/sign-in/finish", ["csrf": .string(token), "credential": bad], headers: address)
                #expect(refused.status == .unauthorized, "\(refused.text)")
            }
            let (_, owner) = try await Self.passkeySignIn(api, &authenticator)
            #expect(owner.status == .ok, "the owner is not locked out: \(owner.text)")

            // A signature that verifies but whose counter went back (a clone) is charged to the account.
            var clone = authenticator
            clone.counter = 1
            for _ in 0..<PortalAccounts.maxLoginAttempts {
                let address = Self.from(Self.address())
                let options = try await Self.post(browser, "/portal/passkey/sign-in/options", ["csrf": .string(token)], headers: address)
                let cloned = try Self.assertion(&clone, try Self.challenge(options))
                clone.counter = 1
                let refused = try await Self.post(
                    browser, "/portal/passkey/sign-in/finish", ["csrf": .string(token), "credential": cloned], headers: address)
                #expect(refused.status == .unauthorized, "\(refused.text)")
            }
            let (_, locked) = try await Self.passkeySignIn(api, &authenticator)
            #expect(locked.status == .tooManyRequests, "\(locked.text)")
        }
    }

    @Test("sign-in options: each new browser's challenge takes a slot of the client address; expired challenges go at once")
    func signInOptionsCapped() async throws {
        try await TestEnvironment.withLiveServer { api in
            // An expired challenge row goes with the next ceremony's.
            let stale = WebAuthn.encodeBase64URL(Array(Secrets.randomBytes(32)))
            try await TestEnvironment.sql(
                """
                INSERT INTO portal_passkey_challenges (challenge, purpose, binding, expires_at)
                VALUES (\(stale), 'sign-in', \(Data(Secrets.randomBytes(32))), now() - interval '1 second')
                """)
            func newBrowser() async throws -> (Browser, String) {
                let browser = Browser(api: api)
                let page = try await browser.get("/portal/sign-in")
                return (browser, try #require(Self.buttonToken(page.text, id: "passkey-sign-in")))
            }
            let address = Self.from(Self.address())
            let (first, firstToken) = try await newBrowser()
            var statuses = [try await Self.post(first, "/portal/passkey/sign-in/options", ["csrf": .string(firstToken)], headers: address).status]
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM portal_passkey_challenges WHERE challenge = \(stale)", as: Int.self) == 0)
            for _ in 1..<(PortalAccounts.maxLoginAttempts * 4 + 1) {
                let (browser, token) = try await newBrowser()
                statuses.append(try await Self.post(browser, "/portal/passkey/sign-in/options", ["csrf": .string(token)], headers: address).status)
            }
            #expect(statuses.dropLast().allSatisfy { $0 == .ok } && statuses.last == .tooManyRequests, "\(statuses)")
            // A browser asking again replaces its challenge: no slot taken.
            #expect(try await Self.post(first, "/portal/passkey/sign-in/options", ["csrf": .string(firstToken)], headers: address).status == .ok)
            // Another address is not affected.
            let (other, otherToken) = try await newBrowser()
            #expect(try await Self.post(
                other, "/portal/passkey/sign-in/options", ["csrf": .string(otherToken)], headers: Self.from(Self.address())).status == .ok)
        }
    }

    @Test("configuration: the Portal's RP ID and origin default to the public URL's; a mismatch is refused")
    func configuration() throws {
        var configuration = try ServerConfiguration(
            database: ServerConfiguration.parseDatabaseURL("postgres://postgres@127.0.0.1:5432/x"), operatorToken: nil,
            secretBox: SecretBox(masterKey: TestEnvironment.masterKey), publicURL: "https://auth.example.com")
        #expect(PortalRelyingParty.of(configuration) == PortalRelyingParty(id: "auth.example.com", origin: "https://auth.example.com"))
        try configuration.readDeliverySettings(["COSYNC_PORTAL_RP_ID": "example.com", "COSYNC_PORTAL_ORIGIN": "https://portal.example.com/"])
        #expect(PortalRelyingParty.of(configuration) == PortalRelyingParty(id: "example.com", origin: "https://portal.example.com"))
        #expect(throws: ConfigurationError.self) { try configuration.readDeliverySettings(["COSYNC_PORTAL_RP_ID": "other.org"]) }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parsePortalRPID("https://example.com") }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.parsePortalOrigin("https://example.com/portal") }
    }
}

extension UInt32 {
    fileprivate var asInt64: Int64 { Int64(self) }
}
