import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import Mustache

/// Passkeys on the hosted login page (<doc:OAuth>, "Passkeys on the hosted page"), under the issuer
/// I = `{public URL}/apps/{appId}`. The core is `BrowserPasskey` (the AppKey flows themselves); this
/// file is its wire, the block the sign-in page shows, and the script that drives it.
///
/// **Stable contract** (browser tests and the script rely on it):
///
/// | Method and path | Body (JSON) | Answer (JSON) |
/// |---|---|---|
/// | `GET I/oauth/assets/passkey.js` | | the script (`text/javascript`, cacheable, ETag) |
/// | `POST I/oauth/login/passkey/options` | `request`, `handle` | `{"publicKey": PublicKeyCredentialRequestOptionsJSON}` |
/// | `POST I/oauth/login/passkey/finish` | `request`, `handle`, `credential` | `{"location": URL}` and the browser-session cookie |
/// | `POST I/oauth/login/passkey/signup/options` | `request`, `handle`, `displayName` | `{"publicKey": PublicKeyCredentialCreationOptionsJSON}` |
/// | `POST I/oauth/login/passkey/signup/confirm` | `request`, `handle`, `credential` | `{"signupToken": …, "handle": …}` (a code went to the handle) |
/// | `POST I/oauth/login/passkey/signup/complete` | `request`, `signupToken`, `code` | `{"location": URL}` and the browser-session cookie |
///
/// - `request` is the waiting authorization request's reference (the page's `r`); `credential` is the
///   PublicKeyCredential as JSON (`id`, `rawId`, `type`, `response` with base64url members).
/// - Every POST needs `Content-Type: application/json`, the browser's binding cookie, and the page's
///   CSRF token in the `X-CSRF-Token` header (or a `csrf` member): the token of purpose
///   `login:<request>` (`HostedCSRF`), as the page's forms carry. A browser `Origin` other than the
///   public URL's is refused.
/// - `location` is the same resume step the password form ends with (`HostedLoginRoutes.completion`):
///   the browser goes there, and from there to the client's redirect URI with the code.
/// - A refusal is `{"error": reason, "message": text}` (the text in the page's language), `no-store`:
///   `csrf` 403, `request_expired` 400, `other_browser` 400, `unsupported_media_type` 415, or a
///   `BrowserPasskey.Refusal.Reason` (`passkeyRefused`, `noPasskey`, `unknownAccount`, …) with its status.
///
/// The block on the page (`HostedSignInOptions`, rendered by `block`) is `<div id="cosync-passkey">`
/// with the inputs `#passkey-handle`, `#passkey-signup-handle`, `#passkey-display-name`,
/// `#passkey-code`, the buttons `#passkey-sign-in`, `#passkey-sign-up`, `#passkey-complete-signup`,
/// and the status line `#passkey-status`. Its data attributes carry the URLs, the reference, the CSRF
/// token and the texts; the script holds none of its own.
struct HostedPasskeyRoutes {
    let services: CosyncServices

    enum Path {
        static let script = "/oauth/assets/passkey.js"
        static let options = "/oauth/login/passkey/options"
        static let finish = "/oauth/login/passkey/finish"
        static let signupOptions = "/oauth/login/passkey/signup/options"
        static let signupConfirm = "/oauth/login/passkey/signup/confirm"
        static let signupComplete = "/oauth/login/passkey/signup/complete"
    }

    /// The largest JSON body accepted (a registration with attestation is a few KiB).
    static let maxBody = 64 * 1024

