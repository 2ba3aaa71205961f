import Foundation

/// A checked authorization request (RFC 6749 §4.1.1, RFC 7636, OpenID Connect Core §3.1.2.1): what
/// the hosted login page carries from the authorization endpoint to the code (<doc:OAuth> §3).
///
/// It is kept as the request's own parameters (`parameters`, stored in `oauth_requests.params`) and
/// checked again against the client whenever it is read, so a client changed while its user signs
/// in (a redirect URI or a scope removed) is judged as it is now.
public struct AuthorizationRequest: Sendable, Equatable {
    /// What `prompt` asks of the login page. `consent` is satisfied by the registration (the app's
    /// developer registers its own clients; there is no third-party consent screen) and reads as no
    /// prompt; `select_account` reads as `login` (the form lets the user sign in as anyone).
    public enum Prompt: String, Sendable, Equatable { case none, login }

    public let clientId: String
    /// The redirect URI the answer goes to: the one presented (a loopback one with its port), or the
    /// client's only registered one when none was presented.
    public let redirectURI: String
    /// The scopes asked for, each once, in the order given.
    public let scopes: [String]
    public let state: String?
    public let nonce: String?
    /// The PKCE S256 challenge.
    public let codeChallenge: String
    public let prompt: Prompt?
    /// `max_age`: seconds since the user last proved itself beyond which it must prove itself again.
    public let maxAge: Int?
    public let loginHint: String?
    /// `ui_locales`, most preferred first (BCP 47 tags as given).
    public let uiLocales: [String]
    /// RFC 9449 §10: the thumbprint of the DPoP key the code is bound to.
    public let dpopJKT: String?

    public var scope: String { scopes.joined(separator: " ") }

    /// The request as parameters: what `oauth_requests.params` keeps, and what `check` reads back.
    public var parameters: [String: String] {
        var out: [String: String] = [
            "client_id": clientId, "redirect_uri": redirectURI, "response_type": "code", "scope": scope,
            "code_challenge": codeChallenge, "code_challenge_method": "S256",
        ]
        out["state"] = state
        out["nonce"] = nonce
        out["prompt"] = prompt?.rawValue
        out["max_age"] = maxAge.map(String.init)
        out["login_hint"] = loginHint
        out["ui_locales"] = uiLocales.isEmpty ? nil : uiLocales.joined(separator: " ")
        out["dpop_jkt"] = dpopJKT
        return out
    }

    /// A copy bound to another DPoP key (a PAR request's `DPoP` proof, RFC 9449 §10.1).
    func binding(dpopJKT: String?) -> AuthorizationRequest {
        AuthorizationRequest(
            clientId: clientId, redirectURI: redirectURI, scopes: scopes, state: state, nonce: nonce, codeChallenge: codeChallenge,
            prompt: prompt, maxAge: maxAge, loginHint: loginHint, uiLocales: uiLocales, dpopJKT: dpopJKT)
    }

    /// The longest values accepted, in UTF-8 bytes.
    static let maxState = 1024
    static let maxNonce = 512
    static let maxLoginHint = 254
    static let maxUILocales = 256
    /// `max_age` above ten years is refused (it is a number of seconds; a bigger one means nothing).
    static let maxMaxAge = 315_360_000
}

/// The rules of the authorization endpoint, in the order RFC 6749 §4.1.2.1 sets: first whether the
/// redirect URI can be trusted (until then an error is shown to the user, never sent to an
/// unregistered URI), then everything else (errors go back in the redirect).
public enum AuthorizationRules {
    /// The redirect URI a request may be answered at, or the error to show instead of redirecting.
    /// An exact match of a registered URI (a loopback one on any port, RFC 8252 §7.3); required when
    /// the client registered several.
    public static func trustedRedirect(_ params: [String: String], client: OAuthClient) throws(OAuthError) -> String {
        if let presented = params["redirect_uri"] {
            guard RedirectURIRule.matches(presented, registered: client.redirectURIs) else {
                throw .invalidRequest("redirect_uri is not registered for this client")
            }
            return presented
        }
        guard client.redirectURIs.count == 1, let only = client.redirectURIs.first else {
            throw .invalidRequest(client.redirectURIs.isEmpty ? "this client has no redirect URI" : "redirect_uri is required")
        }
        return only
    }

