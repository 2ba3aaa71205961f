import Crypto
import Foundation

extension OAuthServices {
    /// The hosted page's CSRF tokens (<doc:OAuth> §3).
    public var csrf: HostedCSRF { HostedCSRF(key: box.derivedKey(label: "oauth-hosted-page-csrf")) }
}

/// CSRF protection of the hosted pages: every form carries a token bound to the browser's binding
/// cookie (a random value, `__Host-` prefixed, HttpOnly, SameSite=Lax) and to what the form is for
/// (the waiting request, or logout). The token is an HMAC under a key derived from the master key, so
/// neither a page of another origin (which cannot read the cookie) nor a cookie planted by a sibling
/// host (which has no key) can make one. Every POST is checked in constant time.
public struct HostedCSRF: Sendable {
    let key: SymmetricKey

    /// With its own key (the Portal's forms use one derived under another label).
    public init(key: SymmetricKey) { self.key = key }

    /// A new binding-cookie value: 256 random bits, base64url.
    public static func newBrowserKey() -> String { Base64URL.encode(Secrets.randomBytes(32)) }

    /// Whether a cookie value can be a binding key this server made (a shape check, before any use).
    public static func isBrowserKey(_ value: String) -> Bool {
        value.utf8.count == 43 && value.utf8.allSatisfy { c in
            (0x41...0x5a).contains(c) || (0x61...0x7a).contains(c) || (0x30...0x39).contains(c) || c == 0x2d || c == 0x5f
        }
    }

    /// The token of the forms for `purpose` (`login:<reference>`, `logout`) in `appId`, for the browser
    /// holding `browserKey`.
    public func token(browserKey: String, appId: String, purpose: String) -> String {
        let message = Data("\(appId)|\(purpose)|".utf8) + Secrets.sha256(browserKey)
        return Base64URL.encode(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }

    /// Whether `presented` is the token for this browser, app and purpose.
    public func verify(_ presented: String?, browserKey: String?, appId: String, purpose: String) -> Bool {
        guard let presented, let browserKey, !presented.isEmpty, presented.utf8.count <= 100 else { return false }
        let expected = token(browserKey: browserKey, appId: appId, purpose: purpose)
        return Secrets.constantTimeEquals(Data(presented.utf8), Data(expected.utf8))
    }
}
