import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// Passkeys in the Portal (issue 23): sign-in, enrolment after an invitation, more passkeys on the
/// account page, and the fresh sign-in. The ceremony needs the script (portal.js); every page still
/// works without it through the password and TOTP forms.
///
/// | Method and path | Body (JSON) | Answer (JSON) |
/// |---|---|---|
/// | POST `/portal/passkey/sign-in/options` | `csrf` (the sign-in form's) | `{"publicKey": request options}` (discoverable) |
/// | POST `/portal/passkey/sign-in/finish` | `csrf`, `credential` | `{"location": "/portal"}` and the session cookie |
/// | POST `/portal/passkey/enrol/options` | `csrf` (the enrolment form's) | `{"publicKey": creation options}` |
/// | POST `/portal/passkey/enrol/finish` | `csrf`, `credential`, `name` | `{"location": "/portal"}` and the session cookie |
/// | POST `/portal/passkey/add/options` | `csrf` (the account page's) | `{"publicKey": creation options}` (needs a fresh sign-in) |
/// | POST `/portal/passkey/add/finish` | `csrf`, `credential`, `name` | `{"location": "/portal/account"}` (needs a fresh sign-in) |
/// | POST `/portal/passkey/reauth/options` | `csrf` (the fresh sign-in form's) | `{"publicKey": request options}` |
/// | POST `/portal/passkey/reauth/finish` | `csrf`, `credential`, `next` | `{"location": next}` |
/// | GET `/portal/account` | the account page: its passkeys (`#passkeys`), `#passkey-add` | |
/// | POST `/portal/account/passkeys/{id}/remove` | form: `csrf` | back to `/portal/account` (needs a fresh sign-in) |
///
/// The CSRF token is the page's own (in `X-CSRF-Token` or the `csrf` member), bound as the page's forms
/// are: to the browser key before sign-in, to the session after. A browser `Origin` other than the
/// Portal's is refused. A refusal is `{"error": reason, "message": text}` with its status; a call that
/// needs a fresh sign-in is refused with 403 `reauth_required` and a `location` to go to.
extension PortalRoutes {
    func registerPasskeys(on router: Router<Context>) {
        router.post("portal/passkey/sign-in/options") { request, context in
            await anonymousJSON(request, purpose: "sign-in") { _, key in
                let options = try await services.portalPasskeys.signInOptions(browserKey: key, address: clientAddress(request, context))
                return Self.json(["publicKey": options])
            }
        }
        router.post("portal/passkey/sign-in/finish") { request, context in
            await anonymousJSON(request, purpose: "sign-in") { body, key in
                let signedIn = try await services.portalPasskeys.signIn(
                    credential: try Self.credential(body), browserKey: key, address: clientAddress(request, context))
                return Self.json(["location": .string("/portal")], cookies: [cookies.set(cookies.sessionName, signedIn.cookie)])
            }
        }
        router.post("portal/passkey/enrol/options") { request, _ in
            await anonymousJSON(request, purpose: "enrol") { _, _ in
                let options = try await services.portalPasskeys.enrolOptions(ticket: try enrolTicket(request))
                return Self.json(["publicKey": options])
            }
        }
        router.post("portal/passkey/enrol/finish") { request, _ in
            await anonymousJSON(request, purpose: "enrol") { body, _ in
                let signedIn = try await services.portalPasskeys.enrol(
                    ticket: try enrolTicket(request), credential: try Self.credential(body), name: body["name"]?.stringValue)
                return Self.json(
                    ["location": .string("/portal")],
                    cookies: [cookies.set(cookies.sessionName, signedIn.cookie), cookies.clear(cookies.onceName)])
            }
        }
        // Adding a passkey is a new way into the account: it needs a fresh sign-in, as removing one does.
        router.post("portal/passkey/add/options") { request, _ in
            await signedInJSON(request, purpose: "account") { visitor, _ in
                guard visitor.isFresh else { return reauthRequired(next: "/portal/account") }
                return Self.json(["publicKey": try await services.portalPasskeys.addOptions(session: visitor.session)])
            }
        }
        router.post("portal/passkey/add/finish") { request, _ in
            await signedInJSON(request, purpose: "account") { visitor, body in
                guard visitor.isFresh else { return reauthRequired(next: "/portal/account") }
                try await services.portalPasskeys.add(session: visitor.session, credential: try Self.credential(body), name: body["name"]?.stringValue)
                return Self.json(["location": .string("/portal/account")])
            }
        }
        router.post("portal/passkey/reauth/options") { request, _ in
            await signedInJSON(request, purpose: "reauth") { visitor, _ in
                Self.json(["publicKey": try await services.portalPasskeys.reauthOptions(session: visitor.session)])
            }
        }
        router.post("portal/passkey/reauth/finish") { request, context in
            await signedInJSON(request, purpose: "reauth") { visitor, body in
                _ = try await services.portalPasskeys.reauthenticate(
                    session: visitor.session, credential: try Self.credential(body), address: clientAddress(request, context))
                let next = PortalForm.localPortalPath(body["next"]?.stringValue) ?? "/portal"
                return Self.json(["location": .string(next)])
            }
        }
        router.get("portal/account") { request, _ in await signedIn(request) { visitor in try await accountPage(visitor) } }
        router.post("portal/account/passkeys/:id/remove") { request, context in
            let id = context.parameters.get("id") ?? ""
            return await signedInPost(request, purpose: "account") { visitor, _ in
                guard let passkeyId = UUID(uuidString: id) else { throw Stop.notFound }
                guard visitor.isFresh else { throw Stop.reauth(next: "/portal/account") }
                do {
                    try await services.portalPasskeys.remove(session: visitor.session, passkeyId: passkeyId)
                } catch PortalPasskeyError.lastFactor {
                    return try await accountPage(visitor, error: PortalText.text(.passkeyLastFactor), status: .conflict)
                }
                return PortalPages.redirect("/portal/account")
            }
        }
    }