    /// Checks the rest of the request for `client`, answered at `redirectURI` (already trusted).
    public static func check(_ params: [String: String], client: OAuthClient, redirectURI: String) throws(OAuthError) -> AuthorizationRequest {
        if params["request"] != nil { throw OAuthError("request_not_supported", "request objects are not supported; use pushed authorization requests") }
        if params["registration"] != nil { throw OAuthError("registration_not_supported", "the registration parameter is not supported") }
        guard let responseType = params["response_type"], !responseType.isEmpty else { throw .invalidRequest("response_type is required") }
        guard responseType == "code" else { throw OAuthError("unsupported_response_type", "only response_type=code is supported") }
        if let mode = params["response_mode"], mode != "query" { throw .invalidRequest("only response_mode=query is supported") }
        guard client.allows(.authorizationCode) else { throw .unauthorizedClient("this client may not use the authorization code grant") }

        // PKCE (RFC 7636), S256 only: plain and missing are refused (OAuth 2.1 §4.1.1).
        guard let challenge = params["code_challenge"], !challenge.isEmpty else {
            throw .invalidRequest("code_challenge is required (PKCE with S256)")
        }
        guard let method = params["code_challenge_method"], !method.isEmpty else {
            throw .invalidRequest("code_challenge_method is required and must be S256")
        }
        guard method == "S256" else { throw .invalidRequest("code_challenge_method must be S256") }
        guard isBase64URLSHA256(challenge) else { throw .invalidRequest("code_challenge must be the base64url SHA-256 of the verifier (43 characters)") }

        let scopes = try scopeList(params["scope"], client: client)
        let state = try text(params["state"], name: "state", maxBytes: AuthorizationRequest.maxState)
        let nonce = try text(params["nonce"], name: "nonce", maxBytes: AuthorizationRequest.maxNonce)
        let loginHint = try text(params["login_hint"], name: "login_hint", maxBytes: AuthorizationRequest.maxLoginHint)
        let prompt = try promptValue(params["prompt"])
        let maxAge = try maxAgeValue(params["max_age"])
        let locales = try localeList(params["ui_locales"])
        var jkt: String?
        if let given = params["dpop_jkt"] {
            guard isBase64URLSHA256(given) else { throw .invalidRequest("dpop_jkt must be a base64url SHA-256 JWK thumbprint") }
            jkt = given
        }
        return AuthorizationRequest(
            clientId: client.clientId, redirectURI: redirectURI, scopes: scopes, state: state, nonce: nonce, codeChallenge: challenge,
            prompt: prompt, maxAge: maxAge, loginHint: loginHint, uiLocales: locales, dpopJKT: jkt)
    }

