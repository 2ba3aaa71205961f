import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The token endpoint (RFC 6749 §5, RFC 8693, RFC 9449), revocation (RFC 7009), introspection
/// (RFC 7662) and userinfo (OpenID Connect Core §5.3) of an app's issuer (<doc:OAuth> §4, §5, §7).
/// The wire only: client authentication is `OAuthClients.authenticate`, the grants are
/// `OAuthTokenEndpoint`, the rest `OAuthResourceAccess`.
struct TokenRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {
        issuer.post("oauth/token") { request, context in await answer { try await token(request, context) } }
        issuer.post("oauth/revoke") { request, context in await answer { try await revoke(request, context) } }
        issuer.post("oauth/introspect") { request, context in await answer { try await introspect(request, context) } }
        issuer.get("oauth/userinfo") { request, context in await answer { try await userinfo(request, context, form: [:]) } }
        issuer.post("oauth/userinfo") { request, context in
            await answer {
                // RFC 6750 §2.2: a POST may carry the token in its form body instead of the header.
                let isForm = request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") ?? false
                return try await userinfo(request, context, form: isForm ? try await OAuthWire.formBody(request, context: context) : [:])
            }
        }
    }

    /// Runs a handler and writes its OAuth error in the RFC 6749 shape (the handlers throw nothing else).
    func answer(_ body: () async throws -> Response) async -> Response {
        do { return try await body() } catch let error as OAuthError { return OAuthWire.errorResponse(error) } catch {
            services.logger.error("OAuth token routes failed", metadata: ["error": "\(String(reflecting: error))"])
            return OAuthWire.errorResponse(.serverError())
        }
    }

    // MARK: token

    func token(_ request: Request, _ context: OAuthAppContext) async throws(OAuthError) -> Response {
        let form = try await OAuthWire.formBody(request, context: context)
        let app = context.app
        let client = try await authenticate(request, form: form, app: app, endpoint: OAuthRoutes.Path.token, clientAddress: context.origin.address)
        let answer = try await services.oauth.tokenEndpoint.token(
            app: app, client: client, OAuthTokenRequest(fields: form, dpopProof: request.headers[OAuthWire.dpop], origin: context.origin))
        var body: [String: JSONValue] = [
            "access_token": .string(answer.accessToken), "token_type": .string(answer.tokenType), "expires_in": .int(answer.expiresIn),
            "scope": .string(answer.scope),
        ]
        if let refresh = answer.refreshToken { body["refresh_token"] = .string(refresh) }
        if let id = answer.idToken { body["id_token"] = .string(id) }
        if let issued = answer.issuedTokenType { body["issued_token_type"] = .string(issued) }
        return OAuthWire.response(body, headers: nonceHeader(app, request))
    }

    // MARK: revocation, introspection

    func revoke(_ request: Request, _ context: OAuthAppContext) async throws(OAuthError) -> Response {
        let form = try await OAuthWire.formBody(request, context: context)
        let client = try await authenticate(request, form: form, app: context.app, endpoint: OAuthRoutes.Path.revoke, clientAddress: context.origin.address)
        guard let token = form["token"] else { throw .invalidRequest("token is missing") }
        try await services.oauth.resources.revoke(app: context.app, client: client, token: token)
        return Response(status: .ok, headers: [.cacheControl: "no-store", OAuthWire.pragma: "no-cache"])
    }

    func introspect(_ request: Request, _ context: OAuthAppContext) async throws(OAuthError) -> Response {
        let form = try await OAuthWire.formBody(request, context: context)
        let client = try await authenticate(request, form: form, app: context.app, endpoint: OAuthRoutes.Path.introspect, clientAddress: context.origin.address)
        guard let token = form["token"] else { throw .invalidRequest("token is missing") }
        return OAuthWire.response(try await services.oauth.resources.introspect(app: context.app, client: client, token: token))
    }

    // MARK: userinfo

    func userinfo(_ request: Request, _ context: OAuthAppContext, form: [String: String]) async throws(OAuthError) -> Response {
        let app = context.app
        var scheme = "Bearer", token: String?
        if let header = request.headers[.authorization] {
            let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2, ["bearer", "dpop"].contains(parts[0].lowercased()) else {
                throw .invalidToken("use the Bearer or DPoP scheme")
            }
            scheme = parts[0].lowercased() == "dpop" ? "DPoP" : "Bearer"
            token = parts[1].trimmingCharacters(in: .whitespaces)
            guard form["access_token"] == nil else { throw .invalidRequest("send the access token once") }
        } else {
            token = form["access_token"]
        }
        guard let token, !token.isEmpty else { throw .invalidToken("an access token is required") }
        let claims = try await services.oauth.resources.userinfo(
            app: app,
            .init(
                scheme: scheme, token: token, proof: request.headers[OAuthWire.dpop], method: request.method.rawValue,
                url: services.oauth.endpoint(appId: app.appId, OAuthRoutes.Path.userinfo)))
        return OAuthWire.response(claims, headers: nonceHeader(app, request))
    }

    // MARK: client authentication

    /// The client of a request to `endpoint`: HTTP Basic (both parts form-URL-decoded, RFC 6749
    /// §2.3.1), form credentials, or a client assertion. The assertion may be addressed to this
    /// endpoint's URL, the token endpoint's or the issuer. Failures count per client and caller address.
    func authenticate(
        _ request: Request, form: [String: String], app: App, endpoint: String, clientAddress: String?
    ) async throws(OAuthError) -> OAuthClient {
        var presented = OAuthClients.Presented(
            clientId: form["client_id"], clientSecret: form["client_secret"], assertionType: form["client_assertion_type"],
            assertion: form["client_assertion"])
        if let header = request.headers[.authorization], header.count > 6, header.prefix(6).lowercased() == "basic " {
            presented.basic = try Self.basicCredentials(String(header.dropFirst(6)))
        }
        let oauth = services.oauth
        let audience = [
            oauth.endpoint(appId: app.appId, endpoint), oauth.endpoint(appId: app.appId, OAuthRoutes.Path.token), oauth.issuer(appId: app.appId),
        ]
        return try await oauth.clients.authenticate(app: app, presented, audience: audience, clientAddress: clientAddress)
    }

    /// `base64(urlencode(id) ":" urlencode(secret))` → (id, secret).
    static func basicCredentials(_ encoded: String) throws(OAuthError) -> (id: String, secret: String) {
        let trimmed = encoded.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 4096, let data = Data(base64Encoded: trimmed), let colon = data.firstIndex(of: UInt8(ascii: ":")) else {
            throw .invalidClient("malformed HTTP Basic credentials")
        }
        do {
            let id = try StrictForm.decode(data[data.startIndex..<colon])
            let secret = try StrictForm.decode(data[data.index(after: colon)...])
            return (id, secret)
        } catch {
            throw .invalidClient("malformed HTTP Basic credentials")
        }
    }

    /// `DPoP-Nonce` on the success of a request that sent a DPoP proof: the nonce its next proof uses.
    func nonceHeader(_ app: App, _ request: Request) -> HTTPFields {
        guard request.headers[OAuthWire.dpop] != nil, let nonce = services.oauth.dpop.currentNonce(appRef: app.ref) else { return [:] }
        return [OAuthWire.dpopNonce: nonce]
    }
}
