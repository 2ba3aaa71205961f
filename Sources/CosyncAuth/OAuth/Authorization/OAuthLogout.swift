import Foundation
import JWTKit
import Logging
import PostgresNIO

/// OpenID Connect RP-Initiated Logout 1.0 (<doc:OAuth>, "Logout"): the client sends the browser to
/// the logout endpoint; the server ends the session (every token issued on it dies with it, everywhere)
/// and the browser's single sign-on, then sends the browser to a registered post-logout URI or shows
/// that the user is signed out.
public struct OAuthLogout: Sendable {
    let oauth: OAuthServices
    var logger: Logger { oauth.logger }

    public enum Answer: Sendable, Equatable {
        /// Show this error; nothing is ended and nothing is redirected.
        case errorPage(OAuthError)
        /// No valid `id_token_hint`: ask the user to confirm (a form POST with the CSRF token), so a
        /// third-party page cannot sign the user out. `clientName` names the client, when known.
        case confirm(clientName: String?)
        /// Signed out: go to `redirect` (the registered post-logout URI, with `state`), or show that
        /// the user is signed out. `endedBrowser` is true when the browser session of the presented
        /// cookie was ended (or was not live anyway), so the cookie should be cleared; false when it
        /// belongs to another user than the hint's and was left alone.
        case signedOut(redirect: String?, endedBrowser: Bool)
    }

    /// What a verified `id_token_hint` says.
    struct Hint: Sendable {
        let subject: UUID
        let sessionId: UUID?
        let audiences: [String]
        let authorizedParty: String?
    }

    /// Answers a logout request (the query of a GET, or the form of a POST). `confirmed` is true when
    /// the user confirmed on the page (the caller checked the form's CSRF token). `browserToken` is the
    /// browser-session cookie: its session is ended too, and its row deleted, unless it belongs to
    /// another user than the hint's (`sub`) and is not the hint's session (`sid`): a foreign
    /// `id_token_hint` (every user of the app holds one) must not end the victim browser's single sign-on.
    public func logout(app: App, params: [String: String], browserToken: String?, confirmed: Bool) async -> Answer {
        do {
            return try await answer(app: app, params: params, browserToken: browserToken, confirmed: confirmed)
        } catch let error as OAuthError {
            return .errorPage(error)
        } catch {
            logger.error("logout failed", metadata: ["error": "\(String(reflecting: error))"])
            return .errorPage(.serverError())
        }
    }

    func answer(app: App, params: [String: String], browserToken: String?, confirmed: Bool) async throws -> Answer {
        var hint: Hint?
        if let token = params["id_token_hint"], !token.isEmpty {
            guard let verified = await verifyHint(token, app: app) else {
                throw OAuthError.invalidRequest("id_token_hint is not an ID token of this issuer")
            }
            hint = verified
        }
        var named = params["client_id"].flatMap { $0.isEmpty ? nil : $0 }
        if let named, let hint, !hint.audiences.contains(named) {
            throw OAuthError.invalidRequest("client_id is not the audience of id_token_hint")
        }
        if named == nil, let hint { named = hint.authorizedParty ?? (hint.audiences.count == 1 ? hint.audiences.first : nil) }
        var registered: OAuthClient?
        if let named {
            guard let found = try await oauth.clients.find(app: app, clientId: named) else {
                throw OAuthError.invalidRequest("client_id is not a client of this app")
            }
            registered = found
        }
        var redirect: String?
        if let uri = params["post_logout_redirect_uri"], !uri.isEmpty {
            guard let registered else { throw OAuthError.invalidRequest("post_logout_redirect_uri needs client_id or id_token_hint") }
            guard RedirectURIRule.matches(uri, registered: registered.postLogoutRedirectURIs) else {
                throw OAuthError.invalidRequest("post_logout_redirect_uri is not registered for this client")
            }
            let state = try AuthorizationRules.text(params["state"], name: "state", maxBytes: AuthorizationRequest.maxState)
            redirect = AuthorizationRules.redirect(uri, [("state", state)])
        }
        guard hint != nil || confirmed else { return .confirm(clientName: registered?.name) }

        let client = oauth.client
        let browser = try await oauth.authorization.signedInBrowser(app: app, token: browserToken)
        var ended: [(session: UUID, user: UUID)] = []
        if let hint, let sid = hint.sessionId { ended.append((sid, hint.subject)) }
        // The browser's own session is the hint's user's (or the hint's session), or there is no hint
        // (the user confirmed on the page in this browser).
        let ownBrowser = browser.map { browser in
            guard let hint else { return true }
            return browser.user.id == hint.subject || browser.sessionId == hint.sessionId
        } ?? true
        if let browser, ownBrowser, !ended.contains(where: { $0.session == browser.sessionId }) {
            ended.append((browser.sessionId, browser.user.id))
        }
        for (session, user) in ended {
            try await client.transaction(logger: logger) { db in
                guard try await SessionStore.delete(db, appRef: app.ref, userId: user, sessionId: session, logger: logger) else { return }
                try await Events.record(
                    db, app: app, type: .sessionRevoked, userId: user,
                    data: ["sessionIds": .array([.string(session.uuidString.lowercased())]), "reason": .string("logout"),
                           "clientId": registered.map { .string($0.clientId) } ?? .null],
                    logger: logger)
                try await AuditLog.record(
                    db, appRef: app.ref, appId: app.appId, actor: "user", action: "oauth.logout",
                    detail: ["userId": .string(user.uuidString.lowercased()), "sessionId": .string(session.uuidString.lowercased())],
                    logger: logger)
            }
        }
        if ownBrowser, let browserToken, !browserToken.isEmpty, browserToken.utf8.count <= 100 {
            try await client.withConnection { db in
                try await OAuthBrowserSessionStore.delete(db, tokenHash: Secrets.sha256(browserToken), logger: logger)
            }
        }
        return .signedOut(redirect: redirect, endedBrowser: ownBrowser)
    }

    /// Verifies an ID token of this issuer: RS256 by one of the app's published keys, named by `kid`
    /// (the app's user JWTs carry no `kid` and never pass), `iss` this issuer, a user id as `sub`. An
    /// expired one is still a hint (RP-Initiated Logout 1.0 §2): its key, which retires, bounds it.
    func verifyHint(_ token: String, app: App) async -> Hint? {
        guard token.utf8.count <= 16_384, let header = Base64URL.jwtPart(token, 0), header["alg"] == .string("RS256"),
            let kid = header["kid"]?.stringValue, !kid.isEmpty
        else { return nil }
        do {
            let keys = try await oauth.client.withConnection { try await AppStore.keys($0, ref: app.ref, logger: logger) }
            guard let key = keys.first(where: { $0.kid == kid }) else { return nil }
            let collection = JWTKeyCollection()
            await collection.add(rsa: try Insecure.RSA.PublicKey(pem: key.publicKeyPEM), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
            let claims = try await collection.verify(token, as: ClaimSet.self).claims
            guard claims["iss"]?.stringValue == oauth.issuer(appId: app.appId),
                let subject = claims["sub"]?.stringValue.flatMap(UUID.init(uuidString:))
            else { return nil }
            let audiences: [String] = switch claims["aud"] {
            case .string(let one)?: [one]
            case .array(let many)?: many.compactMap(\.stringValue)
            default: []
            }
            return Hint(
                subject: subject, sessionId: claims["sid"]?.stringValue.flatMap(UUID.init(uuidString:)), audiences: audiences,
                authorizedParty: claims["azp"]?.stringValue)
        } catch {
            return nil
        }
    }
}
