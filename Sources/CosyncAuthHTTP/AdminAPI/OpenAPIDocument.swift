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
                  body: "AppInput", success: ("201", "AppCreated")),
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
                  auth: .operatorOrAppSecret, body: "KeyRotationInput", success: ("200", "App")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/users", summary: "Search users by handle or user-name prefix",
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
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/email-templates/{template}/{locale}",
                  summary: "Go back to the built-in template", auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/messages", summary: "The outbox of this app",
                  auth: .operatorOrAppSecret, success: ("200", "MessageList"), query: ["to", "limit", "cursor"]),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/logs", summary: "Audit log",
                  auth: .operatorOrAppSecret, success: ("200", "LogList"), query: ["limit", "cursor"]),
        Operation(method: "get", path: "/admin/v1/openapi.json", summary: "This document", auth: .none, success: ("200", nil)),
        Operation(method: "get", path: "/apps/{appId}/.well-known/jwks.json", summary: "The app's public keys (JWKS)",
                  auth: .none, success: ("200", "JWKS")),
        Operation(method: "get", path: "/healthz", summary: "Liveness", auth: .none, success: ("200", "Status")),
        Operation(method: "get", path: "/readyz", summary: "Readiness: database reachable, migrations applied",
                  auth: .none, success: ("200", "Status")),
        Operation(method: "get", path: "/metrics", summary: "Prometheus metrics", auth: .none, success: ("200", nil)),
    ]

    static func ref(_ name: String) -> JSONValue { .object(["$ref": .string("#/components/schemas/\(name)")]) }
    static func type(_ name: String, _ extra: [String: JSONValue] = [:]) -> JSONValue {
        .object(extra.merging(["type": .string(name)]) { a, _ in a })
    }
    static func nullable(_ name: String) -> JSONValue { .object(["type": .array([.string(name), .string("null")])]) }
    static func object(_ properties: [String: JSONValue], required: [String] = [], additional: Bool = false) -> JSONValue {
        var schema: [String: JSONValue] = ["type": .string("object"), "properties": .object(properties)]
        if !required.isEmpty { schema["required"] = .array(required.map { .string($0) }) }
        if !additional { schema["additionalProperties"] = .bool(false) }
        return .object(schema)
    }
    static func list(_ key: String, _ item: String) -> JSONValue {
        object([key: type("array", ["items": ref(item)]), "nextCursor": nullable("string")], required: [key])
    }

    static let settingSchemas: [String: JSONValue] = {
        var p: [String: JSONValue] = [:]
        let bools = ["signupEnabled", "invitationEnabled", "passwordFilter", "anonymousLoginEnabled", "userNamesEnabled",
                     "appleLoginEnabled", "googleLoginEnabled", "metaDataEmail", "jwtEnabled", "emailExtension"]
        for b in bools { p[b] = type("boolean") }
        for i in ["passwordMinLength", "passwordMinUpper", "passwordMinLower", "passwordMinDigit", "passwordMinSpecial"] {
            p[i] = type("integer", ["minimum": .int(0), "maximum": .int(128)])
        }
        p["userJWTExpiration"] = type("integer", ["minimum": .int(1), "maximum": .int(8760)])
        p["maxLoginAttempts"] = type("integer", ["minimum": .int(1), "maximum": .int(1000)])
        p["smsDailyLimit"] = type("integer", ["minimum": .int(0), "maximum": .int(1_000_000)])
        p["name"] = type("string", ["minLength": .int(1), "maxLength": .int(AppState.maxNameLength)])
        p["status"] = type("string", ["enum": .array(AppState.Status.allCases.map { .string($0.rawValue) })])
        p["signupFlow"] = type("string", ["enum": .array(AppSettings.SignupFlow.allCases.map { .string($0.rawValue) })])
        p["twoFactorVerification"] = type("string", ["enum": .array(AppSettings.TwoFactorMode.allCases.map { .string($0.rawValue) })])
        for s in ["appleBundleId", "googleClientId", "googleAppName", "realmAppId", "emailExtensionSenderEmail"] { p[s] = type("string") }
        p["handle"] = type("string", ["enum": .array([.string("email")])])
        p["locales"] = type("array", ["items": type("string", ["pattern": .string("^[A-Z]{2}$")]), "uniqueItems": .bool(true)])
        p["metaData"] = type("array", ["items": ref("MetaDataField")])
        p["metaDataInvite"] = type("array", ["items": ref("MetaDataField")])
        p["appData"] = type("object")
        for c in ProviderCredentials.fieldNames { p[c] = .object(["type": .array([.string("string"), .string("null")]), "writeOnly": .bool(true)]) }
        return p
    }()

    static let schemas: [String: JSONValue] = {
        var readable = settingSchemas
        for c in ProviderCredentials.fieldNames { readable[c] = nil }
        readable["appId"] = type("string", ["pattern": .string("^[0-9a-f]{32}$")])
        readable["appToken"] = type("string")
        readable["rawPublicKey"] = type("string", ["description": .string("base64 of the SPKI PEM")])
        readable["credentials"] = type("object", ["additionalProperties": type("boolean"), "description": .string("whether each write-only credential is set")])
        readable["createdAt"] = type("string", ["format": .string("date-time")])
        readable["updatedAt"] = type("string", ["format": .string("date-time")])
        readable["previousKeyRetiresAt"] = type("string", ["format": .string("date-time")])
        var created = readable
        created["appSecret"] = type("string", ["description": .string("shown only here and on rotation")])
        let user: [String: JSONValue] = [
            "userId": type("string", ["format": .string("uuid")]), "handle": type("string"), "userName": nullable("string"),
            "locale": type("string"), "status": type("string", ["enum": .array([.string("active"), .string("suspended")])]),
            "loginProvider": type("string"), "metaData": type("object"), "phone": nullable("string"),
            "phoneVerified": type("boolean"), "twoFactorPhoneVerification": type("boolean"),
            "twoFactorGoogleVerification": type("boolean"), "hasPassword": type("boolean"),
            "lastLogin": nullable("string"), "createdAt": type("string"), "updatedAt": type("string"),
        ]
        let pending: [String: JSONValue] = [
            "id": type("string"), "handle": type("string"), "status": type("string"), "locale": type("string"),
            "senderHandle": type("string"), "metaData": type("object"), "expiresAt": type("string"), "createdAt": type("string"),
        ]
        let template: [String: JSONValue] = [
            "subject": type("string"), "html": type("string"), "text": type("string"), "replyTo": type("string"),
            "localeLinkText": type("string"),
        ]
        var templateView = template
        templateView["template"] = type("string", ["enum": .array(EmailTemplate.names.map { .string($0) })])
        templateView["locale"] = type("string")
        templateView["isDefault"] = type("boolean")
        return [
            "Error": object(["error": object(["code": type("string"), "message": type("string"), "field": type("string")], required: ["code", "message"])], required: ["error"]),
            "AppInput": object(settingSchemas),
            "App": object(readable, required: ["appId", "name", "status"]),
            "AppCreated": object(created, required: ["appId", "appToken", "appSecret", "rawPublicKey"]),
            "AppList": list("apps", "App"),
            "MetaDataField": object(["id": .object([:]), "path": type("string"), "fieldName": type("string"),
                                     "required": type("boolean"), "canEdit": type("boolean")], required: ["path", "fieldName"]),
            "TokenRotationInput": object(["gracePeriodSeconds": type("integer", ["minimum": .int(0), "maximum": .int(2_592_000)])]),
            "TokenRotation": object(["appId": type("string"), "appToken": type("string"), "previousTokenExpiresAt": nullable("string")]),
            "SecretRotation": object(["appId": type("string"), "appSecret": type("string")]),
            "KeyRotationInput": object(["retireAfterHours": type("integer", ["minimum": .int(0), "maximum": .int(8760)])]),
            "UserInput": object(["handle": type("string"), "password": type("string", ["writeOnly": .bool(true)]), "metaData": type("object"),
                                 "userName": type("string"), "locale": type("string")], required: ["handle", "password"]),
            "UserPatch": object(["status": type("string", ["enum": .array([.string("active"), .string("suspended")])]), "metaData": type("object"),
                                 "userName": .object(["type": .array([.string("string"), .string("null")])]), "locale": type("string")]),
            "PasswordInput": object(["password": type("string", ["writeOnly": .bool(true)])], required: ["password"]),
            "User": object(user, required: ["userId", "handle", "status"]),
            "UserList": list("users", "User"),
            "PendingRecord": object(pending),
            "SignupList": list("signups", "PendingRecord"),
            "InviteList": list("invites", "PendingRecord"),
            "EmailTemplateInput": object(template, required: ["html"]),
            "InviteInput": object(["handle": type("string"), "locale": type("string"), "metaData": type("object")], required: ["handle"]),
            "InviteCreated": object(["handle": type("string"), "status": type("string")]),
            "EmailTemplate": object(templateView),
            "Message": object(["id": type("integer"), "channel": type("string", ["enum": .array([.string("email"), .string("sms")])]),
                               "to": type("string"), "template": type("string"), "subject": type("string"), "body": type("string"),
                               "status": type("string", ["enum": .array([.string("queued"), .string("sent"), .string("failed")])]),
                               "attempts": type("integer"), "createdAt": type("string"), "sentAt": nullable("string")]),
            "MessageList": list("messages", "Message"),
            "LogEntry": object(["id": type("integer"), "actor": type("string"), "action": type("string"), "status": type("string"),
                                "detail": type("object"), "createdAt": type("string")]),
            "LogList": list("logs", "LogEntry"),
            "JWKS": object(["keys": type("array", ["items": type("object")])], required: ["keys"]),
            "Status": object(["status": type("string")], required: ["status"]),
        ]
    }()

    static func document() -> JSONValue {
        var paths: [String: [String: JSONValue]] = [:]
        for op in operations {
            var operation: [String: JSONValue] = ["summary": .string(op.summary), "operationId": .string(operationId(op))]
            var parameters: [JSONValue] = op.path.split(separator: "/").compactMap { segment in
                guard segment.hasPrefix("{"), segment.hasSuffix("}") else { return nil }
                return .object(["name": .string(String(segment.dropFirst().dropLast())), "in": .string("path"),
                                "required": .bool(true), "schema": type("string")])
            }
            for q in op.query {
                parameters.append(.object(["name": .string(q), "in": .string("query"), "required": .bool(false),
                                           "schema": q == "limit" ? type("integer", ["minimum": .int(1), "maximum": .int(200)]) : type("string")]))
            }
            if !parameters.isEmpty { operation["parameters"] = .array(parameters) }
            if let body = op.body {
                operation["requestBody"] = .object(["required": .bool(op.method != "post" || !body.hasSuffix("RotationInput")),
                                                    "content": .object(["application/json": .object(["schema": ref(body)])])])
            }
            var responses: [String: JSONValue] = [:]
            if let schema = op.success.schema {
                responses[op.success.status] = .object(["description": .string("success"),
                                                        "content": .object(["application/json": .object(["schema": ref(schema)])])])
            } else {
                responses[op.success.status] = .object(["description": .string("success")])
            }
            let errorResponse: JSONValue = .object(["description": .string("error"),
                                                    "content": .object(["application/json": .object(["schema": ref("Error")])])])
            if op.auth != .none {
                for status in ["400", "401", "403", "404", "409", "422"] { responses[status] = errorResponse }
                operation["security"] = .array([.object(["bearer": .array([])])])
            }
            operation["responses"] = .object(responses)
            paths[op.path, default: [:]][op.method] = .object(operation)
        }
        return .object([
            "openapi": .string("3.1.0"),
            "info": .object(["title": .string("CosyncAuth admin API"), "version": .string("1.0.0"),
                             "description": .string("Operators use the operator token; developers use their app's secret, which reaches only that app.")]),
            "paths": .object(paths.mapValues { .object($0) }),
            "components": .object([
                "schemas": .object(schemas),
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
