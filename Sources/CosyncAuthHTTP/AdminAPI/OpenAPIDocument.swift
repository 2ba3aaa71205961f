import CosyncAuth

/// The OpenAPI 3.1 document of the admin API, served at `/admin/v1/openapi.json`. A test walks the
/// router and this document and fails on any difference, so it stays true to the code.
enum OpenAPIDocument {
    struct Operation {
        let method: String
        let path: String
        let summary: String
        let auth: Auth
        var body: String? = nil
        var success: (status: String, schema: String?) = ("200", nil)
        var query: [String] = []
    }

    enum Auth { case none, operatorOnly, operatorOrAppSecret }

    static let operations: [Operation] = [
        Operation(method: "post", path: "/admin/v1/apps", summary: "Create an app", auth: .operatorOnly,
                  body: "AppCreateInput", success: ("201", "AppCreated")),
        Operation(method: "get", path: "/admin/v1/apps", summary: "List apps, newest first", auth: .operatorOnly,
                  success: ("200", "AppList"), query: ["query", "limit", "cursor"]),
        Operation(method: "get", path: "/admin/v1/apps/{appId}", summary: "Read an app", auth: .operatorOrAppSecret,
                  success: ("200", "App")),
        Operation(method: "patch", path: "/admin/v1/apps/{appId}", summary: "Change settings", auth: .operatorOrAppSecret,
                  body: "AppInput", success: ("200", "App")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}", summary: "Delete an app and everything it owns",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/app-token/rotate", summary: "Issue a new app token",
                  auth: .operatorOrAppSecret, body: "TokenRotationInput", success: ("200", "TokenRotation")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/app-secret/rotate", summary: "Issue a new app secret",
                  auth: .operatorOrAppSecret, success: ("200", "SecretRotation")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/keys/rotate", summary: "Make a new signing key pair",
                  auth: .operatorOrAppSecret, body: "KeyRotationInput", success: ("200", "KeyRotation")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/users", summary: "Search users by handle or user-name prefix, or an exact user id",
                  auth: .operatorOrAppSecret, success: ("200", "UserList"), query: ["query", "limit", "cursor"]),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/users", summary: "Create a user", auth: .operatorOrAppSecret,
                  body: "UserInput", success: ("201", "User")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/users/{userId}", summary: "Read a user",
                  auth: .operatorOrAppSecret, success: ("200", "User")),
        Operation(method: "patch", path: "/admin/v1/apps/{appId}/users/{userId}", summary: "Change a user",
                  auth: .operatorOrAppSecret, body: "UserPatch", success: ("200", "User")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/users/{userId}", summary: "Delete a user",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/users/{userId}/password", summary: "Set a user's password",
                  auth: .operatorOrAppSecret, body: "PasswordInput", success: ("204", nil)),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/users/{userId}/sessions", summary: "A user's live sessions, newest first",
                  auth: .operatorOrAppSecret, success: ("200", "SessionList")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/users/{userId}/revoke-sessions",
                  summary: "Sign out everywhere: end every session and access token of the user",
                  auth: .operatorOrAppSecret, success: ("200", "SessionsRevoked")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/users/{userId}/sessions/{sessionId}", summary: "End one session",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/users/{userId}/identities", summary: "A user's ways to sign in",
                  auth: .operatorOrAppSecret, success: ("200", "IdentityList")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/users/{userId}/identities",
                  summary: "Link an Apple or Google account whose verified e-mail is the user's handle",
                  auth: .operatorOrAppSecret, body: "IdentityLinkInput", success: ("201", "Identity")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/users/{userId}/identities/{identityId}",
                  summary: "Detach an identity (the last one only with deleteAccount=true, which deletes the account)",
                  auth: .operatorOrAppSecret, success: ("204", nil), query: ["deleteAccount"]),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/users/{userId}/passkeys", summary: "A user's passkeys (AppKey apps)",
                  auth: .operatorOrAppSecret, success: ("200", "PasskeyList")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/users/{userId}/passkeys/{passkeyId}",
                  summary: "Remove a passkey (never the user's last way to sign in: 409)",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/users/{userId}/passkey-reset",
                  summary: "Passkey reset (AppKey apps): remove the user's passkeys, end its sessions and e-mail a single-use reset token",
                  auth: .operatorOrAppSecret, success: ("200", "PasskeyReset")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/users/{userId}/upgrade",
                  summary: "Make an anonymous account permanent, keeping its user id",
                  auth: .operatorOrAppSecret, body: "UpgradeInput", success: ("200", "User")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/signups", summary: "Pending signups",
                  auth: .operatorOrAppSecret, success: ("200", "SignupList"), query: ["limit", "cursor"]),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/signups/{id}", summary: "Delete a pending signup",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/invites", summary: "Invites",
                  auth: .operatorOrAppSecret, success: ("200", "InviteList"), query: ["limit", "cursor"]),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/invites", summary: "Invite a handle by e-mail (sender superuser)",
                  auth: .operatorOrAppSecret, body: "InviteInput", success: ("201", "InviteCreated")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/invites/{id}", summary: "Delete an invite",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/email-templates/{template}/{locale}",
                  summary: "Read a template (the built-in default when the app has none)", auth: .operatorOrAppSecret,
                  success: ("200", "EmailTemplate")),
        Operation(method: "put", path: "/admin/v1/apps/{appId}/email-templates/{template}/{locale}",
                  summary: "Set a template", auth: .operatorOrAppSecret, body: "EmailTemplateInput", success: ("200", "EmailTemplate")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/email-templates/{template}/{locale}/reset",
                  summary: "Go back to the built-in template (answers it; a template never customised stays as it is)",
                  auth: .operatorOrAppSecret, success: ("200", "EmailTemplate")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/messages", summary: "The outbox of this app",
                  auth: .operatorOrAppSecret, success: ("200", "MessageList"), query: ["to", "limit", "cursor"]),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/logs", summary: "Audit log",
                  auth: .operatorOrAppSecret, success: ("200", "LogList"), query: ["limit", "cursor"]),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/webhooks", summary: "Webhook endpoints of this app",
                  auth: .operatorOrAppSecret, success: ("200", "WebhookList")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/webhooks",
                  summary: "Add a webhook endpoint (its signing secret is shown only in this answer)", auth: .operatorOrAppSecret,
                  body: "WebhookInput", success: ("201", "WebhookCreated")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}", summary: "Read a webhook endpoint",
                  auth: .operatorOrAppSecret, success: ("200", "Webhook")),
        Operation(method: "patch", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}", summary: "Change a webhook endpoint",
                  auth: .operatorOrAppSecret, body: "WebhookPatch", success: ("200", "Webhook")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}", summary: "Delete a webhook endpoint",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}/disable", summary: "Stop deliveries to an endpoint",
                  auth: .operatorOrAppSecret, success: ("200", "Webhook")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}/rotate-secret",
                  summary: "Issue a new signing secret; the previous one also signs until previousSecretExpiresAt",
                  auth: .operatorOrAppSecret, success: ("200", "WebhookSecretRotation")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}/attempts", summary: "Delivery attempts, newest first",
                  auth: .operatorOrAppSecret, success: ("200", "WebhookAttemptList"), query: ["limit", "cursor"]),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}/messages/{messageId}/replay",
                  summary: "Send one message again (same webhook-id)", auth: .operatorOrAppSecret, success: ("202", "WebhookMessageReplay")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/webhooks/{webhookId}/replay",
                  summary: "Send again every delivered or dead message since a time", auth: .operatorOrAppSecret,
                  body: "WebhookReplayInput", success: ("202", "WebhookReplay")),
        // OAuth clients (<doc:OAuth> §2); their schemas are in OpenAPIDocument+OAuthClients.swift.
        Operation(method: "get", path: "/admin/v1/apps/{appId}/oauth/clients", summary: "The app's OAuth clients, oldest first",
                  auth: .operatorOrAppSecret, success: ("200", "OAuthClientList")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/oauth/clients",
                  summary: "Register an OAuth client (a client_secret_basic or _post client's clientSecret is shown only in this answer)",
                  auth: .operatorOrAppSecret, body: "OAuthClientInput", success: ("201", "OAuthClientWritten")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/oauth/clients/{clientId}", summary: "Read an OAuth client",
                  auth: .operatorOrAppSecret, success: ("200", "OAuthClient")),
        Operation(method: "patch", path: "/admin/v1/apps/{appId}/oauth/clients/{clientId}",
                  summary: "Change an OAuth client (a move from private_key_jwt to a secret method answers the new clientSecret)",
                  auth: .operatorOrAppSecret, body: "OAuthClientPatch", success: ("200", "OAuthClientWritten")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/oauth/clients/{clientId}",
                  summary: "Delete an OAuth client; its codes, grants and refresh tokens end with it", auth: .operatorOrAppSecret,
                  success: ("204", nil)),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/oauth/clients/{clientId}/secret/rotate",
                  summary: "Issue a new client secret (shown only in this answer); the old one stops working at once",
                  auth: .operatorOrAppSecret, success: ("200", "OAuthClientSecretRotation")),
        Operation(method: "get", path: "/admin/v1/openapi.json", summary: "This document", auth: .none, success: ("200", nil)),
        Operation(method: "get", path: "/apps/{appId}/.well-known/jwks.json", summary: "The app's public keys (JWKS)",
                  auth: .none, success: ("200", "JWKS")),
        Operation(method: "get", path: "/healthz", summary: "Liveness", auth: .none, success: ("200", "Status")),
        Operation(method: "get", path: "/readyz", summary: "Readiness: database reachable, migrations applied",
                  auth: .none, success: ("200", "Status")),
    ] + federationOperations

    static func ref(_ name: String) -> JSONValue { .object(["$ref": .string("#/components/schemas/\(name)")]) }
    static func type(_ name: String, _ extra: [String: JSONValue] = [:]) -> JSONValue {
        .object(extra.merging(["type": .string(name)]) { a, _ in a })
    }
    static func nullable(_ name: String, _ extra: [String: JSONValue] = [:]) -> JSONValue {
        .object(extra.merging(["type": .array([.string(name), .string("null")])]) { a, _ in a })
    }
    static func object(_ properties: [String: JSONValue], required: [String] = [], additional: Bool = false) -> JSONValue {
        var schema: [String: JSONValue] = ["type": .string("object"), "properties": .object(properties)]
        if !required.isEmpty { schema["required"] = .array(required.sorted().map { .string($0) }) }
        if !additional { schema["additionalProperties"] = .bool(false) }
        return .object(schema)
    }
    static func list(_ key: String, _ item: String) -> JSONValue {
        let next: JSONValue = key == "webhooks" ? type("null") : nullable("string", ["pattern": .string(cursorPattern(key))])
        return object([key: type("array", ["items": ref(item)]), "nextCursor": next], required: [key, "nextCursor"])
    }

    /// The keyset cursors (`Cursor` in CosyncAuth), by list: every value of the pattern is a position the
    /// server accepts, and every nextCursor it issues has it. Empty: the first page.
    static func cursorPattern(_ list: String) -> String {
        switch list {
        case "users": "^[A-Za-z0-9_-]*$"  // base64url of the last handle's UTF-8, no padding
        case "signups", "invites":  // <microseconds since 1970>_<uuid>
            "^(-?[0-9]{1,18}_[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})?$"
        default: "^([0-9]{1,18})?$"  // the last row's id
        }
    }
    static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
    static func enumeration(_ values: [String]) -> JSONValue { type("string", ["enum": strings(values)]) }

    // MARK: string patterns (the server's own rules, written as JSON Schema; lengths count code points)

    /// No U+0000 anywhere: PostgreSQL text cannot hold it and the server refuses it with 422.
    static let noNUL = "^[^\\u0000]*$"
    /// Swift's `whitespacesAndNewlines` (what the server trims).
    static let space = "\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
    /// Characters an app name must not contain: C0 controls and line separators.
    static let nameForbidden = "\\u0000-\\u001f\\u0085\\u2028\\u2029"
    /// An app name: at most 100 code points, something besides white space, no control characters.
    static let namePattern = "^[^\(nameForbidden)]*[^\(nameForbidden)\(space)][^\(nameForbidden)]*$"
    /// A handle: trimmed, then 1-254 characters without white space or control characters.
    /// A handle with an `@` (invites and upgrades take e-mail addresses only).
    static let emailHandlePattern = "^[\(space)]*[^\(space)\\u0000-\\u001f\\u007f]*@[^\(space)\\u0000-\\u001f\\u007f]*[\(space)]*$"
    static let handlePattern = "^[\(space)]*[^\(space)\\u0000-\\u001f\\u007f]+[\(space)]*$"
    /// A user name: a letter, then letters or digits (ASCII, either case; stored lower-case).
    static let userNamePattern = "^[\(space)]*[A-Za-z][A-Za-z0-9]{0,63}[\(space)]*$"
    /// A comma-separated list of identifiers (bundle ids, client ids), or empty.
    static let commaListPattern: String = {
        let edge = "[\\t \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000]*"
        let token = "\(edge)[^,\(space)\\u0000]+\(edge)"
        return "^(\(token)(,\(token))*)?$"
    }()
    /// `local@domain.tld`-like, without white space; or empty.
    static let emailPattern = "^([^@\(space)\\u0000]+@[^@\(space)\\u0000]*\\.[^@\(space)\\u0000]*)?$"
    /// A metadata path: up to 8 dotted identifiers of up to 64 ASCII letters, digits or `_`.
    static let metaPathPattern = "^[A-Za-z_][A-Za-z0-9_]{0,63}(\\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}$"
    static let reservedClaimPattern = "^(aud|sub|exp|iat|nbf|iss|jti)(\\.|$)"
    static func text(max: Int, min: Int = 0, pattern: String = noNUL) -> JSONValue {
        var extra: [String: JSONValue] = ["maxLength": .int(max), "pattern": .string(pattern)]
        if min > 0 { extra["minLength"] = .int(min) }
        return type("string", extra)
    }
    static let dateTime = type("string", ["format": .string("date-time")])
    static let appIdSchema = type("string", ["pattern": .string("^[0-9a-f]{32}$")])
    static let uuid = type("string", ["format": .string("uuid")])

    /// `attestation: required` with an empty `trustAnchors`, or (in a create) without it, is refused.
    static func attestationRule(_ schema: JSONValue, create: Bool) -> JSONValue {
        guard var object = schema.objectValue else { return schema }
        object["if"] = .object(["properties": .object(["attestation": .object(["const": .string("required")])]),
                                "required": strings(["attestation"])])
        var then: [String: JSONValue] = ["properties": .object(["trustAnchors": .object(["minItems": .int(1)])])]
        if create { then["required"] = strings(["trustAnchors"]) }
        object["then"] = .object(then)
        return .object(object)
    }

    static func metaDataField(canEdit: Bool) -> JSONValue {
        var properties: [String: JSONValue] = [
            "id": .object(["anyOf": .array([nullable("number"), type("string", ["pattern": .string(noNUL)])])]),
            "path": .object(["allOf": .array([text(max: 200, pattern: metaPathPattern),
                                               .object(["not": .object(["pattern": .string(reservedClaimPattern)])])])]),
            "fieldName": text(max: 100, pattern: "^[^\\u0000]*[^\\t \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000\\u0000][^\\u0000]*$"),
            "required": nullable("boolean"),
        ]
        if canEdit { properties["canEdit"] = nullable("boolean") }
        return object(properties, required: ["path", "fieldName"])
    }

    static let settingSchemas: [String: JSONValue] = {
        var p: [String: JSONValue] = [:]
        let bools = ["signupEnabled", "invitationEnabled", "passwordFilter", "anonymousLoginEnabled", "userNamesEnabled",
                     "appleLoginEnabled", "googleLoginEnabled", "metaDataEmail", "jwtEnabled", "emailExtension"]
        for b in bools { p[b] = type("boolean") }
        for i in ["passwordMinLength", "passwordMinUpper", "passwordMinLower", "passwordMinDigit", "passwordMinSpecial"] {
            p[i] = type("integer", ["minimum": .int(0), "maximum": .int(128)])
        }
        p["userJWTExpiration"] = type("integer", ["minimum": .int(1), "maximum": .int(8760), "description": .string("hours")])
        p["maxLoginAttempts"] = type("integer", ["minimum": .int(1), "maximum": .int(1000)])
        p["smsDailyLimit"] = type("integer", ["minimum": .int(0), "maximum": .int(1_000_000)])
        p["freshAuthMinutes"] = type("integer", ["minimum": .int(1), "maximum": .int(1440)])
        p["name"] = text(max: AppState.maxNameLength, pattern: namePattern)
        p["status"] = enumeration(AppState.Status.allCases.map(\.rawValue))
        p["signupFlow"] = enumeration(AppSettings.SignupFlow.allCases.map(\.rawValue))
        p["twoFactorVerification"] = enumeration(AppSettings.TwoFactorMode.allCases.map(\.rawValue))
        p["appleBundleId"] = text(max: 2000, pattern: commaListPattern)
        p["googleClientId"] = text(max: 2000, pattern: commaListPattern)
        p["googleAppName"] = text(max: 100)
        p["realmAppId"] = text(max: 200)
        p["emailExtensionSenderEmail"] = text(max: 254, pattern: emailPattern)
        p["handle"] = enumeration(["email"])
        // AppKey: the WebAuthn relying party and the passkey rules.
        let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
        p["rpId"] = text(max: 253, pattern: "^(?:(?:\(label)\\.)+\(label))?$")
        p["rpName"] = text(max: 100, pattern: "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")
        let lower = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
        let port = "(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
        let origin = "^(?:https://(?:localhost|(?:\(lower)\\.)+\(lower))\(port)|http://localhost\(port)"
            + "|android:apk-key-hash:[A-Za-z0-9_-]{20,100}|ios:bundle-id:[!-~]+)$"
        p["allowedOrigins"] = type("array", [
            "items": text(max: 300, pattern: origin), "uniqueItems": .bool(true), "maxItems": .int(50),
            "description": .string("exact WebAuthn origins; empty: https://<rpId>"),
        ])
        p["userVerification"] = enumeration(AppSettings.UserVerification.allCases.map(\.rawValue))
        p["attestation"] = enumeration(AppSettings.AttestationPolicy.allCases.map(\.rawValue))
        p["counterRegression"] = enumeration(AppSettings.CounterRegression.allCases.map(\.rawValue))
        p["handleType"] = enumeration(AppSettings.HandleType.allCases.map(\.rawValue))
        p["passkeysPerUser"] = type("integer", ["minimum": .int(1), "maximum": .int(100)])
        p["challengeLifetimeSeconds"] = type("integer", ["minimum": .int(60), "maximum": .int(600)])
        p["signupCodeLifetimeSeconds"] = type("integer", ["minimum": .int(60), "maximum": .int(86_400)])
        p["trustAnchors"] = type("array", [
            "items": type("string", ["pattern": .string("^M[A-P][A-Za-z0-9+/]{2}(?:[A-Za-z0-9+/]{4}){5,4000}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")]),
            "maxItems": .int(10), "description": .string("X.509 certificates, standard base64 of DER"),
        ])
        p["locales"] = type("array", [
            "items": enumeration(Locales.known.sorted()), "uniqueItems": .bool(true),
            "contains": .object(["const": .string(Locales.defaultLocale)]),
            "description": .string("upper-case ISO 639-1 codes; EN is required and always listed first"),
        ])
        p["metaData"] = type("array", ["items": ref("MetaDataField"), "maxItems": .int(100),
                                       "description": .string("no path may equal or be a prefix of another")])
        p["metaDataInvite"] = type("array", ["items": ref("MetaDataInviteField"), "maxItems": .int(100),
                                             "description": .string("no path may equal or be a prefix of another")])
        p["appData"] = type("object", ["additionalProperties": ref("AnyJSON"), "propertyNames": .object(["pattern": .string(noNUL)]),
                                       "description": .string("free-form, at most 16 KiB of JSON")])
        let credential: [String: (String, JSONValue)] = [
            "TWILIOAccountSid": ("AC and 32 hex digits", .object(["pattern": .string("^AC[0-9a-fA-F]{32}$")])),
            "TWILIOToken": ("16-200 characters", .object(["minLength": .int(16), "maxLength": .int(200), "pattern": .string(noNUL)])),
            "TWILIOPhoneNumber": ("E.164", .object(["pattern": .string("^\\+[1-9][0-9]{6,14}$")])),
            "emailExtensionAPIKey": ("8-500 characters", .object(["minLength": .int(8), "maxLength": .int(500), "pattern": .string(noNUL)])),
        ]
        for (name, (description, rule)) in credential {
            p[name] = .object(["anyOf": .array([.object((rule.objectValue ?? [:]).merging(["type": .string("string")]) { a, _ in a }),
                                                type("null")]),
                               "writeOnly": .bool(true), "description": .string("\(description); null clears it")])
        }
        return p
    }()

    static let schemas: [String: JSONValue] = {
        var readable = settingSchemas
        for c in ProviderCredentials.fieldNames { readable[c] = nil }
        readable["name"] = type("string")
        readable["appId"] = appIdSchema
        readable["product"] = enumeration(AppProduct.allCases.map(\.rawValue))
        readable["appToken"] = type("string")
        readable["rawPublicKey"] = type("string", ["description": .string("base64 of the SPKI PEM")])
        readable["credentials"] = object(Dictionary(uniqueKeysWithValues: ProviderCredentials.fieldNames.map { ($0, type("boolean")) }),
                                         required: ProviderCredentials.fieldNames)
        readable["createdAt"] = dateTime
        readable["updatedAt"] = dateTime
        readable["metaData"] = type("array", ["items": type("object")])
        readable["metaDataInvite"] = type("array", ["items": type("object")])
        readable["locales"] = type("array", ["items": type("string")])
        readable["appData"] = type("object")
        for key in ["appleBundleId", "googleClientId", "googleAppName", "realmAppId", "emailExtensionSenderEmail"] { readable[key] = type("string") }
        let always = readable.keys.filter { $0 != "appToken" && $0 != "rawPublicKey" }
        var created = readable
        created["appSecret"] = type("string", ["description": .string("shown only here and on rotation")])
        var keyRotation = readable
        keyRotation["previousKeyRetiresAt"] = dateTime
        let user: [String: JSONValue] = [
            "userId": uuid, "handle": type("string"), "userName": nullable("string"),
            "locale": type("string"), "status": type("string"),
            "loginProvider": type("string"), "metaData": type("object"), "phone": nullable("string"),
            "phoneVerified": type("boolean"), "twoFactorPhoneVerification": type("boolean"),
            "twoFactorGoogleVerification": type("boolean"), "hasPassword": type("boolean"),
            "lastLogin": nullable("string", ["format": .string("date-time")]), "createdAt": dateTime, "updatedAt": dateTime,
        ]
        let session: [String: JSONValue] = [
            "sessionId": uuid, "method": enumeration(SessionMethod.allCases.map(\.rawValue)),
            "provenBy": enumeration(SessionMethod.allCases.map(\.rawValue)), "provenAt": dateTime,
            "clientAddress": nullable("string"), "userAgent": nullable("string"),
            "createdAt": dateTime, "lastSeenAt": dateTime, "expiresAt": dateTime,
        ]
        let identity: [String: JSONValue] = [
            "identityId": uuid, "kind": enumeration(IdentityKind.allCases.map(\.rawValue)), "subject": type("string"),
            "email": nullable("string"), "createdAt": dateTime, "lastUsedAt": nullable("string", ["format": .string("date-time")]),
        ]
        let passkey: [String: JSONValue] = [
            "passkeyId": uuid, "credentialId": type("string"), "publicKey": type("string"), "algorithm": type("integer"),
            "signCount": type("integer", ["minimum": .int(0)]), "name": type("string"), "platform": type("string"),
            "attestationFormat": type("string"), "attestationVerified": type("boolean"), "transports": type("array", ["items": type("string")]),
            "backupEligible": type("boolean"), "backupState": type("boolean"), "userVerified": type("boolean"), "cloneSuspected": type("boolean"),
            "createdAt": dateTime, "updatedAt": dateTime, "lastUsedAt": nullable("string", ["format": .string("date-time")]),
        ]
        let pending: [String: JSONValue] = [
            "id": uuid, "handle": type("string"), "status": type("string"), "locale": type("string"),
            "senderHandle": type("string"), "metaData": ref("AnyJSON"), "expiresAt": dateTime, "createdAt": dateTime,
        ]
        let templateInput: [String: JSONValue] = [
            "subject": text(max: 500, pattern: "^[^\\u0000-\\u001f\\u007f-\\u009f]*$").objectValue.map {
                JSONValue.object($0.merging(["description": .string("one line; absent: the built-in template's subject")]) { a, _ in a })
            } ?? type("string"), "html": text(max: 100_000), "text": text(max: 100_000),
            "replyTo": text(max: 254, pattern: emailPattern), "localeLinkText": text(max: 200),
        ]
        var templateView = Dictionary(uniqueKeysWithValues: templateInput.keys.map { ($0, type("string")) })
        templateView["template"] = enumeration(EmailTemplate.names)
        templateView["locale"] = type("string")
        templateView["isDefault"] = type("boolean")
        let userMetaData = type("object", ["additionalProperties": ref("AnyJSON"), "propertyNames": .object(["pattern": .string(noNUL)]),
                                           "description": .string("at most 64 KiB of JSON")])
        let locale = type("string", ["pattern": .string("^[A-Za-z]{2}$"), "description": .string("one of the app's locales")])
        let password = text(max: 1024, min: 1, pattern: noNUL).objectValue.map {
            JSONValue.object($0.merging(["writeOnly": .bool(true), "description": .string("plaintext; the app's password policy applies")]) { a, _ in a })
        } ?? type("string")
        let eventTypes = EventType.allCases.map(\.rawValue)
        let webhookInput: [String: JSONValue] = [
            "url": type("string", [
                "format": .string("webhook-url"), "minLength": .int(1), "maxLength": .int(WebhookURLGuard.maxLength),
                "description": .string("""
                    format webhook-url: an absolute https URL (RFC 3986; http only where the operator allows it), ASCII without \
                    spaces or control characters, no user or password, no fragment, a port from 1 to 65535, whose host resolves, \
                    when the endpoint is saved and before every delivery, only to public addresses (the SSRF rule)
                    """),
            ]),
            "eventTypes": type("array", ["items": enumeration(eventTypes), "minItems": .int(1), "maxItems": .int(eventTypes.count),
                                         "uniqueItems": .bool(true)]),
            "description": text(max: 500),
        ]
        let webhook: [String: JSONValue] = [
            "webhookId": uuid, "url": type("string"), "eventTypes": type("array", ["items": type("string")]),
            "description": type("string"), "enabled": type("boolean"), "disabledReason": nullable("string"),
            "consecutiveFailures": type("integer"), "previousSecretExpiresAt": nullable("string", ["format": .string("date-time")]),
            "createdAt": dateTime, "updatedAt": dateTime,
        ]
        let secret = type("string", ["pattern": .string("^whsec_[A-Za-z0-9+/]+=*$"), "description": .string("shown only here")])
        return [
            "Error": object(["error": object(["code": type("string"), "message": type("string"), "field": type("string")],
                                             required: ["code", "message"])], required: ["error"]),
            "AnyJSON": .object(["anyOf": .array([
                nullable("boolean"), type("number"), text(max: 100_000),
                type("array", ["items": ref("AnyJSON")]),
                type("object", ["additionalProperties": ref("AnyJSON"), "propertyNames": .object(["pattern": .string(noNUL)])]),
            ]), "description": .string("any JSON value without U+0000 in a key or string")]),
            // `attestation: required` needs trust anchors: in a create, in the same request; in a patch,
            // given with it or already stored (else 409 trust_anchors_required).
            "AppInput": attestationRule(object(settingSchemas), create: false),
            "AppCreateInput": attestationRule(object(settingSchemas.merging(["product": enumeration(AppProduct.allCases.map(\.rawValue))]) { a, _ in a },
                                                     required: ["name"]), create: true),
            "App": object(readable, required: Array(always)),
            "AppCreated": object(created, required: Array(always) + ["appToken", "appSecret", "rawPublicKey"]),
            "KeyRotation": object(keyRotation, required: Array(always) + ["previousKeyRetiresAt"]),
            "AppList": list("apps", "App"),
            "MetaDataField": metaDataField(canEdit: true),
            "MetaDataInviteField": metaDataField(canEdit: false),
            "TokenRotationInput": object(["gracePeriodSeconds": type("integer", ["minimum": .int(0), "maximum": .int(2_592_000)])]),
            "TokenRotation": object(["appId": appIdSchema, "appToken": type("string"), "previousTokenExpiresAt": nullable("string", ["format": .string("date-time")])],
                                    required: ["appId", "appToken", "previousTokenExpiresAt"]),
            "SecretRotation": object(["appId": appIdSchema, "appSecret": type("string")], required: ["appId", "appSecret"]),
            "KeyRotationInput": object(["retireAfterHours": type("integer", ["minimum": .int(0), "maximum": .int(8760)])]),
            "UserInput": object(["handle": text(max: 254, pattern: handlePattern), "password": password, "metaData": userMetaData,
                                 "userName": nullable("string", ["pattern": .string(userNamePattern)]), "locale": locale],
                                required: ["handle", "password"]),
            "UserPatch": object(["status": enumeration(["active", "suspended"]), "metaData": userMetaData,
                                 "userName": nullable("string", ["pattern": .string(userNamePattern)]), "locale": locale]),
            "PasswordInput": object(["password": password], required: ["password"]),
            "User": object(user, required: Array(user.keys)),
            "UserList": list("users", "User"),
            "Session": object(session, required: Array(session.keys)),
            "Identity": object(identity, required: Array(identity.keys)),
            "IdentityList": object(["identities": type("array", ["items": ref("Identity")])], required: ["identities"]),
            "Passkey": object(passkey, required: Array(passkey.keys)),
            "PasskeyList": object(["passkeys": type("array", ["items": ref("Passkey")])], required: ["passkeys"]),
            "PasskeyReset": object(["resetExpiresAt": dateTime, "passkeysRemoved": type("integer", ["minimum": .int(0)])],
                                   required: ["resetExpiresAt", "passkeysRemoved"]),
            "IdentityLinkInput": object(["provider": enumeration(["apple", "google"]), "idToken": text(max: 16_384, min: 1)],
                                        required: ["provider", "idToken"]),
            // Either handle and password, or provider and idToken (a mix is answered 422).
            "UpgradeInput": object(["handle": text(max: 254, pattern: emailHandlePattern), "password": password,
                                    "provider": enumeration(["apple", "google"]), "idToken": text(max: 16_384, min: 1)]).objectValue.map {
                JSONValue.object($0.merging(["oneOf": .array([
                    .object(["required": strings(["handle", "password"]),
                             "not": .object(["anyOf": .array([.object(["required": strings(["provider"])]), .object(["required": strings(["idToken"])])])])]),
                    .object(["required": strings(["provider", "idToken"]),
                             "not": .object(["anyOf": .array([.object(["required": strings(["handle"])]), .object(["required": strings(["password"])])])])]),
                ])]) { a, _ in a })
            } ?? type("object"),
            "SessionList": object(["sessions": type("array", ["items": ref("Session")])], required: ["sessions"]),
            "SessionsRevoked": object(["revokedSessions": type("integer", ["minimum": .int(0)])], required: ["revokedSessions"]),
            "PendingRecord": object(pending, required: ["id", "handle", "status", "locale", "metaData", "expiresAt", "createdAt"]),
            "SignupList": list("signups", "PendingRecord"),
            "InviteList": list("invites", "PendingRecord"),
            "EmailTemplateInput": object(templateInput, required: ["html"]),
            "InviteInput": object(["handle": text(max: 254, pattern: emailHandlePattern),
                                   "locale": locale, "metaData": userMetaData], required: ["handle"]),
            "InviteCreated": object(["handle": type("string"), "status": enumeration(["pending"])], required: ["handle", "status"]),
            "EmailTemplate": object(templateView, required: Array(templateView.keys)),
            "Message": object(["id": type("integer"), "channel": enumeration(["email", "sms"]),
                               "to": type("string"), "template": type("string"), "subject": type("string"), "body": type("string"),
                               "status": enumeration(["queued", "sent", "failed"]),
                               "attempts": type("integer"), "createdAt": dateTime, "sentAt": nullable("string", ["format": .string("date-time")])],
                              required: ["id", "channel", "to", "template", "subject", "body", "status", "attempts", "createdAt", "sentAt"]),
            "MessageList": list("messages", "Message"),
            "LogEntry": object(["id": type("integer"), "actor": type("string"), "action": type("string"), "status": type("string"),
                                "detail": ref("AnyJSON"), "createdAt": dateTime],
                               required: ["id", "actor", "action", "status", "detail", "createdAt"]),
            "LogList": list("logs", "LogEntry"),
            "WebhookInput": object(webhookInput, required: ["url", "eventTypes"]),
            "WebhookPatch": object(webhookInput.merging(["enabled": type("boolean")]) { a, _ in a }),
            "Webhook": object(webhook, required: Array(webhook.keys)),
            "WebhookCreated": object(webhook.merging(["secret": secret]) { a, _ in a }, required: Array(webhook.keys) + ["secret"]),
            "WebhookList": list("webhooks", "Webhook"),
            "WebhookSecretRotation": object(["webhookId": uuid, "secret": secret, "previousSecretExpiresAt": nullable("string", ["format": .string("date-time")])],
                                            required: ["webhookId", "secret", "previousSecretExpiresAt"]),
            "WebhookAttempt": object(["id": type("integer"), "messageId": type("string"), "eventType": enumeration(EventType.allCases.map(\.rawValue)),
                                      "attempt": type("integer"), "httpStatus": nullable("integer"), "error": nullable("string"),
                                      "latencyMs": type("integer"), "createdAt": dateTime],
                                     required: ["id", "messageId", "eventType", "attempt", "httpStatus", "error", "latencyMs", "createdAt"]),
            "WebhookAttemptList": list("attempts", "WebhookAttempt"),
            "WebhookMessageReplay": object(["messageId": type("string"), "status": enumeration(["pending"])], required: ["messageId", "status"]),
            "WebhookReplayInput": object(["since": type("string", ["format": .string("date-time"), "maxLength": .int(64),
                                                                   "pattern": .string("^(19[7-9][0-9]|[2-9][0-9]{3})-"),
                                                                   "description": .string("from 1970 to 9999")])],
                                         required: ["since"]),
            "WebhookReplay": object(["replayed": type("integer", ["minimum": .int(0)])], required: ["replayed"]),
            "JWKS": object(["keys": type("array", ["items": type("object", ["required": strings(["kid", "kty"])])])], required: ["keys"]),
            "Status": object(["status": type("string")], required: ["status"]),
        ].merging(federationSchemas) { a, _ in a }
    }()

    // MARK: parameters, statuses and links

    static func pathParameter(_ name: String) -> JSONValue {
        let schema: JSONValue = switch name {
        case "appId": appIdSchema
        case "userId", "id", "sessionId", "identityId", "webhookId", "passkeyId", "keyId", "providerId": uuid
        case "messageId": type("string", ["pattern": .string("^msg_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")])
        case "clientId": type("string", ["pattern": .string(OAuthClientAdministration.clientIdPattern)])
        case "template": enumeration(EmailTemplate.names)
        case "locale": type("string", ["pattern": .string("^[A-Za-z]{2}$")])
        default: type("string")
        }
        return .object(["name": .string(name), "in": .string("path"), "required": .bool(true), "schema": schema])
    }

    static func queryParameter(_ name: String, of op: Operation) -> JSONValue {
        let schema: JSONValue = switch name {
        case "limit": type("integer", ["minimum": .int(1), "maximum": .int(200), "default": .int(50)])
        case "to": text(max: 254)
        case "deleteAccount": enumeration(["true", "false"])
        case "cursor":
            type("string", ["pattern": .string(cursorPattern(listName(op))),
                            "description": .string("nextCursor of the previous page (a keyset position); another form is a 400 invalid_cursor")])
        default: text(max: 200)
        }
        return .object(["name": .string(name), "in": .string("query"), "required": .bool(false), "schema": schema])
    }

    /// The list an operation pages through: the last word of its path (`apps`, `users`, `attempts`…).
    static func listName(_ op: Operation) -> String { op.path.split(separator: "/").last.map(String.init) ?? "" }

    /// The error statuses an operation can answer, from what its handler does.
    static func errorStatuses(_ op: Operation) -> [String] {
        guard op.auth != .none else { return op.path.contains("{appId}") ? ["404"] : [] }
        var statuses: Set<String> = ["401", "403"]
        if op.path.contains("{") { statuses.insert("404") }
        if !op.query.isEmpty { statuses.insert("400") }
        if op.body != nil { statuses.formUnion(["400", "413", "422"]) }
        // 409: a clash with stored data, or a rule of the app's stored settings (its locales, password
        // policy, invite fields, providers, attestation anchors).
        if ["UserInput", "UserPatch", "InviteInput", "IdentityLinkInput", "UpgradeInput", "WebhookInput", "PasswordInput", "AppInput"]
            .contains(op.body ?? "") || federationConflicts.contains(op.body ?? "") { statuses.insert("409") }
        if op.method == "delete" && op.path.hasSuffix("/identities/{identityId}") { statuses.insert("409") }
        if op.method == "delete" && op.path.hasSuffix("/passkeys/{passkeyId}") { statuses.insert("409") }
        if op.path.hasSuffix("/passkey-reset") { statuses.insert("409") }  // not an AppKey app
        if op.path.hasSuffix("/replay") { statuses.insert("409") }  // the endpoint is disabled
        // OAuth clients: too many; a change that conflicts with the stored client; no secret to rotate.
        if ["OAuthClientInput", "OAuthClientPatch"].contains(op.body ?? "") || op.path.hasSuffix("/secret/rotate") { statuses.insert("409") }
        return statuses.sorted()
    }

    /// Where the ids an operation's success response carries can be used: OpenAPI links, so that a
    /// stateful fuzzer reaches every operation with real ids.
    static func links(_ op: Operation) -> [String: JSONValue] {
        func link(to target: Operation, _ parameters: [String: String]) -> (String, JSONValue) {
            (operationId(target), .object(["operationId": .string(operationId(target)),
                                           "parameters": .object(parameters.mapValues { .string($0) })]))
        }
        func targets(under prefix: String, with names: Set<String>) -> [Operation] {
            operations.filter { target in
                let params = Set(target.path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) })
                return target.path.hasPrefix(prefix) && params == names && target.path != op.path
            }
        }
        let apps = "/admin/v1/apps/{appId}"
        var result: [(String, JSONValue)] = []
        switch (op.method, op.path) {
        case ("post", "/admin/v1/apps"):
            result = targets(under: apps, with: ["appId"]).map { link(to: $0, ["appId": "$response.body#/appId"]) }
            result += operations.filter { $0.path == "/apps/{appId}/.well-known/jwks.json" }.map { link(to: $0, ["appId": "$response.body#/appId"]) }
        case ("get", "/admin/v1/apps"):
            result = targets(under: apps, with: ["appId"]).filter { $0.method == "get" }
                .map { link(to: $0, ["appId": "$response.body#/apps/0/appId"]) }
        case ("post", "\(apps)/users"):
            result = targets(under: "\(apps)/users/{userId}", with: ["appId", "userId"])
                .map { link(to: $0, ["appId": "$request.path.appId", "userId": "$response.body#/userId"]) }
        case ("get", "\(apps)/users"):
            result = targets(under: "\(apps)/users/{userId}", with: ["appId", "userId"])
                .map { link(to: $0, ["appId": "$request.path.appId", "userId": "$response.body#/users/0/userId"]) }
        case ("get", "\(apps)/signups"), ("get", "\(apps)/invites"):
            let kind = op.path.split(separator: "/").last.map(String.init) ?? ""
            result = targets(under: "\(apps)/\(kind)/{id}", with: ["appId", "id"])
                .map { link(to: $0, ["appId": "$request.path.appId", "id": "$response.body#/\(kind)/0/id"]) }
        case ("post", "\(apps)/invites"):
            result = operations.filter { $0.method == "get" && $0.path == "\(apps)/invites" }.map { link(to: $0, ["appId": "$request.path.appId"]) }
        case (_, "\(apps)/email-templates/{template}/{locale}"):
            result = operations.filter { $0.path.hasPrefix(op.path) && $0.method != op.method }.map {
                link(to: $0, ["appId": "$request.path.appId", "template": "$response.body#/template", "locale": "$response.body#/locale"])
            }
        case ("post", "\(apps)/webhooks"):
            result = targets(under: "\(apps)/webhooks/{webhookId}", with: ["appId", "webhookId"])
                .map { link(to: $0, ["appId": "$request.path.appId", "webhookId": "$response.body#/webhookId"]) }
        case ("get", "\(apps)/webhooks"):
            result = targets(under: "\(apps)/webhooks/{webhookId}", with: ["appId", "webhookId"])
                .map { link(to: $0, ["appId": "$request.path.appId", "webhookId": "$response.body#/webhooks/0/webhookId"]) }
        case ("post", "\(apps)/oauth/clients"):
            result = targets(under: "\(apps)/oauth/clients/{clientId}", with: ["appId", "clientId"])
                .map { link(to: $0, ["appId": "$request.path.appId", "clientId": "$response.body#/clientId"]) }
        case ("get", "\(apps)/oauth/clients"):
            result = targets(under: "\(apps)/oauth/clients/{clientId}", with: ["appId", "clientId"])
                .map { link(to: $0, ["appId": "$request.path.appId", "clientId": "$response.body#/clients/0/clientId"]) }
        case ("get", "\(apps)/users/{userId}/sessions"), ("get", "\(apps)/users/{userId}/identities"),
             ("get", "\(apps)/users/{userId}/passkeys"):
            // The first item's id reaches the item's own routes (ending a session, detaching an identity, removing a passkey).
            let kind = op.path.split(separator: "/").last.map(String.init) ?? ""
            let idName = ["sessions": "sessionId", "identities": "identityId", "passkeys": "passkeyId"][kind] ?? ""
            result = targets(under: "\(op.path)/{\(idName)}", with: ["appId", "userId", idName]).map {
                link(to: $0, ["appId": "$request.path.appId", "userId": "$request.path.userId", idName: "$response.body#/\(kind)/0/\(idName)"])
            }
        case ("post", "\(apps)/users/{userId}/identities"):
            result = targets(under: "\(op.path)/{identityId}", with: ["appId", "userId", "identityId"]).map {
                link(to: $0, ["appId": "$request.path.appId", "userId": "$request.path.userId", "identityId": "$response.body#/identityId"])
            }
        case ("post", "\(apps)/webhooks/{webhookId}/disable"):
            // A disabled endpoint refuses replays (409) whatever the message.
            result = targets(under: "\(apps)/webhooks/{webhookId}/", with: ["appId", "webhookId", "messageId"]).map {
                link(to: $0, ["appId": "$request.path.appId", "webhookId": "$response.body#/webhookId"])
            }
        case ("get", "\(apps)/webhooks/{webhookId}/attempts"):
            result = targets(under: "\(apps)/webhooks/{webhookId}/messages", with: ["appId", "webhookId", "messageId"]).map {
                link(to: $0, ["appId": "$request.path.appId", "webhookId": "$request.path.webhookId",
                              "messageId": "$response.body#/attempts/0/messageId"])
            }
        default: break
        }
        return Dictionary(result, uniquingKeysWith: { a, _ in a })
    }

    static func document() -> JSONValue {
        var paths: [String: [String: JSONValue]] = [:]
        let errorResponse: JSONValue = .object(["description": .string("error"),
                                                "content": .object(["application/json": .object(["schema": ref("Error")])])])
        for op in operations {
            var operation: [String: JSONValue] = ["summary": .string(op.summary), "operationId": .string(operationId(op))]
            var parameters: [JSONValue] = op.path.split(separator: "/").compactMap { segment in
                guard segment.hasPrefix("{"), segment.hasSuffix("}") else { return nil }
                return pathParameter(String(segment.dropFirst().dropLast()))
            }
            parameters += op.query.map { queryParameter($0, of: op) }
            if !parameters.isEmpty { operation["parameters"] = .array(parameters) }
            if let body = op.body {
                operation["requestBody"] = .object(["required": .bool(!body.hasSuffix("RotationInput")),
                                                    "content": .object(["application/json": .object(["schema": ref(body)])])])
            }
            var success: [String: JSONValue] = ["description": .string("success")]
            if let schema = op.success.schema {
                success["content"] = .object(["application/json": .object(["schema": ref(schema)])])
            } else if op.path.hasSuffix("openapi.json") {
                success["content"] = .object(["application/json": .object(["schema": type("object")])])
            }
            if op.method == "post" && op.path == "/admin/v1/apps" {
                success["headers"] = .object(["Location": .object(["required": .bool(true), "schema": type("string")])])
            }
            let links = links(op)
            if !links.isEmpty { success["links"] = .object(links) }
            var responses: [String: JSONValue] = [op.success.status: .object(success)]
            for status in errorStatuses(op) { responses[status] = errorResponse }
            if responses["401"] != nil {
                responses["401"] = .object(["description": .string("no or unknown bearer token"),
                                            "headers": .object(["WWW-Authenticate": .object(["required": .bool(true), "schema": type("string")])]),
                                            "content": .object(["application/json": .object(["schema": ref("Error")])])])
            }
            if op.path == "/readyz" {
                responses["503"] = .object(["description": .string("not ready"),
                                            "content": .object(["application/json": .object(["schema": ref("Status")])])])
            }
            if op.auth != .none {
                operation["security"] = .array([.object(["bearer": .array([])])])
            } else {
                operation["security"] = .array([])
            }
            operation["responses"] = .object(responses)
            paths[op.path, default: [:]][op.method] = .object(operation)
        }
        return .object([
            "openapi": .string("3.1.0"),
            "info": .object(["title": .string("CosyncAuth admin API"), "version": .string("1.0.0"),
                             "description": .string("""
                                Operators use the operator token; developers use their app's secret, which reaches only that app. \
                                Errors are {"error": {"code", "message", "field"?}}. A method a path does not list here is \
                                answered 405 with an Allow header. A NUL character (U+0000) in any key or string of a JSON body \
                                is refused with 422 invalid_character, and in a query parameter with 400 invalid_parameter.
                                """)]),
            "paths": .object(paths.mapValues { .object($0) }),
            "components": .object([
                "schemas": .object(schemas.merging(oauthClientSchemas) { a, _ in a }),
                "securitySchemes": .object(["bearer": .object(["type": .string("http"), "scheme": .string("bearer")])]),
            ]),
        ])
    }

    static func operationId(_ op: Operation) -> String {
        let words = op.path.split(separator: "/").map { $0.replacingOccurrences(of: "{", with: "by_").replacingOccurrences(of: "}", with: "") }
        return ([op.method] + words).joined(separator: "_")
            .replacingOccurrences(of: "-", with: "_").replacingOccurrences(of: ".", with: "_")
    }
}
