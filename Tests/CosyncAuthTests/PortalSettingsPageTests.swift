import CosyncAuth
import Foundation
import HTTPTypes
import Testing

/// The Portal's settings slice at the HTTP level (issue 23): the auth settings form (a PATCH through the
/// admin service, its messages shown), the e-mail template editor and its preview (the courier's
/// renderer, escaped), the app's lifecycle (suspend, activate, delete) and its keys (secret and RSA key
/// rotation, the JWKS link). Browser walk: Tests/system/portal/walk_settings.py.
@Suite("Portal settings pages")
struct PortalSettingsPageTests {
    typealias Browser = PortalPageTests.Browser

    static func csrf(_ html: String, after marker: String) throws -> String {
        try #require(PortalPageTests.csrf(html, after: marker), "no csrf after \(marker)")
    }

    static func has(_ html: String, id: String) -> Bool { html.contains("id=\"\(id)\"") }

    /// The admin API's view of an app.
    static func adminApp(_ api: API, _ appId: String) async throws -> [String: JSONValue] {
        let reply = try await api.call(.get, "/admin/v1/apps/\(appId)")
        try #require(reply.status == .ok, "GET app: \(reply.status)")
        return reply.object
    }

    static let settingIds = [
        "signupFlow", "handleType", "userNamesEnabled", "anonymousLoginEnabled", "locales", "passwordFilter", "passwordMinLength",
        "passwordMinUpper", "passwordMinLower", "passwordMinDigit", "passwordMinSpecial", "twoFactorVerification", "userJWTExpiration",
        "freshAuthMinutes", "appleLoginEnabled", "appleBundleId", "googleLoginEnabled", "googleClientId", "googleAppName", "metadataFields",
        "metaDataInvite", "settings-submit",
    ]
    static let passkeyIds = [
        "rpId", "rpName", "allowedOrigins", "userVerification", "attestation", "trustAnchors", "passkeysPerUser", "challengeLifetimeSeconds",
        "counterRegression", "signupCodeLifetimeSeconds",
    ]