    // MARK: the account page

    func accountPage(_ visitor: Visitor, error: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let passkeys = try await services.portalPasskeys.list(session: visitor.session)
        let account = visitor.session.account
        var page = makePage(
            visitor, heading: PortalText.text(.accountTitle), template: "passkey.account",
            values: [
                "csrf": csrf.token(bound: visitor.cookie, purpose: "account"), "email": account.email,
                "totp": PortalText.text(account.totpEnabled ? .accountTOTPOn : .accountTOTPOff),
                "available": services.portalPasskeys.relyingParty != nil,
                "passkeys": passkeys.map { passkey -> [String: Any] in
                    ["id": passkey.id.uuidString.lowercased(), "name": passkey.name, "created": Self.date(passkey.createdAt),
                     "lastUsed": passkey.lastUsedAt.map { Self.date($0) } ?? PortalText.text(.passkeyNeverUsed)]
                },
            ],
            status: status)
        page.error = error
        return PortalPages.render(page)
    }

    // MARK: the JSON endpoints

    /// The enrolment ticket waiting in the hand-over cookie (as the TOTP enrolment form reads it).
    func enrolTicket(_ request: Request) throws -> String {
        guard let fields = sealer.open(PortalCookies.value(request, cookies.onceName)), fields["kind"] == "enrol", let ticket = fields["ticket"]
        else { throw PortalPasskeyError.expired }
        return ticket
    }

    static var maxJSONBody: Int { 64 * 1024 }

