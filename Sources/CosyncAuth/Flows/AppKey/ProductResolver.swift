import Foundation
import JWTKit
import NIOConcurrencyHelpers

/// Which API a shared `/api/appuser/<name>` request goes to (appkey-api.md §1.1): the product of the
/// app its credential names. An app's product never changes, so it is cached by the app token's
/// hash and by appId (a bounded map, cleared when full).
public final class AppProductResolver: Sendable {
    let apps: AppAdministration
    let serverKeys: ServerKeyRing
    private let cache = NIOLockedValueBox<[String: AppProduct]>([:])

    public init(apps: AppAdministration) {
        self.apps = apps
        self.serverKeys = apps.serverKeys
    }

    /// The product named by the credential headers, in the order of §1.5; nil when none resolves.
    public func product(appToken: String?, accessToken: String?, signupToken: String?) async -> AppProduct? {
        if let token = appToken, !token.isEmpty {
            let key = "t:" + Base64URL.encode(Secrets.sha256(token))
            if let known = get(key) { return known }
            guard let app = try? await apps.app(forToken: token) else { return nil }
            set(key, app.product)
            return app.product
        }
        if let token = accessToken, !token.isEmpty {
            guard let claims = try? await serverKeys.verify(token, as: AppKeyTokenIdentity.self) else { return nil }
            let key = "a:" + claims.appId
            if let known = get(key) { return known }
            guard AppAdministration.isAppId(claims.appId), let app = try? await apps.row(appId: claims.appId) else { return nil }
            set(key, app.product)
            return app.product
        }
        // Only AppKey issues signup-tokens.
        if let token = signupToken, !token.isEmpty { return .appKey }
        return nil
    }

    private func get(_ key: String) -> AppProduct? { cache.withLockedValue { $0[key] } }

    private func set(_ key: String, _ value: AppProduct) {
        cache.withLockedValue { map in
            if map.count >= 10_000 { map.removeAll(keepingCapacity: true) }
            map[key] = value
        }
    }
}