    func register(on issuer: RouterGroup<OAuthAppContext>) {
        issuer.get("oauth/assets/passkey.js") { request, _ in Self.script(request) }
        issuer.post("oauth/login/passkey/options") { request, context in
            await call(request, context) { visit, body in
                let options = try await passkeys.signInOptions(app: context.app, handle: body.text("handle"))
                return JSONBody.response(["publicKey": Self.json(options)], headers: Self.noStore)
            }
        }
        issuer.post("oauth/login/passkey/finish") { request, context in
            await call(request, context) { visit, body in
                let signIn = try await passkeys.signIn(app: context.app, handle: body.text("handle"), credential: try body.credential())
                return try await continuation(visit, signIn)
            }
        }
        issuer.post("oauth/login/passkey/signup/options") { request, context in
            await call(request, context) { visit, body in
                let locale = HostedText.accountLocale(
                    app: context.app, uiLocales: visit.pending.request.uiLocales, acceptLanguage: request.headers[.acceptLanguage])
                let options = try await passkeys.signupOptions(
                    app: context.app, handle: body.text("handle"), displayName: body.text("displayName"), locale: locale)
                return JSONBody.response(["publicKey": Self.json(options)], headers: Self.noStore)
            }
        }
        issuer.post("oauth/login/passkey/signup/confirm") { request, context in
            await call(request, context) { visit, body in
                let pending = try await passkeys.signupConfirm(app: context.app, handle: body.text("handle"), credential: try body.credential())
                return JSONBody.response(
                    ["signupToken": .string(pending.signupToken), "handle": .string(pending.handle)], headers: Self.noStore)
            }
        }
        issuer.post("oauth/login/passkey/signup/complete") { request, context in
            await call(request, context) { visit, body in
                let signIn = try await passkeys.signupComplete(app: context.app, signupToken: body.text("signupToken"), code: body.text("code"))
                return try await continuation(visit, signIn)
            }
        }
    }

    var passkeys: BrowserPasskey { services.oauth.browserPasskey }

    // MARK: the sign-in page's block

    /// The passkey entry of the sign-in page's slot.
    static let option = HostedSignInOption { context in
        let passkeys = context.services.oauth.browserPasskey
        guard passkeys.offersSignIn(app: context.app) else { return nil }
        return (block(context, signup: passkeys.offersSignup(app: context.app)), [context.issuerPath + Path.script])
    }

    static let template: MustacheTemplate? = try? MustacheTemplate(string: """
        <div id="cosync-passkey" class="passkey" data-request="{{reference}}" data-csrf="{{csrf}}" data-options="{{options}}" data-finish="{{finish}}" data-signup-options="{{signupOptions}}" data-signup-confirm="{{signupConfirm}}" data-signup-complete="{{signupComplete}}"{{#texts}} data-text-{{name}}="{{value}}"{{/texts}}>
        <div class="field">
        <label for="passkey-handle">{{handleLabel}}</label>
        <input id="passkey-handle" data-passkey-field="handle" type="{{handleType}}" autocomplete="username webauthn" autocapitalize="none" spellcheck="false" value="{{handle}}">
        </div>
        <button type="button" id="passkey-sign-in" data-passkey-action="sign-in">{{signInButton}}</button>
        <p id="passkey-status" class="error" role="alert" data-passkey-status hidden></p>
        <noscript><p>{{noscript}}</p></noscript>
        {{#signup}}
        <h2>{{signupHeading}}</h2>
        <div class="field">
        <label for="passkey-signup-handle">{{signupHandleLabel}}</label>
        <input id="passkey-signup-handle" data-passkey-field="signup-handle" type="{{signupHandleType}}" autocomplete="username" autocapitalize="none" spellcheck="false">
        </div>
        <div class="field">
        <label for="passkey-display-name">{{displayNameLabel}}</label>
        <input id="passkey-display-name" data-passkey-field="display-name" type="text" autocomplete="name" maxlength="128">
        </div>
        <button type="button" id="passkey-sign-up" class="secondary" data-passkey-action="sign-up">{{signupButton}}</button>
        <div data-passkey-code-step hidden>
        <div class="field">
        <label for="passkey-code">{{codeLabel}}</label>
        <input id="passkey-code" data-passkey-field="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="12">
        </div>
        <button type="button" id="passkey-complete-signup" data-passkey-action="complete-signup">{{verifyButton}}</button>
        </div>
        {{/signup}}
        </div>
        """)

