import CosyncAuth
import Crypto
import Foundation
import HTTPTypes
import Hummingbird

/// The Portal's cookies.
///
/// - The session: `__Host-cosync-portal` (HttpOnly, Secure, SameSite=Strict, Path=/), a random secret
///   whose SHA-256 the core stores (`PortalAccounts`).
/// - The browser key: `__Host-cosync-portal-browser`, 256 random bits that the forms shown before
///   sign-in (sign-in, code, invite, enrolment) bind their CSRF token to.
/// - The hand-over: `__Host-cosync-portal-once`, sealed with AES-GCM under a key derived from the
///   master key, carries a value from a POST to the page it redirects to: the enrolment ticket (before
///   sign-in, 30 minutes), or a new app token and secret to show once (`PortalSealer.showOnceLifetime`,
///   bound to the session that made them; the page that shows them clears it, and so does sign-out).
///
/// When the public URL is `http://` on a loopback host (development, tests), cookies cannot be Secure
/// and browsers refuse the `__Host-` prefix without it: the names then lose the prefix and Secure
/// (as the OAuth hosted pages do).
struct PortalCookies: Sendable {
    let secure: Bool

    init(publicURL: String) {
        if let url = URLComponents(string: publicURL), url.scheme?.lowercased() == "http" {
            secure = !["localhost", "127.0.0.1", "::1", "[::1]"].contains(url.host?.lowercased() ?? "")
        } else {
            secure = true
        }
    }

    var sessionName: String { (secure ? "__Host-" : "") + "cosync-portal" }
    var browserName: String { (secure ? "__Host-" : "") + "cosync-portal-browser" }
    var onceName: String { (secure ? "__Host-" : "") + "cosync-portal-once" }

    /// A `Set-Cookie` value; `maxAge` nil makes it last as long as the browser session.
    func set(_ name: String, _ value: String, maxAge: Int? = nil) -> String {
        var cookie = "\(name)=\(value); Path=/; HttpOnly; SameSite=Strict"
        if let maxAge { cookie += "; Max-Age=\(max(0, maxAge))" }
        if secure { cookie += "; Secure" }
        return cookie
    }

    func clear(_ name: String) -> String { set(name, "", maxAge: 0) }

    /// A cookie's value when present, non-empty and of a sane size (the hand-over cookie carries an app
    /// token, a signed JWT: up to a browser's 4 KB).
    static func value(_ request: Request, _ name: String) -> String? {
        guard let value = request.cookies[name]?.value, !value.isEmpty, value.utf8.count <= 4000 else { return nil }
        return value
    }

    func session(_ request: Request) -> String? { Self.value(request, sessionName) }
    func browserKey(_ request: Request) -> String? {
        Self.value(request, browserName).flatMap { HostedCSRF.isBrowserKey($0) ? $0 : nil }
    }
}

/// CSRF tokens of the Portal's forms: `HostedCSRF` (an HMAC under a key derived from the master key,
/// checked in constant time) bound to the session cookie, or before sign-in to the browser key, and
/// to what the form is for (`settings:<appId>`, `sign-out`, …).
struct PortalCSRF: Sendable {
    let hmac: HostedCSRF

    init(box: SecretBox) {
        hmac = HostedCSRF(key: box.derivedKey(label: "portal-csrf"))
    }

    func token(bound key: String, purpose: String) -> String { hmac.token(browserKey: key, appId: "portal", purpose: purpose) }

    func verify(_ presented: String?, bound key: String?, purpose: String) -> Bool {
        hmac.verify(presented, browserKey: key, appId: "portal", purpose: purpose)
    }
}

/// The hand-over cookie's contents: AES-GCM under a key derived from the master key, with an expiry.
///
/// A value shown once (an app token, an app secret) is sealed with the id of the session that made it
/// (`sid`) and lives `showOnceLifetime`; the keys page shows it only to that session, with the owner
/// role, and clears the cookie in the same answer; sign-out clears it too. There is no server-side list
/// of used cookies: a replay needs both this cookie and that session's cookie (both HttpOnly and
/// SameSite=Strict, so in practice the same browser) within two minutes, and signing out ends the
/// session server-side, after which the cookie opens nothing. Such a replay reaches only an owner's session
/// that could rotate and see a new token anyway. A used-nonce table (SQL in the store) would add a write
/// per rotation for little more than that; the binding, the short life and the clearing were chosen instead.
struct PortalSealer: Sendable {
    let key: SymmetricKey

    /// How long a value to show once waits for its page (the redirect follows at once).
    static let showOnceLifetime = 120

    init(box: SecretBox) {
        key = box.derivedKey(label: "portal-once-cookie")
    }

    func seal(_ fields: [String: String], lifetime: TimeInterval = 900) -> String? {
        var all = fields
        all["exp"] = String(Int(Date().timeIntervalSince1970 + lifetime))
        guard let data = try? JSONEncoder().encode(all), let sealed = try? AES.GCM.seal(data, using: key).combined else { return nil }
        return Base64URL.encode(sealed)
    }

    func open(_ value: String?) -> [String: String]? {
        guard let value, let data = Base64URL.decodeLenient(value), let box = try? AES.GCM.SealedBox(combined: data),
            let plain = try? AES.GCM.open(box, using: key), let fields = try? JSONDecoder().decode([String: String].self, from: plain),
            let exp = fields["exp"].flatMap({ Int($0) }), Double(exp) > Date().timeIntervalSince1970
        else { return nil }
        return fields
    }
}

enum PortalHeaders {
    static let contentSecurityPolicy = HTTPField.Name("Content-Security-Policy")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let xContentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let pragma = HTTPField.Name("Pragma")!

    static let csp =
        "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    /// The headers of every Portal page and redirect: a strict CSP (no inline script or style, no
    /// framing, forms only to this origin), no referrer, no caching, no sniffing.
    static func security() -> HTTPFields {
        [
            contentSecurityPolicy: csp, xFrameOptions: "DENY", referrerPolicy: "no-referrer", .cacheControl: "no-store", pragma: "no-cache",
            xContentTypeOptions: "nosniff",
        ]
    }
}

/// Reading the Portal's forms and query strings.
enum PortalForm {
    static let maxBytes = StrictForm.maxBytes

    /// The form body of a POST; nil when it is not a readable form.
    static func body(_ request: Request) async -> [String: String]? {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else { return nil }
        guard let buffer = try? await request.body.collect(upTo: maxBytes) else { return nil }
        return try? StrictForm.parse(buffer.readableBytesView)
    }

    /// The query string; nil when malformed.
    static func queryParameters(_ request: Request) -> [String: String]? {
        guard let query = request.uri.query else { return [:] }
        return try? StrictForm.parse(Array(query.utf8))
    }

    /// Percent-encodes a value for a query string or a path segment.
    static func encode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// Where a re-authentication may send the browser back to: a path of the Portal on this server,
    /// never another origin (`//host`, `/\host`, a scheme), never a dot segment, no `%` in the path.
    static func localPortalPath(_ next: String?) -> String? {
        guard let next, next.utf8.count <= 512, next == "/portal" || next.hasPrefix("/portal/") || next.hasPrefix("/portal?") else { return nil }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/-_.~?=&%+".utf8)
        guard next.utf8.allSatisfy({ allowed.contains($0) }), !next.contains("//") else { return nil }
        let path = next.split(separator: "?", maxSplits: 1).first ?? ""
        // No percent-encoding in the path: `%2e%2e` is a dot segment once a client or proxy decodes it.
        guard !path.contains("%"), !path.contains("\\") else { return nil }
        guard !path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else { return nil }
        return next
    }
}