    @Test("every auth setting saved through the form is what the admin API and getApplication then show; the audit names the account")
    func settingsSaved() async throws {
        let (operatorSession, cookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Portal settings " + Secrets.hexIdentifier().prefix(6))
            let appId = created.string("appId")
            let browser = Browser(api: api, session: cookie)
            let page = try await browser.get("/portal/apps/\(appId)/settings")
            #expect(page.status == .ok)
            PortalPageTests.expectSecure(page, "settings")
            PortalPageTests.expectNoInline(page.text, "settings")
            for id in Self.settingIds { #expect(Self.has(page.text, id: id), "settings lacks #\(id)") }
            for id in Self.passkeyIds { #expect(!Self.has(page.text, id: id), "a CosyncAuth app's settings show #\(id)") }
            #expect(page.text.contains("value=\"EN\""), "the locales field shows the stored locales")
            let token = try Self.csrf(page.text, after: "id=\"settings-form\"")
            let flags = try #require(page.text.range(of: "name=\"flags\" value=\"").map { page.text[$0.upperBound...].prefix { $0 != "\"" } })

            let saved = try await browser.post(
                "/portal/apps/\(appId)/settings",
                [
                    ("csrf", token), ("flags", String(flags)), ("signupFlow", "link"), ("handleType", "both"), ("userNamesEnabled", "true"),
                    ("anonymousLoginEnabled", "true"), ("locales", "EN, FR de"), ("passwordFilter", "true"), ("passwordMinLength", "12"),
                    ("passwordMinUpper", "1"), ("passwordMinLower", "2"), ("passwordMinDigit", "3"), ("passwordMinSpecial", "4"),
                    ("twoFactorVerification", "google"), ("userJWTExpiration", "48"), ("freshAuthMinutes", "15"), ("appleLoginEnabled", "true"),
                    ("appleBundleId", "com.example.one, com.example.two"), ("googleLoginEnabled", "true"), ("googleClientId", "client-1.apps"),
                    ("googleAppName", "Example"), ("metadataFields", "[{\"path\": \"user.team\", \"fieldName\": \"Team\"}]"),
                    ("metaDataInvite", "[{\"path\": \"invite.role\", \"fieldName\": \"Role\", \"required\": true}]"),
                ])
            // "de" is not upper-case: the API's message, nothing saved.
            #expect(saved.status == .badRequest && saved.text.contains("id=\"form-error\"") && saved.text.contains("locales[2]"), "\(saved.text)")
            #expect(try await Self.adminApp(api, appId)["passwordFilter"] == .bool(false), "a refused PATCH changed nothing")
            #expect(saved.text.contains("value=\"EN, FR de\""), "the refused form keeps what was typed")

            let again = try await browser.post(
                "/portal/apps/\(appId)/settings",
                [
                    ("csrf", token), ("flags", String(flags)), ("signupFlow", "link"), ("handleType", "both"), ("userNamesEnabled", "true"),
                    ("anonymousLoginEnabled", "true"), ("locales", "EN, FR DE"), ("passwordFilter", "true"), ("passwordMinLength", "12"),
                    ("passwordMinUpper", "1"), ("passwordMinLower", "2"), ("passwordMinDigit", "3"), ("passwordMinSpecial", "4"),
                    ("twoFactorVerification", "google"), ("userJWTExpiration", "48"), ("freshAuthMinutes", "15"), ("appleLoginEnabled", "true"),
                    ("appleBundleId", "com.example.one, com.example.two"), ("googleLoginEnabled", "true"), ("googleClientId", "client-1.apps"),
                    ("googleAppName", "Example"), ("metadataFields", "[{\"path\": \"user.team\", \"fieldName\": \"Team\"}]"),
                    ("metaDataInvite", "[{\"path\": \"invite.role\", \"fieldName\": \"Role\", \"required\": true}]"),
                ])
            #expect(again.status == .ok && !again.text.contains("id=\"form-error\""), "\(again.text)")
            let app = try await Self.adminApp(api, appId)
            let expected: [String: JSONValue] = [
                "signupFlow": .string("link"), "handleType": .string("both"), "userNamesEnabled": .bool(true), "anonymousLoginEnabled": .bool(true),
                "locales": .array([.string("EN"), .string("FR"), .string("DE")]), "passwordFilter": .bool(true), "passwordMinLength": .int(12),
                "passwordMinUpper": .int(1), "passwordMinLower": .int(2), "passwordMinDigit": .int(3), "passwordMinSpecial": .int(4),
                "twoFactorVerification": .string("google"), "userJWTExpiration": .int(48), "freshAuthMinutes": .int(15), "appleLoginEnabled": .bool(true),
                "appleBundleId": .string("com.example.one,com.example.two"), "googleLoginEnabled": .bool(true), "googleClientId": .string("client-1.apps"),
                "googleAppName": .string("Example"),
            ]
            for (field, value) in expected { #expect(app[field] == value, "\(field): \(app[field] ?? .null)") }
            #expect(app["metaData"]?.arrayValue?.first?["path"] == .string("user.team"))
            #expect(app["metaDataInvite"]?.arrayValue?.first?["path"] == .string("invite.role"))

            // The end-user API's getApplication shows them too.
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let public_ = try await sdk.get("/api/appuser/getApplication").object
            for field in ["signupFlow", "anonymousLoginEnabled", "userNamesEnabled", "passwordFilter", "passwordMinLength", "twoFactorVerification",
                          "userJWTExpiration", "appleLoginEnabled", "googleLoginEnabled", "locales"] {
                #expect(public_[field] == expected[field], "getApplication \(field): \(public_[field] ?? .null)")
            }

            // Unticking a box the form showed turns it off; the form shows what is stored.
            let page2 = try await browser.get("/portal/apps/\(appId)/settings")
            #expect(page2.text.contains("id=\"passwordFilter\" name=\"passwordFilter\" type=\"checkbox\" value=\"true\" checked"))
            let off = try await browser.post(
                "/portal/apps/\(appId)/settings", [("csrf", try Self.csrf(page2.text, after: "id=\"settings-form\"")), ("flags", String(flags))])
            #expect(off.status == .ok)
            let after = try await Self.adminApp(api, appId)
            #expect(after["passwordFilter"] == .bool(false) && after["appleLoginEnabled"] == .bool(false) && after["passwordMinLength"] == .int(12))

            // Audited as the Portal account, with the fields that changed only.
            let audit = try await TestEnvironment.value(
                "SELECT actor || ' ' || (detail->'fields')::text FROM audit_log WHERE app_id = \(appId) AND action = 'app.update' ORDER BY id DESC LIMIT 1",
                as: String.self)
            #expect(audit?.hasPrefix(operatorSession.auditActor + " ") == true, "\(audit ?? "")")
            #expect(audit?.contains("passwordFilter") == true && audit?.contains("signupFlow") == false, "\(audit ?? "")")
        }
    }

    @Test("invalid values show the admin API's message in form-error and change nothing; AppKey apps get the relying-party settings")
    func invalidAndPasskeys() async throws {
        let (_, cookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Portal invalid settings").string("appId")
            let browser = Browser(api: api, session: cookie)
            let page = try await browser.get("/portal/apps/\(appId)/settings")
            let token = try Self.csrf(page.text, after: "id=\"settings-form\"")
            let before = try await Self.adminApp(api, appId)
            for (field, value, message) in [
                ("userJWTExpiration", "0", "userJWTExpiration must be between 1 and 8760"),
                ("freshAuthMinutes", "abc", "freshAuthMinutes must be an integer, got string"),
                ("passwordMinLength", "129", "passwordMinLength must be between 0 and 128"),
                ("twoFactorVerification", "sms", "twoFactorVerification must be one of none, phone, google, got &#39;sms&#39;"),
                ("handleType", "fax", "handleType must be one of email, phone, both"),
                ("appleBundleId", "a b, c", "appleBundleId must be a comma-separated list of identifiers"),
                ("metaDataInvite", "[{\"path\": \"invite.x\", \"fieldName\": \"X\", \"canEdit\": true}]", "metaDataInvite[0]"),
                ("metaDataInvite", "{", "metaDataInvite must be a JSON array"),
                ("locales", "FR", "locales must include EN"),
            ] {
                let reply = try await browser.post("/portal/apps/\(appId)/settings", [("csrf", token), ("passwordFilter", "true"), (field, value)])
                #expect(reply.status == .badRequest, "\(field)=\(value): \(reply.status)")
                let shown = PortalPageTests.text(reply.text, id: "form-error") ?? ""
                #expect(shown.contains(message), "\(field)=\(value): form-error \(shown)")
                #expect(reply.text.contains("aria-invalid=\"true\""), "\(field): the field is marked")
            }
            #expect(try await Self.adminApp(api, appId) == before, "nothing changed")

            // An AppKey app: the passkey relying party.
            let created = try await api.call(.post, "/admin/v1/apps", json: .object(["name": .string("Portal passkey settings"), "product": .string("appKey")]))
            let keyApp = created.object.string("appId")
            let keyPage = try await browser.get("/portal/apps/\(keyApp)/settings")
            for id in Self.passkeyIds { #expect(Self.has(keyPage.text, id: id), "an AppKey app's settings lack #\(id)") }
            let keyToken = try Self.csrf(keyPage.text, after: "id=\"settings-form\"")
            let refused = try await browser.post(
                "/portal/apps/\(keyApp)/settings", [("csrf", keyToken), ("attestation", "required"), ("trustAnchors", "")])
            #expect(refused.status == .badRequest && (PortalPageTests.text(refused.text, id: "form-error") ?? "").contains("attestation &#39;required&#39; needs trustAnchors"))
            let badOrigin = try await browser.post("/portal/apps/\(keyApp)/settings", [("csrf", keyToken), ("allowedOrigins", "https://ok.example.com\nftp://x")])
            #expect(badOrigin.status == .badRequest && (PortalPageTests.text(badOrigin.text, id: "form-error") ?? "").contains("allowedOrigins[1]"))
            let saved = try await browser.post(
                "/portal/apps/\(keyApp)/settings",
                [("csrf", keyToken), ("rpId", "Auth.Example.com"), ("rpName", "Example"), ("allowedOrigins", "https://auth.example.com\r\nhttps://app.example.com:8443\n"),
                 ("userVerification", "preferred"), ("passkeysPerUser", "5"), ("challengeLifetimeSeconds", "120"), ("counterRegression", "flag"),
                 ("signupCodeLifetimeSeconds", "600")])
            #expect(saved.status == .ok && !saved.text.contains("id=\"form-error\""), "\(saved.text)")
            let app = try await Self.adminApp(api, keyApp)
            #expect(app["rpId"] == .string("auth.example.com") && app["rpName"] == .string("Example"))
            #expect(app["allowedOrigins"] == .array([.string("https://auth.example.com"), .string("https://app.example.com:8443")]))
            #expect(app["userVerification"] == .string("preferred") && app["passkeysPerUser"] == .int(5) && app["challengeLifetimeSeconds"] == .int(120))
            #expect(app["counterRegression"] == .string("flag") && app["signupCodeLifetimeSeconds"] == .int(600))
        }
    }

    @Test("roles: an editor saves settings and templates but may not rotate, delete or suspend (403); a viewer may change nothing; another app is 404")
    func roles() async throws {
        let (operatorSession, _) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let appId = try await api.createApp("Portal settings roles").string("appId")
            let other = try await api.createApp("Portal settings other").string("appId")
            let (_, editorCookie) = try await PortalPageTests.account(appId: appId, role: .editor, by: operatorSession)
            let (_, viewerCookie) = try await PortalPageTests.account(appId: appId, role: .viewer, by: operatorSession)
            let (_, ownerCookie) = try await PortalPageTests.account(appId: appId, role: .owner, by: operatorSession)
            let secretHash: @Sendable () async throws -> String? = { try await TestEnvironment.value("SELECT encode(app_secret_hash, 'hex') FROM apps WHERE app_id = \(appId)", as: String.self) }
            let keyCount: @Sendable () async throws -> Int? = { try await TestEnvironment.value("SELECT count(*)::int FROM app_keys k JOIN apps a ON a.id = k.app_ref WHERE a.app_id = \(appId)", as: Int.self) }
            let (hash0, keys0) = (try await secretHash(), try await keyCount())
            let destructive: [(String, String, [(String, String)])] = [
                ("/portal/apps/\(appId)/keys/rotate-secret", "rotate-secret:\(appId)", []),
                ("/portal/apps/\(appId)/keys/rotate-rsa", "rotate-rsa:\(appId)", [("retireAfterHours", "1")]),
                ("/portal/apps/\(appId)/delete", "delete-app:\(appId)", [("confirmName", "Portal settings roles")]),
                ("/portal/apps/\(appId)/status", "app-status:\(appId)", [("status", "suspended")]),
            ]

            // The editor: settings and templates yes; the rest 403, and the controls are absent.
            let editor = Browser(api: api, session: editorCookie)
            let settings = try await editor.get("/portal/apps/\(appId)/settings")
            #expect(Self.has(settings.text, id: "settings-submit"))
            for id in ["delete-app", "suspend-app", "confirmName"] { #expect(!Self.has(settings.text, id: id), "an editor sees #\(id)") }
            let keys = try await editor.get("/portal/apps/\(appId)/keys")
            for id in ["rotate-secret", "rotate-rsa"] { #expect(!Self.has(keys.text, id: id), "an editor sees #\(id)") }
            #expect(Self.has(keys.text, id: "jwks-link"))
            let saved = try await editor.post(
                "/portal/apps/\(appId)/settings", [("csrf", try Self.csrf(settings.text, after: "id=\"settings-form\"")), ("userJWTExpiration", "36")])
            #expect(saved.status == .ok)
            let jwtHours = try await Self.adminApp(api, appId)["userJWTExpiration"]
            #expect(jwtHours == .int(36))
            let emails = try await editor.get("/portal/apps/\(appId)/emails")
            #expect(emails.status == .ok && Self.has(emails.text, id: "save-template"))
            for (path, purpose, fields) in destructive {
                let reply = try await editor.post(path, fields + [("csrf", try PortalPageTests.forgedToken(cookie: editorCookie, purpose: purpose))])
                #expect(reply.status == .forbidden, "editor \(path): \(reply.status)")
            }
            // The owner: rotations and delete yes, but the status is the operator's (as in the admin API).
            let owner = Browser(api: api, session: ownerCookie)
            let ownerSettings = try await owner.get("/portal/apps/\(appId)/settings")
            #expect(Self.has(ownerSettings.text, id: "delete-app") && !Self.has(ownerSettings.text, id: "suspend-app"))
            let ownerStatus = try await owner.post(
                "/portal/apps/\(appId)/status", [("status", "suspended"), ("csrf", try PortalPageTests.forgedToken(cookie: ownerCookie, purpose: "app-status:\(appId)"))])
            #expect(ownerStatus.status == .forbidden)

            // The viewer: no forms, every POST 403.
            let viewer = Browser(api: api, session: viewerCookie)
            let viewerSettings = try await viewer.get("/portal/apps/\(appId)/settings")
            #expect(viewerSettings.status == .ok && !viewerSettings.text.contains("method=\"post\" action=\"/portal/apps/"))
            #expect(viewerSettings.text.contains("36"), "the viewer reads the settings")
            let viewerEmails = try await viewer.get("/portal/apps/\(appId)/emails")
            #expect(viewerEmails.status == .ok && !viewerEmails.text.contains("method=\"post\" action=\"/portal/apps/"))
            for (path, purpose, fields) in destructive + [
                ("/portal/apps/\(appId)/settings", "settings:\(appId)", [("userJWTExpiration", "5")]),
                ("/portal/apps/\(appId)/emails", "emails:\(appId)", [("template", "signUp"), ("locale", "EN"), ("html", "x"), ("action", "save")]),
                ("/portal/apps/\(appId)/emails", "emails:\(appId)", [("template", "signUp"), ("locale", "EN"), ("html", "x"), ("action", "preview")]),
            ] {
                let reply = try await viewer.post(path, fields + [("csrf", try PortalPageTests.forgedToken(cookie: viewerCookie, purpose: purpose))])
                #expect(reply.status == .forbidden, "viewer \(path): \(reply.status)")
            }
            // Without a CSRF token: 403 for everyone.
            for (path, _, fields) in destructive { #expect(try await owner.post(path, fields).status == .forbidden) }
            #expect((try await Self.adminApp(api, appId))["userJWTExpiration"] == .int(36))
            let (hash1, keys1) = (try await secretHash(), try await keyCount())
            #expect(hash1 == hash0 && keys1 == keys0, "nothing rotated")
            #expect((try await Self.adminApp(api, appId))["status"] == .string("active"))
            // Another app: 404 for its pages and forms.
            for path in ["/portal/apps/\(other)/emails", "/portal/apps/\(other)/settings"] { #expect(try await editor.get(path).status == .notFound) }
            let foreign = try await editor.post(
                "/portal/apps/\(other)/keys/rotate-secret", [("csrf", try PortalPageTests.forgedToken(cookie: editorCookie, purpose: "rotate-secret:\(other)"))])
            #expect(foreign.status == .notFound)
        }
    }

    @Test("the lifecycle: suspend (the end-user API refuses), activate, delete after a fresh sign-in and the app's name")
    func lifecycle() async throws {
        let (operatorSession, cookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let name = "Portal lifecycle " + Secrets.hexIdentifier().prefix(6)
            let created = try await api.createApp(name, settings: ["signupFlow": .string("none")])
            let appId = created.string("appId")
            let sdk = SDK(api: api, appToken: created.string("appToken"))
            let handle = PortalPageTests.unique("life")
            #expect(try await sdk.post("/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let browser = Browser(api: api, session: cookie)

            let page = try await browser.get("/portal/apps/\(appId)/settings")
            #expect(Self.has(page.text, id: "suspend-app") && !Self.has(page.text, id: "activate-app"))
            let suspended = try await browser.post(
                "/portal/apps/\(appId)/status", [("status", "suspended"), ("csrf", try Self.csrf(page.text, after: "id=\"suspend-app\""))])
            #expect(suspended.status == .seeOther)
            #expect((try await Self.adminApp(api, appId))["status"] == .string("suspended"))
            let refused = try await sdk.login(handle, "pw")
            #expect(refused.status != .ok && refused.object["code"] == .int(402), "a suspended app's login: \(refused.status) \(refused.text)")
            let page2 = try await browser.get(try #require(suspended.headers[.location]))
            #expect(Self.has(page2.text, id: "activate-app") && page2.text.contains("role=\"status\""))
            let bad = try await browser.post(
                "/portal/apps/\(appId)/status", [("status", "gone"), ("csrf", try Self.csrf(page2.text, after: "id=\"activate-app\""))])
            #expect(bad.status == .badRequest && (PortalPageTests.text(bad.text, id: "form-error") ?? "").contains("status must be one of"))
            let activated = try await browser.post(
                "/portal/apps/\(appId)/status", [("status", "active"), ("csrf", try Self.csrf(page2.text, after: "id=\"activate-app\""))])
            #expect(activated.status == .seeOther)
            #expect(try await sdk.login(handle, "pw").status == .ok)

            // Delete: a stale sign-in goes to reauth first; a wrong name deletes nothing.
            let deleteToken = try Self.csrf(page.text, after: "id=\"delete-app\"")
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '6 minutes' WHERE id = \(operatorSession.id)")
            let stale = try await browser.post("/portal/apps/\(appId)/delete", [("confirmName", name), ("csrf", deleteToken)])
            #expect(stale.status == .seeOther && stale.headers[.location] == "/portal/reauth?next=%2Fportal%2Fapps%2F\(appId)%2Fsettings")
            #expect((try await Self.adminApp(api, appId))["status"] == .string("active"))
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() WHERE id = \(operatorSession.id)")
            let wrong = try await browser.post("/portal/apps/\(appId)/delete", [("confirmName", name + "x"), ("csrf", deleteToken)])
            #expect(wrong.status == .badRequest && Self.has(wrong.text, id: "form-error"))
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)").status == .ok)
            let deleted = try await browser.post("/portal/apps/\(appId)/delete", [("confirmName", name), ("csrf", deleteToken)])
            #expect(deleted.status == .seeOther && deleted.headers[.location] == "/portal")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)").status == .notFound)
            #expect(try await browser.get("/portal/apps/\(appId)/settings").status == .notFound)
            let audit = try await TestEnvironment.value("SELECT actor FROM audit_log WHERE app_id = \(appId) AND action = 'app.delete'", as: String.self)
            #expect(audit == operatorSession.auditActor)
        }
    }

    @Test("keys: the app secret rotated and shown once (the old one stops), the RSA key rotated with its retirement, the JWKS link; a stale sign-in goes to reauth")
    func keys() async throws {
        let (operatorSession, cookie) = try await PortalPageTests.account(operator: true)
        try await TestEnvironment.withLiveServer { api in
            let created = try await api.createApp("Portal keys " + Secrets.hexIdentifier().prefix(6))
            let appId = created.string("appId"), oldSecret = created.string("appSecret")
            let browser = Browser(api: api, session: cookie)
            let keys = try await browser.get("/portal/apps/\(appId)/keys")
            #expect(keys.text.contains("id=\"jwks-link\" href=\"/apps/\(appId)/.well-known/jwks.json\""))
            for id in ["rotate-secret", "rotate-rsa", "rotate-token"] { #expect(Self.has(keys.text, id: id)) }
            let oldPublic = PortalPageTests.text(keys.text, id: "raw-public-key")

            // Stale: both rotations go to reauth and change nothing.
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '6 minutes' WHERE id = \(operatorSession.id)")
            for (path, marker) in [("rotate-secret", "id=\"rotate-secret\""), ("rotate-rsa", "id=\"rotate-rsa\"")] {
                let stale = try await browser.post("/portal/apps/\(appId)/keys/\(path)", [("csrf", try Self.csrf(keys.text, after: marker))])
                #expect(stale.status == .seeOther && stale.headers[.location] == "/portal/reauth?next=%2Fportal%2Fapps%2F\(appId)%2Fkeys", "\(path)")
            }
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)", token: oldSecret).status == .ok)
            try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() WHERE id = \(operatorSession.id)")

            // The secret: shown once, the old one stops, the new one works.
            let rotated = try await browser.post("/portal/apps/\(appId)/keys/rotate-secret", [("csrf", try Self.csrf(keys.text, after: "id=\"rotate-secret\""))])
            #expect(rotated.status == .seeOther && rotated.headers[.location] == "/portal/apps/\(appId)/keys")
            let shown = try await browser.get("/portal/apps/\(appId)/keys")
            let newSecret = try #require(PortalPageTests.text(shown.text, id: "app-secret"))
            #expect(newSecret.hasPrefix("cas_") && newSecret != oldSecret && shown.text.contains("role=\"status\""))
            #expect(!(try await browser.get("/portal/apps/\(appId)/keys")).text.contains("id=\"app-secret\""), "shown once")
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)", token: oldSecret).status == .unauthorized)
            #expect(try await api.call(.get, "/admin/v1/apps/\(appId)", token: newSecret).status == .ok)

            // The RSA key: a bad retirement is the API's range; then a new key, the old one kept in the JWKS.
            let badRetire = try await browser.post(
                "/portal/apps/\(appId)/keys/rotate-rsa", [("retireAfterHours", "9000"), ("csrf", try Self.csrf(keys.text, after: "id=\"rotate-rsa\""))])
            #expect(badRetire.status == .badRequest && (PortalPageTests.text(badRetire.text, id: "form-error") ?? "").contains("0 to 8760"))
            let rsa = try await browser.post(
                "/portal/apps/\(appId)/keys/rotate-rsa", [("retireAfterHours", "2"), ("csrf", try Self.csrf(keys.text, after: "id=\"rotate-rsa\""))])
            #expect(rsa.status == .seeOther)
            let afterRSA = try await browser.get("/portal/apps/\(appId)/keys")
            #expect(PortalPageTests.text(afterRSA.text, id: "raw-public-key") != oldPublic, "a new public key")
            #expect(afterRSA.text.contains("The signing key was rotated"))
            let jwks = try await api.call(.get, "/apps/\(appId)/.well-known/jwks.json", token: nil)
            #expect(jwks.status == .ok && jwks.object["keys"]?.arrayValue?.count == 2, "\(jwks.text)")
            let detail = try await TestEnvironment.value(
                "SELECT actor || ' ' || (detail->>'previousKeyRetiresAfterHours') FROM audit_log WHERE app_id = \(appId) AND action = 'app.keys.rotate'",
                as: String.self)
            #expect(detail == operatorSession.auditActor + " 2")
        }
    }

    @Test("e-mail templates: the preview is the courier's rendering, escaped and not saved; saving is the admin API's PUT; its messages shown")
    func emailTemplates() async throws {
        let (operatorSession, cookie) = try await PortalPageTests.account(operator: true)
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let name = "Portal <b>mail</b> " + Secrets.hexIdentifier().prefix(6)
            let created = try await api.createApp(name, settings: ["locales": .array([.string("EN"), .string("FR")])])
            let appId = created.string("appId")
            let browser = Browser(api: api, session: cookie)
            let page = try await browser.get("/portal/apps/\(appId)/emails")
            #expect(page.status == .ok && page.text.contains("id=\"nav-emails\"") && Self.has(page.text, id: "template-default"))
            PortalPageTests.expectNoInline(page.text, "emails")
            #expect(page.text.contains("Verify your e-mail for %APP_NAME%"), "the built-in signUp template")
            #expect(try await browser.get("/portal/apps/\(appId)/emails?template=nope&locale=EN").status == .notFound)
            #expect(try await browser.get("/portal/apps/\(appId)/emails?template=signUp&locale=DE").status == .notFound)
            let french = try await browser.get("/portal/apps/\(appId)/emails?template=signUpLink&locale=FR")
            #expect(french.status == .ok && french.text.contains("signUpLink (FR)"))
            let token = try Self.csrf(page.text, after: "id=\"template-form\"")

            // Preview: rendered by Outbox.compose with the sample values, shown as escaped text, not stored.
            let html = "<p>Hi %HANDLE%, code <b>%CODE%</b> for %APP_NAME%</p><script>alert(1)</script>"
            let preview = try await browser.post(
                "/portal/apps/\(appId)/emails",
                [("csrf", token), ("template", "signUp"), ("locale", "EN"), ("subject", "Code for %APP_NAME%"), ("html", html), ("text", ""),
                 ("replyTo", ""), ("localeLinkText", ""), ("action", "preview")])
            #expect(preview.status == .ok, "\(preview.status)")
            let app = try #require(try await services.apps.currentApp(appId: appId))
            let expected = Outbox.compose(
                EmailTemplate(subject: "Code for %APP_NAME%", html: html, text: ""), name: "signUp", appName: app.name,
                values: AppRecords.previewValues(publicURL: services.configuration.publicURL))
            #expect(expected.html.contains("<script>alert(1)</script>") && expected.html.contains("&lt;b&gt;mail"), "the courier escapes values, not the template")
            let escape = { (s: String) in
                s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
                    .replacingOccurrences(of: "\"", with: "&quot;")
            }
            #expect(preview.text.contains("id=\"preview-html\" class=\"wrap\">" + escape(expected.html) + "</pre>"), "the preview shows the courier's HTML as text")
            #expect(preview.text.contains(escape(expected.subject)) && preview.text.contains("user@example.com"))
            #expect(!preview.text.contains("<script>alert(1)</script>") && !preview.text.contains("<b>mail</b>"), "no template output unescaped in the page")
            PortalPageTests.expectSecure(preview, "preview")
            let stillDefault = try await services.records.template(app: app, name: "signUp", locale: "EN")
            #expect(stillDefault.isDefault, "a preview saves nothing")
            // A preview of a draft the API refuses shows the API's message.
            let badPreview = try await browser.post(
                "/portal/apps/\(appId)/emails", [("csrf", token), ("template", "signUp"), ("locale", "EN"), ("subject", "a\r\nBcc: x@y.z"), ("html", "x"), ("action", "preview")])
            #expect(badPreview.status == .badRequest && (PortalPageTests.text(badPreview.text, id: "form-error") ?? "").contains("subject must be one line"))

            // Save: the admin API then answers it; the courier sends it.
            let badSave = try await browser.post(
                "/portal/apps/\(appId)/emails",
                [("csrf", token), ("template", "signUp"), ("locale", "EN"), ("subject", "S"), ("html", html), ("replyTo", "not-an-address"), ("action", "save")])
            #expect(badSave.status == .badRequest && (PortalPageTests.text(badSave.text, id: "form-error") ?? "").contains("replyTo must be an e-mail address"))
            #expect(try await services.records.template(app: app, name: "signUp", locale: "EN").isDefault)
            let saved = try await browser.post(
                "/portal/apps/\(appId)/emails",
                [("csrf", token), ("template", "signUp"), ("locale", "EN"), ("subject", "Code for %APP_NAME%"), ("html", html), ("text", ""),
                 ("replyTo", "help@example.com"), ("localeLinkText", ""), ("action", "save")])
            #expect(saved.status == .seeOther && saved.headers[.location] == "/portal/apps/\(appId)/emails?template=signUp&locale=EN&saved=1")
            let stored = try await api.call(.get, "/admin/v1/apps/\(appId)/email-templates/signUp/EN")
            #expect(stored.object["html"] == .string(html) && stored.object["replyTo"] == .string("help@example.com") && stored.object["isDefault"] == .bool(false))
            let audit = try await TestEnvironment.value("SELECT actor FROM audit_log WHERE app_id = \(appId) AND action = 'template.put'", as: String.self)
            #expect(audit == operatorSession.auditActor)
            let handle = PortalPageTests.unique("mail")
            #expect(try await SDK(api: api, appToken: created.string("appToken")).post(
                "/api/appuser/signup", [("handle", SDK.handle(handle)), ("password", SDK.md5("pw"))]).status == .ok)
            let sent = try await TestEnvironment.value(
                "SELECT html_body FROM messages WHERE recipient = \(handle) AND template = 'signUp' ORDER BY id DESC LIMIT 1", as: String.self)
            let code = try #require(sent.flatMap { html in html.range(of: "code <b>").map { String(html[$0.upperBound...].prefix(6)) } })
            let courier = Outbox.compose(
                EmailTemplate(subject: "", html: html, text: ""), name: "signUp", appName: app.name, values: ["HANDLE": handle, "CODE": code])
            #expect(sent == courier.html, "the courier's e-mail is what the preview's renderer makes")

            // Reset: the built-in template applies again.
            let reset = try await browser.post(
                "/portal/apps/\(appId)/emails", [("csrf", token), ("template", "signUp"), ("locale", "EN"), ("action", "reset")])
            #expect(reset.status == .seeOther)
            #expect(try await services.records.template(app: app, name: "signUp", locale: "EN").isDefault)
            // The SMS template previews as text.
            let sms = try await browser.post(
                "/portal/apps/\(appId)/emails", [("csrf", token), ("template", "sms"), ("locale", "FR"), ("html", "Code %CODE% <x>"), ("action", "preview")])
            #expect(sms.status == .ok && sms.text.contains("id=\"preview-text\" class=\"wrap\">Code 123456 &lt;x&gt;</pre>"))
        }
    }
}