    /// 43 base64url characters: a SHA-256 as RFC 7636 and RFC 7638 write it.
    static func isBase64URLSHA256(_ text: String) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy { c in
            (0x41...0x5a).contains(c) || (0x61...0x7a).contains(c) || (0x30...0x39).contains(c) || c == 0x2d || c == 0x5f
        } && Base64URL.decodeLenient(text)?.count == 32
    }

    /// The scopes asked for: required, each a valid scope token (RFC 6749 §3.3), each registered on
    /// the client; a repeated one counts once.
    static func scopeList(_ raw: String?, client: OAuthClient) throws(OAuthError) -> [String] {
        guard let raw, !raw.isEmpty else { throw .invalidScope("scope is required") }
        var scopes: [String] = []
        for piece in raw.split(separator: " ", omittingEmptySubsequences: true) {
            let scope = String(piece)
            guard scope.utf8.count <= 128, scope.unicodeScalars.allSatisfy({ $0.value == 0x21 || (0x23...0x5b).contains($0.value) || (0x5d...0x7e).contains($0.value) })
            else { throw .invalidScope("a scope holds characters scopes may not") }
            guard client.scopes.contains(scope) else { throw .invalidScope("scope \(scope) is not allowed for this client") }
            if !scopes.contains(scope) { scopes.append(scope) }
        }
        guard !scopes.isEmpty else { throw .invalidScope("scope is required") }
        return scopes
    }

    /// An optional text parameter: at most `maxBytes`, no control characters.
    static func text(_ raw: String?, name: String, maxBytes: Int) throws(OAuthError) -> String? {
        guard let raw, !raw.isEmpty else { return nil }
        guard raw.utf8.count <= maxBytes else { throw .invalidRequest("\(name) is too long") }
        guard !raw.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw .invalidRequest("\(name) holds control characters")
        }
        return raw
    }

    /// `prompt` (OpenID Connect Core §3.1.2.1): a space-separated list; `none` stands alone.
    static func promptValue(_ raw: String?) throws(OAuthError) -> AuthorizationRequest.Prompt? {
        guard let raw, !raw.isEmpty else { return nil }
        let values = Set(raw.split(separator: " ").map(String.init))
        let known: Set<String> = ["none", "login", "consent", "select_account"]
        guard values.isSubset(of: known) else { throw .invalidRequest("prompt may hold none, login, consent and select_account only") }
        if values.contains("none") {
            guard values.count == 1 else { throw .invalidRequest("prompt=none cannot be combined with other values") }
            return AuthorizationRequest.Prompt.none
        }
        if values.contains("login") || values.contains("select_account") { return .login }
        return nil
    }

    /// `max_age`: a non-negative whole number of seconds.
    static func maxAgeValue(_ raw: String?) throws(OAuthError) -> Int? {
        guard let raw, !raw.isEmpty else { return nil }
        guard raw.utf8.count <= 10, raw.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(raw),
            value <= AuthorizationRequest.maxMaxAge
        else { throw .invalidRequest("max_age must be a number of seconds") }
        return value
    }

    /// `ui_locales`: space-separated language tags (letters, digits and hyphens).
    static func localeList(_ raw: String?) throws(OAuthError) -> [String] {
        guard let raw, !raw.isEmpty else { return [] }
        guard raw.utf8.count <= AuthorizationRequest.maxUILocales else { throw .invalidRequest("ui_locales is too long") }
        var tags: [String] = []
        for piece in raw.split(separator: " ") {
            guard piece.utf8.count <= 35, piece.utf8.allSatisfy({ c in
                (0x41...0x5a).contains(c) || (0x61...0x7a).contains(c) || (0x30...0x39).contains(c) || c == 0x2d
            }) else { throw .invalidRequest("ui_locales must be language tags") }
            tags.append(String(piece))
        }
        return tags
    }

    /// `uri` with `parameters` added to its query (percent-encoded; nil values left out). Registered
    /// redirect URIs hold no fragment (`RedirectURIRule.kind`).
    public static func redirect(_ uri: String, _ parameters: [(String, String?)]) -> String {
        let pairs = parameters.compactMap { name, value in value.map { "\(formEncode(name))=\(formEncode($0))" } }
        guard !pairs.isEmpty else { return uri }
        let separator = uri.contains("?") ? (uri.hasSuffix("?") || uri.hasSuffix("&") ? "" : "&") : "?"
        return uri + separator + pairs.joined(separator: "&")
    }

    /// Percent-encodes everything but the RFC 3986 unreserved characters.
    public static func formEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case 0x41...0x5a, 0x61...0x7a, 0x30...0x39, 0x2d, 0x2e, 0x5f, 0x7e: out.unicodeScalars.append(Unicode.Scalar(byte))
            default: out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
