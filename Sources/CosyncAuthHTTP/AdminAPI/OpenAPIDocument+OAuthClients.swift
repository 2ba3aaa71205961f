import CosyncAuth

/// The schemas of the OAuth client operations (<doc:OAuth> §2), joined to the document's schemas.
/// The rules between fields that JSON Schema can state are stated: a public client's method is `none`
/// and its grants leave out client_credentials; keys (`jwks` or `jwksUri`, one of them) exactly for
/// private_key_jwt; a redirect URI when the authorization code is granted. A change that conflicts with
/// the stored client instead (its kind, its method, its grants, its redirect URIs) is a 409.
extension OpenAPIDocument {
    static let oauthClientSchemas: [String: JSONValue] = {
        let grants = OAuthGrantType.allCases.map(\.rawValue)
        let methods = OAuthClient.AuthMethod.allCases.map(\.rawValue)
        let redirectURI = type("string", [
            "format": .string("redirect-uri"), "minLength": .int(1), "maxLength": .int(2048),
            "description": .string("""
                format redirect-uri: one of RFC 8252's three kinds: a private-use scheme in reverse-domain form \
                (com.example.app:/callback), https with a host, or http on a loopback IP address (http://127.0.0.1/callback; \
                any port matches); no fragment, no user information, no white space or control characters
                """),
        ])
        let uris = type("array", ["items": redirectURI, "maxItems": .int(OAuthClientAdministration.maxURIs), "uniqueItems": .bool(true)])
        let jwk = type("object", [
            "required": strings(["kty"]),
            "properties": .object([
                "kty": enumeration(["RSA", "EC", "OKP"]), "crv": enumeration(["P-256", "Ed25519"]), "alg": enumeration(ClientKeys.algorithms),
                "use": enumeration(["sig"]), "kid": text(max: 256, min: 1),
            ]),
        ])
        let lifetime = { (range: ClosedRange<Int>) in
            type("integer", ["minimum": .int(range.lowerBound), "maximum": .int(range.upperBound), "description": .string("seconds")])
        }
        let input: [String: JSONValue] = [
            "name": text(max: OAuthClientAdministration.maxNameLength, pattern: namePattern),
            "kind": enumeration(OAuthClient.Kind.allCases.map(\.rawValue)),
            "tokenEndpointAuthMethod": enumeration(methods),
            "redirectUris": uris, "postLogoutRedirectUris": uris,
            "grantTypes": type("array", ["items": enumeration(grants), "minItems": .int(1), "maxItems": .int(grants.count),
                                         "uniqueItems": .bool(true)]),
            "scopes": type("array", ["items": type("string", ["pattern": .string(OAuthClientAdministration.scopePattern)]),
                                     "maxItems": .int(OAuthClientAdministration.maxScopes), "uniqueItems": .bool(true)]),
            "accessTokenSeconds": lifetime(OAuthClientAdministration.accessTokenRange),
            "refreshSlidingSeconds": lifetime(OAuthClientAdministration.refreshRange),
            "refreshAbsoluteSeconds": lifetime(OAuthClientAdministration.refreshRange),
            "refreshGraceSeconds": lifetime(OAuthClientAdministration.graceRange),
            "dpopRequired": type("boolean"),
            "jwks": type("object", [
                "required": strings(["keys"]),
                "properties": .object(["keys": type("array", ["items": jwk, "minItems": .int(1), "maxItems": .int(ClientKeys.maxKeys)])]),
                "description": .string("""
                    private_key_jwt only: a JWKS of public signing keys: RSA of 2048 to 8192 bits (RS256, PS256), EC on P-256 \
                    (ES256) or OKP on Ed25519 (EdDSA); no private members, use "sig" if any, distinct kids
                    """),
            ]),
            "jwksUri": type("string", [
                "format": .string("jwks-uri"), "minLength": .int(1), "maxLength": .int(WebhookURLGuard.maxLength),
                "description": .string("""
                    private_key_jwt only. format jwks-uri: an absolute https URL whose host resolves only to public addresses \
                    when the client is saved and before every fetch (http only to a loopback IP address, where the operator \
                    allows http and loopback for outgoing calls), no user or password, no fragment
                    """),
            ]),
        ]
        func has(_ name: String, _ schema: JSONValue) -> JSONValue {
            .object(["required": strings([name]), "properties": .object([name: schema])])
        }
        let noKeys: JSONValue = .object(["not": .object(["anyOf": .array([
            .object(["required": strings(["jwks"])]), .object(["required": strings(["jwksUri"])]),
        ])])])
        let createRules: [JSONValue] = [
            .object([
                "if": has("kind", .object(["const": .string("public")])),
                "then": .object(["properties": .object([
                    "tokenEndpointAuthMethod": .object(["const": .string("none")]),
                    "grantTypes": .object(["not": .object(["contains": .object(["const": .string("client_credentials")])])]),
                ])]),
                "else": .object(["properties": .object(["tokenEndpointAuthMethod": .object(["enum": strings(methods.filter { $0 != "none" })])])]),
            ]),
            .object([
                "if": has("tokenEndpointAuthMethod", .object(["const": .string("private_key_jwt")])),
                "then": .object(["oneOf": .array([.object(["required": strings(["jwks"])]), .object(["required": strings(["jwksUri"])])])]),
                "else": noKeys,
            ]),
            .object([
                "if": has("grantTypes", .object(["not": .object(["contains": .object(["const": .string("authorization_code")])])])),
                "else": .object(["required": strings(["redirectUris"]), "properties": .object(["redirectUris": .object(["minItems": .int(1)])])]),
            ]),
        ]
        var patch = input
        patch["kind"] = nil
        let patchRules: [JSONValue] = [
            .object(["not": .object(["required": strings(["jwks", "jwksUri"])])]),
            .object(["if": has("tokenEndpointAuthMethod", .object(["enum": strings(methods.filter { $0 != "private_key_jwt" })])), "then": noKeys]),
            .object([
                "if": has("grantTypes", .object(["contains": .object(["const": .string("authorization_code")])])),
                "then": .object(["properties": .object(["redirectUris": .object(["minItems": .int(1)])])]),
            ]),
        ]
        func with(_ rules: [JSONValue], _ schema: JSONValue) -> JSONValue {
            guard var object = schema.objectValue else { return schema }
            object["allOf"] = .array(rules)
            return .object(object)
        }
        var view = input
        view["clientId"] = type("string", ["pattern": .string(OAuthClientAdministration.clientIdPattern)])
        view["name"] = type("string")
        for key in ["redirectUris", "postLogoutRedirectUris", "grantTypes", "scopes"] { view[key] = type("array", ["items": type("string")]) }
        view["jwks"] = nullable("object")
        view["jwksUri"] = nullable("string")
        view["createdAt"] = dateTime
        view["updatedAt"] = dateTime
        var written = view
        written["clientSecret"] = type("string", [
            "pattern": .string("^ccs_[A-Za-z0-9_-]{43}$"), "description": .string("shown only here; the server keeps its SHA-256"),
        ])
        return [
            "OAuthClientInput": with(createRules, object(input, required: ["name", "kind"])),
            "OAuthClientPatch": with(patchRules, object(patch)),
            "OAuthClient": object(view, required: Array(view.keys)),
            "OAuthClientWritten": object(written, required: Array(view.keys)),
            "OAuthClientSecretRotation": object(written, required: Array(written.keys)),
            "OAuthClientList": object(["clients": type("array", ["items": ref("OAuthClient")])], required: ["clients"]),
        ]
    }()
}
