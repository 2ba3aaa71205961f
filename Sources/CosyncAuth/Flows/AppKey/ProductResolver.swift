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

    /// The product named by the credential headers, in the order of <doc:AppKeyAPI> §1.5; nil when none resolves.
    public func product(appToken: String?, accessToken: String?, signupToken: String?) async -> AppProduct? {
        if let token = appToken, !token.isEmpty {
            return (try? await apps.app(forToken: token))?.product
        }
        if let token = accessToken, !token.isEmpty {
            guard let claims = try? await apps.serverKeys.verify(token, as: AppKeyTokenIdentity.self) else { return nil }
            return (try? await apps.cachedApp(appId: claims.appId))?.product
        }
        // Only AppKey issues signup-tokens.
        if let token = signupToken, !token.isEmpty { return .appKey }
        return nil
    }
}