    /// The JSON object of a script's POST, with its CSRF token; nil when it is not one.
    func jsonBody(_ request: Request) async -> (object: [String: JSONValue], csrf: String?)? {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/json") else { return nil }
        guard let buffer = try? await request.body.collect(upTo: Self.maxJSONBody),
            let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(buffer.readableBytesView)))?.objectValue
        else { return nil }
        return (object, request.headers[Self.csrfHeader] ?? object["csrf"]?.stringValue)
    }

    static var csrfHeader: HTTPField.Name { HTTPField.Name("X-CSRF-Token")! }

    /// Whether the browser's `Origin` (when it sends one) is the Portal's.
    func originAllowed(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin] else { return true }
        let own = services.portalPasskeys.relyingParty?.origin
        return origin == own
    }

    /// A call of a page shown before sign-in (sign-in, enrolment): the token bound to the browser key.
    func anonymousJSON(
        _ request: Request, purpose: String, _ body: ([String: JSONValue], String) async throws -> Response
    ) async -> Response {
        guard originAllowed(request) else { return Self.refusal("csrf", PortalText.text(.formExpired), status: .forbidden) }
        guard let (object, token) = await jsonBody(request) else {
            return Self.refusal("bad_request", PortalText.text(.badRequest), status: .badRequest)
        }
        let key = cookies.browserKey(request)
        guard csrf.verify(token, bound: key, purpose: purpose), let key else {
            return Self.refusal("csrf", PortalText.text(key == nil ? .cookiesNeeded : .formExpired), status: .forbidden)
        }
        do { return try await body(object, key) } catch { return jsonRefusal(error) }
    }

    /// A call of a signed-in page: the token bound to the session cookie.
    func signedInJSON(_ request: Request, purpose: String, _ body: (Visitor, [String: JSONValue]) async throws -> Response) async -> Response {
        guard originAllowed(request) else { return Self.refusal("csrf", PortalText.text(.formExpired), status: .forbidden) }
        guard let (object, token) = await jsonBody(request) else {
            return Self.refusal("bad_request", PortalText.text(.badRequest), status: .badRequest)
        }
        guard let cookie = cookies.session(request), csrf.verify(token, bound: cookie, purpose: purpose) else {
            return Self.refusal("csrf", PortalText.text(.formExpired), status: .forbidden)
        }
        do {
            guard let visitor = try await visitor(request) else {
                return Self.refusal("signed_out", PortalText.text(.passkeySignedOut), status: .unauthorized)
            }
            return try await body(visitor, object)
        } catch {
            return jsonRefusal(error)
        }
    }

    /// The refusal of a call that needs a fresh sign-in: 403 `reauth_required`, with the fresh sign-in
    /// page in `location` (the script goes there).
    func reauthRequired(next: String) -> Response {
        Self.json(
            [
                "error": .string("reauth_required"), "message": .string(PortalText.text(.reauthPrompt)),
                "location": .string("/portal/reauth?next=" + PortalForm.encode(next)),
            ], status: .forbidden)
    }

    static func credential(_ body: [String: JSONValue]) throws -> [String: JSONValue] {
        guard case .object(let credential)? = body["credential"] else { throw PortalPasskeyError.refused }
        return credential
    }

    func jsonRefusal(_ error: any Error) -> Response {
        switch error {
        case PortalPasskeyError.unavailable: return Self.refusal("unavailable", PortalText.text(.passkeyUnavailable), status: .badRequest)
        case PortalPasskeyError.expired: return Self.refusal("expired", PortalText.text(.passkeyExpired), status: .badRequest)
        case PortalPasskeyError.refused: return Self.refusal("refused", PortalText.text(.passkeyRefused), status: .unauthorized)
        case PortalPasskeyError.exists: return Self.refusal("exists", PortalText.text(.passkeyExists), status: .conflict)
        case PortalPasskeyError.lastFactor: return Self.refusal("last_factor", PortalText.text(.passkeyLastFactor), status: .conflict)
        case PortalError.notFound: return Self.refusal("not_found", PortalText.text(.notFound), status: .notFound)
        default:
            if let (text, status) = Self.formError(error) { return Self.refusal("refused", text, status: status) }
            services.logger.error("portal: a passkey call failed", metadata: ["error": "\(String(reflecting: error))"])
            return Self.refusal("server_error", PortalText.text(.genericError), status: .internalServerError)
        }
    }

    static func json(_ object: [String: JSONValue], status: HTTPResponse.Status = .ok, cookies: [String] = []) -> Response {
        var headers = PortalHeaders.security()
        headers[.contentType] = "application/json"
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        let data = (try? JSONEncoder().encode(JSONValue.object(object))) ?? Data("{}".utf8)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func refusal(_ reason: String, _ message: String, status: HTTPResponse.Status) -> Response {
        json(["error": .string(reason), "message": .string(message)], status: status)
    }
}

