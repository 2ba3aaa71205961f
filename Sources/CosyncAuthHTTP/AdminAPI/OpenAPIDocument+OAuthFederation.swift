import CosyncAuth

/// The admin operations of <doc:OAuth> §8 (the app backend's assertion keys, upstream OpenID
/// providers), joined to `OpenAPIDocument.operations` and `schemas`.
extension OpenAPIDocument {
    static let federationOperations: [Operation] = [
        Operation(method: "get", path: "/admin/v1/apps/{appId}/oauth/assertion-keys",
                  summary: "Keys the app's backend signs JWT-bearer assertions with (RFC 7523)", auth: .operatorOrAppSecret,
                  success: ("200", "AssertionKeyList")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/oauth/assertion-keys",
                  summary: "Register a public key (JWK or PEM) or a JWK-set URL, and the issuer its assertions carry",
                  auth: .operatorOrAppSecret, body: "AssertionKeyInput", success: ("201", "AssertionKey")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/oauth/assertion-keys/{keyId}", summary: "Remove an assertion key",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/oauth/upstream-providers",
                  summary: "OpenID providers the app's users sign in through", auth: .operatorOrAppSecret,
                  success: ("200", "UpstreamProviderList")),
        Operation(method: "post", path: "/admin/v1/apps/{appId}/oauth/upstream-providers",
                  summary: "Add an OpenID provider by its discovery URL (its client secret is sealed and never shown again)",
                  auth: .operatorOrAppSecret, body: "UpstreamProviderInput", success: ("201", "UpstreamProvider")),
        Operation(method: "get", path: "/admin/v1/apps/{appId}/oauth/upstream-providers/{providerId}", summary: "Read an upstream provider",
                  auth: .operatorOrAppSecret, success: ("200", "UpstreamProvider")),
        Operation(method: "patch", path: "/admin/v1/apps/{appId}/oauth/upstream-providers/{providerId}",
                  summary: "Change an upstream provider (a new discoveryUrl is fetched again; clientSecret null removes the secret)",
                  auth: .operatorOrAppSecret, body: "UpstreamProviderPatch", success: ("200", "UpstreamProvider")),
        Operation(method: "delete", path: "/admin/v1/apps/{appId}/oauth/upstream-providers/{providerId}",
                  summary: "Remove an upstream provider (its accounts stay; they sign in no more through it)",
                  auth: .operatorOrAppSecret, success: ("204", nil)),
    ]

    /// The bodies that can clash with stored data (409).
    static let federationConflicts = ["AssertionKeyInput", "UpstreamProviderInput", "UpstreamProviderPatch"]

    static let federationSchemas: [String: JSONValue] = {
        let plain = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
        let jwk = type("object", [
            "required": strings(["kty"]),
            "properties": .object([
                "kty": enumeration(["RSA", "EC", "OKP"]), "crv": enumeration(["P-256", "Ed25519"]),
                "alg": enumeration(["RS256", "PS256", "ES256", "EdDSA"]), "use": enumeration(["sig"]), "kid": text(max: 256, min: 1, pattern: plain),
            ]),
            "description": .string("a public key: RSA (n, e; 2048-8192 bits), EC on P-256 (x, y) or OKP on Ed25519 (x); never private members"),
        ])
        let url = type("string", [
            "minLength": .int(1), "maxLength": .int(FetchableURL.maxLength),
            "description": .string("an absolute https URL (http only to a loopback address), ASCII without spaces, no user information or fragment"),
        ])
        let keyView: [String: JSONValue] = [
            "keyId": uuid, "issuer": type("string"), "kid": nullable("string"), "jwk": .object(["type": strings(["object", "null"])]),
            "jwksUri": nullable("string"), "createdAt": dateTime,
        ]
        let scope = type("string", ["minLength": .int(1), "maxLength": .int(128), "pattern": .string("^[!#-\\[\\]-~]+$")])
        let providerInput: [String: JSONValue] = [
            "name": text(max: 100, min: 1, pattern: plain),
            "discoveryUrl": url.objectValue.map { JSONValue.object($0.merging([
                "format": .string("oidc-discovery-url"),
                "description": .string("format oidc-discovery-url: the issuer, or its /.well-known/openid-configuration URL, of a live OpenID provider; fetched when saved, and its issuer must be that URL"),
            ]) { _, b in b }) } ?? url,
            "clientId": text(max: 256, min: 1, pattern: plain),
            "clientSecret": .object(["anyOf": .array([text(max: 1024, min: 1), type("null")]), "writeOnly": .bool(true)]),
            "scopes": type("array", ["items": scope, "maxItems": .int(20), "contains": .object(["const": .string("openid")]),
                                     "description": .string("default openid email profile")]),
            "audiences": type("array", ["items": text(max: 256, min: 1, pattern: plain), "maxItems": .int(20),
                                        "description": .string("further client ids (native apps) whose ID tokens may be exchanged")]),
            "enabled": type("boolean"),
        ]
        let providerView: [String: JSONValue] = [
            "providerId": uuid, "name": type("string"), "discoveryUrl": type("string"), "issuer": type("string"),
            "authorizationEndpoint": type("string"), "tokenEndpoint": type("string"), "jwksUri": type("string"),
            "tokenAuthMethod": enumeration(UpstreamProvider.TokenAuthMethod.allCases.map(\.rawValue)), "clientId": type("string"),
            "hasClientSecret": type("boolean"), "scopes": type("array", ["items": type("string")]),
            "audiences": type("array", ["items": type("string")]), "enabled": type("boolean"),
            "redirectUri": type("string", ["description": .string("register it at the provider")]),
            "startUrl": type("string"), "createdAt": dateTime, "updatedAt": dateTime,
        ]
        return [
            "UpstreamProviderInput": object(providerInput, required: ["name", "discoveryUrl", "clientId"]),
            "UpstreamProviderPatch": object(providerInput),
            "UpstreamProvider": object(providerView, required: Array(providerView.keys)),
            "UpstreamProviderList": object(["providers": type("array", ["items": ref("UpstreamProvider")])], required: ["providers"]),
            "AssertionKeyInput": .object([
                "type": .string("object"), "additionalProperties": .bool(false), "required": strings(["issuer"]),
                "properties": .object([
                    "issuer": text(max: 512, min: 1, pattern: plain), "kid": text(max: 256, min: 1, pattern: plain), "jwk": jwk,
                    "pem": text(max: 16_384, min: 1).objectValue.map { JSONValue.object($0.merging([
                        "format": .string("public-key-pem"),
                        "description": .string("format public-key-pem: a SubjectPublicKeyInfo PEM of an RSA (2048-8192 bits), P-256 or Ed25519 key"),
                    ]) { _, b in b }) } ?? text(max: 16_384, min: 1),
                    "jwksUri": url.objectValue.map { JSONValue.object($0.merging([
                        "format": .string("jwks-url"),
                        "description": .string("format jwks-url: the URL of a live JWK set holding a usable signing key; fetched when saved"),
                    ]) { _, b in b }) } ?? url,
                ]),
                "oneOf": .array(["jwk", "pem", "jwksUri"].map { .object(["required": strings([$0])]) }),
            ]),
            "AssertionKey": object(keyView, required: Array(keyView.keys)),
            "AssertionKeyList": object(["keys": type("array", ["items": ref("AssertionKey")])], required: ["keys"]),
        ]
    }()
}