    static func block(_ context: HostedSignInOptionContext, signup: Bool) -> String {
        let language = context.language
        let text = HostedPasskeyText(code: language.code)
        let settings = context.app.settings
        let phones = settings.handleType != .email
        let values: [String: Any] = [
            "reference": context.reference, "csrf": context.csrf,
            "options": context.issuerPath + Path.options, "finish": context.issuerPath + Path.finish,
            "signupOptions": context.issuerPath + Path.signupOptions, "signupConfirm": context.issuerPath + Path.signupConfirm,
            "signupComplete": context.issuerPath + Path.signupComplete,
            "texts": [
                ("unsupported", text(.unsupported)), ("cancelled", text(.cancelled)), ("exists", text(.exists)), ("failed", text(.failed)),
                ("handle", language(.missingField)), ("code", language(.missingField)), ("code-sent", text(.codeSent)),
            ].map { ["name": $0.0, "value": $0.1] },
            "handleLabel": settings.userNamesEnabled || phones ? text(.handleAnyLabel) : language(.handleLabel),
            "handleType": settings.userNamesEnabled || phones ? "text" : "email",
            "handle": context.handle ?? "",
            "signInButton": text(.signInButton), "noscript": text(.noscript),
            "signup": signup, "signupHeading": text(.signupHeading),
            "signupHandleLabel": phones ? text(.signupHandleLabel) : language(.handleLabel), "signupHandleType": phones ? "text" : "email",
            "displayNameLabel": text(.displayNameLabel), "signupButton": text(.signupButton),
            "codeLabel": language(.codeLabel), "verifyButton": language(.verifyButton),
        ]
        return template?.render(values) ?? ""
    }

    // MARK: the script