extension PortalPages {
    /// The passkey parts of the sign-in, enrolment and fresh sign-in pages (partials those templates
    /// include), and the account page. The buttons stay hidden until the script finds WebAuthn.
    static let passkeyTemplates: [String: String] = [
        "passkey.signIn": """
            <section class="card passkey" aria-labelledby="passkey-heading">
            <h2 id="passkey-heading">{{t.passkeySignInHeading}}</h2>
            <button type="button" id="passkey-sign-in" class="secondary" data-passkey="get" data-options="/portal/passkey/sign-in/options" data-finish="/portal/passkey/sign-in/finish" data-csrf="{{csrf}}" data-text-failed="{{t.passkeyFailed}}" data-text-cancelled="{{t.passkeyCancelled}}" data-text-unsupported="{{t.passkeyUnsupported}}" hidden>{{t.passkeySignInButton}}</button>
            <p id="passkey-status" class="error" role="alert" hidden></p>
            <noscript><p>{{t.passkeyNoScript}}</p></noscript>
            </section>
            """,
        "passkey.enrol": """
            <section class="card passkey" aria-labelledby="passkey-enrol-heading">
            <h2 id="passkey-enrol-heading">{{t.passkeyEnrolHeading}}</h2>
            <p>{{t.passkeyEnrolHelp}}</p>
            <button type="button" id="passkey-enrol" data-passkey="create" data-options="/portal/passkey/enrol/options" data-finish="/portal/passkey/enrol/finish" data-csrf="{{csrf}}" data-text-failed="{{t.passkeyFailed}}" data-text-cancelled="{{t.passkeyCancelled}}" data-text-unsupported="{{t.passkeyUnsupported}}" hidden>{{t.passkeyEnrolButton}}</button>
            <p id="passkey-status" class="error" role="alert" hidden></p>
            <noscript><p>{{t.passkeyNoScript}}</p></noscript>
            </section>
            """,
        "passkey.reauth": """
            <section class="card passkey" aria-labelledby="passkey-reauth-heading">
            <h2 id="passkey-reauth-heading">{{t.passkeyReauthHeading}}</h2>
            <button type="button" id="passkey-reauth" class="secondary" data-passkey="get" data-options="/portal/passkey/reauth/options" data-finish="/portal/passkey/reauth/finish" data-csrf="{{csrf}}" data-next="{{next}}" data-text-failed="{{t.passkeyFailed}}" data-text-cancelled="{{t.passkeyCancelled}}" data-text-unsupported="{{t.passkeyUnsupported}}" hidden>{{t.passkeyReauthButton}}</button>
            <p id="passkey-status" class="error" role="alert" hidden></p>
            <noscript><p>{{t.passkeyNoScript}}</p></noscript>
            </section>
            """,
        "passkey.account": """
            <dl class="facts">
            <div><dt>{{t.emailLabel}}</dt><dd id="account-email">{{email}}</dd></div>
            <div><dt>{{t.accountTOTPLabel}}</dt><dd id="account-totp">{{totp}}</dd></div>
            </dl>
            <section aria-labelledby="passkeys-heading">
            <h2 id="passkeys-heading">{{t.passkeysHeading}}</h2>
            <table id="passkeys">
            <caption>{{t.passkeysCaption}}</caption>
            <thead><tr><th scope="col">{{t.passkeyNameColumn}}</th><th scope="col">{{t.passkeyCreatedColumn}}</th><th scope="col">{{t.passkeyLastUsedColumn}}</th><th scope="col">{{t.passkeyActionColumn}}</th></tr></thead>
            <tbody>
            {{#passkeys}}<tr><td class="passkey-name">{{name}}</td><td>{{created}}</td><td>{{lastUsed}}</td><td><form class="remove-passkey" method="post" action="/portal/account/passkeys/{{id}}/remove"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary" aria-label="{{t.passkeyRemoveButton}}: {{name}}">{{t.passkeyRemoveButton}}</button></form></td></tr>
            {{/passkeys}}
            </tbody>
            </table>
            {{^passkeys}}<p id="no-passkeys">{{t.noPasskeys}}</p>{{/passkeys}}
            {{#available}}
            <div class="card">
            <h3 id="passkey-add-heading">{{t.passkeyAddHeading}}</h3>
            <div class="field">
            <label for="passkey-name">{{t.passkeyNameLabel}}</label>
            <input id="passkey-name" type="text" maxlength="100" autocomplete="off">
            </div>
            <button type="button" id="passkey-add" data-passkey="create" data-options="/portal/passkey/add/options" data-finish="/portal/passkey/add/finish" data-csrf="{{csrf}}" data-name-field="passkey-name" data-text-failed="{{t.passkeyFailed}}" data-text-cancelled="{{t.passkeyCancelled}}" data-text-unsupported="{{t.passkeyUnsupported}}" hidden>{{t.passkeyAddButton}}</button>
            <p id="passkey-status" class="error" role="alert" hidden></p>
            <noscript><p>{{t.passkeyNoScript}}</p></noscript>
            </div>
            {{/available}}
            </section>
            """,
    ]
}
