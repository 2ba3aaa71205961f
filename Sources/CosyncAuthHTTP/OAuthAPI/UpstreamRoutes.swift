import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// Signing in through an app's upstream OpenID providers on the hosted page (<doc:OAuth> §8), under the
/// issuer I = `{public URL}/apps/{appId}`:
///
/// - The sign-in page shows one button per enabled provider (`signInOption`, in the page's slot for
///   other sign-in methods): a link to `GET I/oauth/upstream/{providerId}/start?r=…`.
/// - `start` checks that the waiting request `r` belongs to this browser (its binding cookie), keeps
///   `state`, `nonce` and the PKCE verifier server-side, and answers `303` to the provider's
///   authorization endpoint.
/// - The provider sends the browser back to `GET I/oauth/upstream/callback?code=…&state=…` (the one
///   redirect URI to register there). The sign-in is taken once, by the browser that started it; the
///   code is exchanged, the ID token checked, the account found or made, a session opened, and the
///   waiting request continues as after any sign-in on the page (`HostedLoginRoutes.completion`:
///   `303` to the resume step, with the browser-session cookie). A failure is a page that says why,
///   with the way back to the sign-in form.
struct UpstreamRoutes {
    let services: CosyncServices

    func register(on issuer: RouterGroup<OAuthAppContext>) {
        issuer.get("oauth/upstream/callback") { request, context in await callback(request, context) }
        issuer.get("oauth/upstream/:providerId/start") { request, context in await start(request, context) }
    }

    func start(_ request: Request, _ context: OAuthAppContext) async -> Response {
        let app = context.app
        let query: [String: String]
        do { query = try AuthorizeRoutes.parameters(request) } catch {
            return HostedLoginRoutes.message(services, app: app, request: request, .badRequest, status: .badRequest)
        }
        let reference = query["r"] ?? ""
        guard let browserKey = HostedCookies.browserKey(request, services: services) else {
            return HostedLoginRoutes.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)
        }
        do {
            _ = try await services.oauth.authorization.pending(app: app, reference: reference, browserKey: browserKey)
        } catch OAuthAuthorization.PendingFailure.otherBrowser {
            return HostedLoginRoutes.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)
        } catch {
            if !(error is OAuthAuthorization.PendingFailure) {
                services.logger.error("upstream start: reading the waiting request failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            return HostedLoginRoutes.message(services, app: app, request: request, .requestExpired, status: .badRequest)
        }
        guard let providerId = context.parameters.get("providerId").flatMap(UUID.init(uuidString:)) else {
            return failure(request, app: app, reference: reference, .invalidRequest("no such provider"))
        }
        do throws(OAuthError) {
            let location = try await services.oauth.upstreamSignIn.start(
                app: app, providerId: providerId, requestRef: reference, browserKey: browserKey, origin: context.origin)
            return AuthorizeRoutes.redirect(.seeOther, to: location)
        } catch {
            return failure(request, app: app, reference: reference, error)
        }
    }

    func callback(_ request: Request, _ context: OAuthAppContext) async -> Response {
        let app = context.app
        let query: [String: String]
        do { query = try AuthorizeRoutes.parameters(request) } catch {
            return HostedLoginRoutes.message(services, app: app, request: request, .badRequest, status: .badRequest)
        }
        let browserKey = HostedCookies.browserKey(request, services: services)
        let answer = await services.oauth.upstreamSignIn.callback(app: app, parameters: query, browserKey: browserKey, origin: context.origin)
        guard let reference = answer.requestRef, let browserKey else {
            let detail: String? = if case .failure(let error) = answer.outcome { error.description } else { nil }
            return HostedLoginRoutes.message(services, app: app, request: request, .requestExpired, status: .badRequest, detail: detail)
        }
        switch answer.outcome {
        case .failure(let error):
            return failure(request, app: app, reference: reference, error)
        case .success(let signedIn):
            do {
                let done = try await HostedLoginRoutes.completion(
                    services: services, app: app, reference: reference, browserKey: browserKey,
                    signedIn: HostedSignIn.SignedIn(sessionId: signedIn.sessionId, userId: signedIn.user.id, amr: signedIn.amr))
                return AuthorizeRoutes.redirect(.seeOther, to: done.location, cookies: [done.setCookie])
            } catch OAuthAuthorization.PendingFailure.otherBrowser {
                return HostedLoginRoutes.message(services, app: app, request: request, .cookiesNeeded, status: .badRequest)
            } catch {
                if !(error is OAuthAuthorization.PendingFailure) {
                    services.logger.error("upstream callback: answering the request failed", metadata: ["error": "\(String(reflecting: error))"])
                }
                return HostedLoginRoutes.message(services, app: app, request: request, .requestExpired, status: .badRequest)
            }
        }
    }

    /// A sign-in through the provider that failed: why, and the way back to the sign-in form.
    func failure(_ request: Request, app: App, reference: String, _ error: OAuthError) -> Response {
        let back = HostedLoginRoutes.issuerPath(services, appId: app.appId) + HostedLoginRoutes.Path.login + "?r=" + AuthorizeRoutes.encode(reference)
        let status: HTTPResponse.Status = error.status == 429 ? .tooManyRequests : error.status >= 500 ? .badGateway : .badRequest
        return HostedLoginRoutes.message(
            services, app: app, request: request, error.status == 429 ? .rateLimited : .genericError, status: status, detail: error.description,
            link: reference.isEmpty ? nil : (back, .backToSignIn))
    }

    // MARK: the sign-in page's buttons

    /// One button per enabled provider of the app, in the sign-in page's slot for other methods.
    static let signInOption = HostedSignInOption { context in
        let providers: [UpstreamProvider]
        do { providers = try await context.services.oauth.upstreamProviders.list(app: context.app).filter(\.enabled) } catch {
            context.services.logger.error("hosted page: listing upstream providers failed", metadata: ["error": "\(String(reflecting: error))"])
            return nil
        }
        guard !providers.isEmpty else { return nil }
        let links = providers.map { provider in
            let url = context.issuerPath + "/oauth/upstream/" + provider.id.uuidString.lowercased() + "/start?r=" + AuthorizeRoutes.encode(context.reference)
            return "<a class=\"button upstream\" href=\"\(escape(url))\">\(escape(provider.name))</a>"
        }
        return ("<div class=\"upstream-providers\">\n" + links.joined(separator: "\n") + "\n</div>", [])
    }

    /// Text for HTML (element content and double-quoted attributes).
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
