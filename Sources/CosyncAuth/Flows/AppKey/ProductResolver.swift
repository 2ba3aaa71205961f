import Foundation
import JWTKit

/// Which API a shared `/api/appuser/<name>` request goes to (<doc:AppKeyAPI> §1.1): the product of the
/// app its credential names. The app comes from the node's app cache (`AppCache`), so a dispatch
/// costs no query once the app is cached.
public struct AppProductResolver: Sendable {
    let apps: AppAdministration

    public init(apps: AppAdministration) {
        self.apps = apps
    }

    /// What dispatch found: the product, and the app when an app-token named it (the API's edge
    /// reuses that app rather than resolving the same token again).
    public struct Dispatch: Sendable {
        public let product: AppProduct
        public let appFromToken: App?
    }

    /// The product named by the credential headers, in the order of <doc:AppKeyAPI> §1.5; nil when none resolves.
    public func product(appToken: String?, accessToken: String?, signupToken: String?) async -> Dispatch? {
        if let token = appToken, !token.isEmpty {
            guard let app = try? await apps.app(forToken: token) else { return nil }
            return Dispatch(product: app.product, appFromToken: app)
        }
        if let token = accessToken, !token.isEmpty {
            guard let claims = try? await apps.serverKeys.verify(token, as: AppKeyTokenIdentity.self),
                let app = try? await apps.cachedApp(appId: claims.appId)
            else { return nil }
            return Dispatch(product: app.product, appFromToken: nil)
        }
        // Only AppKey issues signup-tokens.
        if let token = signupToken, !token.isEmpty { return Dispatch(product: .appKey, appFromToken: nil) }
        return nil
    }
}