    static func script(_ request: Request) -> Response {
        var headers: HTTPFields = [
            .contentType: "text/javascript; charset=utf-8", .cacheControl: "public, max-age=3600", .eTag: HostedPasskeyScript.etag,
            HostedPages.xContentTypeOptions: "nosniff",
        ]
        let presented = request.headers[.ifNoneMatch]?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        if presented.contains(HostedPasskeyScript.etag) || presented.contains("*") {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentLength] = String(HostedPasskeyScript.bytes.count)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: HostedPasskeyScript.bytes)))
    }

    // MARK: the JSON endpoints

    static let noStore: HTTPFields = [.cacheControl: "no-store", OAuthWire.pragma: "no-cache", HostedPages.xContentTypeOptions: "nosniff"]

    /// One call of the page's script, checked: the body is JSON, the CSRF token is this browser's for
    /// this request, the request still waits for this browser. Then `body` runs; a refusal becomes
    /// `{"error", "message"}` in the page's language.
    struct Visit {
        let app: App
        let reference: String
        let browserKey: String
        let pending: OAuthAuthorization.Pending
        let text: HostedPasskeyText
    }

    struct Body {
        let object: [String: JSONValue]

        func text(_ name: String) -> String {
            guard case .string(let value) = object[name] else { return "" }
            return value
        }

        func credential() throws(BrowserPasskey.Refusal) -> [String: JSONValue] {
            guard case .object(let credential) = object["credential"] else { throw .init(.invalidRequest, "credential must be an object") }
            return credential
        }
    }

    func call(_ request: Request, _ context: OAuthAppContext, _ body: (Visit, Body) async throws -> Response) async -> Response {
        let app = context.app
        var language = HostedText.language(app: app, uiLocales: [], acceptLanguage: request.headers[.acceptLanguage])
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/json") else {
            return Self.refusal("unsupported_media_type", language(.badRequest), status: .unsupportedMediaType)
        }
        if let origin = request.headers[.origin], origin != passkeys.pageOrigin {
            return Self.refusal("csrf", language(.formExpired), status: .forbidden)
        }
        let object: [String: JSONValue]
        do {
            let buffer = try await request.body.collect(upTo: Self.maxBody)
            guard let parsed = (try? JSONDecoder().decode(JSONValue.self, from: Data(buffer.readableBytesView)))?.objectValue,
                JSONBody.firstNULField(.object(parsed), path: "") == nil
            else { return Self.refusal("invalid_request", language(.badRequest), status: .badRequest) }
            object = parsed
        } catch {
            return Self.refusal("invalid_request", language(.badRequest), status: .contentTooLarge)
        }
        let parsed = Body(object: object)
        let reference = parsed.text("request")
        let browserKey = HostedCookies.browserKey(request, services: services)
        let csrf = request.headers[Self.csrfHeader] ?? parsed.text("csrf")
        guard services.oauth.csrf.verify(csrf, browserKey: browserKey, appId: app.appId, purpose: "login:" + reference), let browserKey else {
            return Self.refusal("csrf", language(browserKey == nil ? .cookiesNeeded : .formExpired), status: .forbidden)
        }
        let pending: OAuthAuthorization.Pending
        do {
            pending = try await services.oauth.authorization.pending(app: app, reference: reference, browserKey: browserKey)
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return Self.refusal("other_browser", language(.cookiesNeeded), status: .badRequest)
        } catch OAuthAuthorization.PendingFailure.gone {
            return Self.refusal("request_expired", language(.requestExpired), status: .badRequest)
        } catch {
            services.logger.error("hosted passkey: reading the request failed", metadata: ["error": "\(String(reflecting: error))"])
            return Self.refusal("server_error", language(.genericError), status: .internalServerError)
        }
        language = HostedText.language(app: app, uiLocales: pending.request.uiLocales, acceptLanguage: request.headers[.acceptLanguage])
        let visit = Visit(app: app, reference: reference, browserKey: browserKey, pending: pending, text: HostedPasskeyText(code: language.code))
        do {
            return try await body(visit, parsed)
        } catch let refusal as BrowserPasskey.Refusal {
            return Self.refusal(refusal.reason.rawValue, Self.message(refusal.reason, language), status: HTTPResponse.Status(code: refusal.status))
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return Self.refusal("other_browser", language(.cookiesNeeded), status: .badRequest)
        } catch OAuthAuthorization.PendingFailure.gone {
            return Self.refusal("request_expired", language(.requestExpired), status: .badRequest)
        } catch {
            services.logger.error("hosted passkey: the sign-in failed", metadata: ["error": "\(String(reflecting: error))"])
            return Self.refusal("server_error", language(.genericError), status: .internalServerError)
        }
    }

    /// After a passkey sign-in: the code for the waiting request, the browser session, and where the
    /// browser goes next: the password form's continuation (`HostedLoginRoutes.completion`).
    func continuation(_ visit: Visit, _ signIn: BrowserPasskey.SignIn) async throws -> Response {
        // `user` (RFC 8176) only when the app demands user verification: the verifier then refused
        // any assertion without it.
        let amr = visit.app.settings.userVerification == .required ? OAuthAuthorization.amr(.passkey, app: visit.app) : ["hwk"]
        let done = try await HostedLoginRoutes.completion(
            services: services, app: visit.app, reference: visit.reference, browserKey: visit.browserKey,
            signedIn: HostedSignIn.SignedIn(sessionId: signIn.sessionId, userId: signIn.userId, amr: amr))
        var headers = Self.noStore
        headers.append(HTTPField(name: .setCookie, value: done.setCookie))
        return JSONBody.response(["location": .string(done.location)], headers: headers)
    }

    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    static func refusal(_ reason: String, _ message: String, status: HTTPResponse.Status) -> Response {
        JSONBody.response(["error": .string(reason), "message": .string(message)], status: status, headers: noStore)
    }

    static func message(_ reason: BrowserPasskey.Refusal.Reason, _ language: HostedText.Language) -> String {
        let text = HostedPasskeyText(code: language.code)
        return switch reason {
        case .unavailable: text(.unavailable)
        case .invalidRequest: language(.missingField)
        case .unknownAccount, .noPasskey: text(.noPasskey)
        case .passkeyRefused: text(.refused)
        case .accountSuspended: language(.userSuspended)
        case .useProvider: text(.useProvider)
        case .rateLimited: language(.rateLimited)
        case .accountExists: language(.handleTaken)
        case .invalidHandle: text(.invalidHandle)
        case .signupDisabled: language(.signupDisabled)
        case .invalidCode: language(.invalidCode)
        case .signupExpired: language(.codeExpired)
        }
    }

    // MARK: WebAuthn options as the browser takes them (WebAuthn Level 3 JSON forms)

    static func descriptor(_ d: PasskeyDescriptor) -> JSONValue {
        .object(["type": .string("public-key"), "id": .string(Base64URL.encode(d.credentialId)), "transports": .array(d.transports.map { .string($0) })])
    }

    /// PublicKeyCredentialRequestOptionsJSON. The account's name is not repeated: the page only
    /// learns which credentials to ask for.
    static func json(_ o: PasskeyRequestOptions) -> JSONValue {
        .object([
            "challenge": .string(o.challenge), "rpId": .string(o.rpId), "timeout": .int(o.timeout),
            "userVerification": .string(o.userVerification), "allowCredentials": .array(o.allowCredentials.map(descriptor)),
        ])
    }

    /// PublicKeyCredentialCreationOptionsJSON. `user.id` is base64url of the AppKey user id's 32 hex
    /// characters, so the authenticator's user handle is what `PasskeyMethod` expects.
    static func json(_ o: PasskeyCreationOptions) -> JSONValue {
        .object([
            "challenge": .string(o.challenge), "rp": .object(["id": .string(o.rpId), "name": .string(o.rpName)]),
            "user": .object([
                "id": .string(Base64URL.encode(Array(AppKeyIds.wire(o.user.id).utf8))), "name": .string(o.user.name),
                "displayName": .string(o.user.displayName),
            ]),
            "pubKeyCredParams": .array(o.algorithms.map { .object(["type": .string("public-key"), "alg": .int($0)]) }),
            "timeout": .int(o.timeout), "attestation": .string(o.attestation),
            "excludeCredentials": .array(o.excludeCredentials.map(descriptor)),
            "authenticatorSelection": .object([
                "residentKey": .string(o.residentKey), "requireResidentKey": .bool(o.requireResidentKey),
                "userVerification": .string(o.userVerification),
            ]),
            "extensions": .object(["credProps": .bool(o.credProps)]),
        ])
    }
}

/// The passkey block's own texts, by the app's locale code like `HostedText` (a missing one falls
/// back to English). The texts the page already has (labels, most refusals) come from `HostedText`.
struct HostedPasskeyText: Sendable {
    enum Key: CaseIterable {
        case signInButton, handleAnyLabel, noscript, signupHeading, signupHandleLabel, displayNameLabel, signupButton, codeSent
        case unsupported, cancelled, exists, failed, unavailable, noPasskey, refused, useProvider, invalidHandle
    }

    let code: String

    func callAsFunction(_ key: Key) -> String { Self.tables[code]?[key] ?? Self.english[key] ?? "" }

    static let english: [Key: String] = [
        .signInButton: "Sign in with a passkey",
        .handleAnyLabel: "Email, phone or user name",
        .noscript: "Passkeys need JavaScript. Turn it on for this site and reload the page.",
        .signupHeading: "New here? Create an account with a passkey",
        .signupHandleLabel: "Email or phone",
        .displayNameLabel: "Your name",
        .signupButton: "Create a passkey",
        .codeSent: "We sent you a code. Enter it to finish creating your account.",
        .unsupported: "This browser cannot use passkeys.",
        .cancelled: "The passkey request was cancelled or timed out.",
        .exists: "This device already has a passkey for this account.",
        .failed: "The passkey could not be used. Please try again.",
        .unavailable: "Passkeys are not available for this app.",
        .noPasskey: "No passkey was found for this account. Check what you typed.",
        .refused: "This passkey could not be verified. Please try again.",
        .useProvider: "This account signs in with Apple or Google. Sign in in the app.",
        .invalidHandle: "Enter a valid email address or phone number.",
    ]

    static let french: [Key: String] = [
        .signInButton: "Se connecter avec une clé d’accès",
        .handleAnyLabel: "E-mail, téléphone ou nom d’utilisateur",
        .noscript: "Les clés d’accès ont besoin de JavaScript. Activez-le pour ce site et rechargez la page.",
        .signupHeading: "Nouveau ? Créez un compte avec une clé d’accès",
        .signupHandleLabel: "E-mail ou téléphone",
        .displayNameLabel: "Votre nom",
        .signupButton: "Créer une clé d’accès",
        .codeSent: "Nous vous avons envoyé un code. Saisissez-le pour terminer la création de votre compte.",
        .unsupported: "Ce navigateur ne prend pas en charge les clés d’accès.",
        .cancelled: "La demande de clé d’accès a été annulée ou a expiré.",
        .exists: "Cet appareil a déjà une clé d’accès pour ce compte.",
        .failed: "La clé d’accès n’a pas pu être utilisée. Veuillez réessayer.",
        .unavailable: "Les clés d’accès ne sont pas disponibles pour cette application.",
        .noPasskey: "Aucune clé d’accès n’a été trouvée pour ce compte. Vérifiez votre saisie.",
        .refused: "Cette clé d’accès n’a pas pu être vérifiée. Veuillez réessayer.",
        .useProvider: "Ce compte se connecte avec Apple ou Google. Connectez-vous dans l’application.",
        .invalidHandle: "Saisissez une adresse e-mail ou un numéro de téléphone valide.",
    ]

    static let tables: [String: [Key: String]] = ["EN": english, "FR": french]
}
