import Foundation

/// Exact redirect-URI matching, with the one exception RFC 8252 §7.3 makes: a loopback IP redirect
/// (`http://127.0.0.1:{port}/…` or `http://[::1]:{port}/…`) matches whatever port the native app
/// listens on at the time. Everything else (scheme, host, path, query) must be byte for byte the
/// registered URI.
public enum RedirectURIRule {
    /// Whether `presented` is one of `registered`.
    public static func matches(_ presented: String, registered: [String]) -> Bool {
        if registered.contains(presented) { return true }
        guard let loopback = withoutLoopbackPort(presented) else { return false }
        return registered.contains { withoutLoopbackPort($0) == loopback }
    }

    /// A loopback redirect URI with its port taken out, or nil for any other URI.
    static func withoutLoopbackPort(_ uri: String) -> String? {
        for host in ["http://127.0.0.1", "http://[::1]"] where uri.hasPrefix(host) {
            var rest = Substring(uri.dropFirst(host.count))
            if rest.first == ":" {
                rest = rest.dropFirst()
                let digits = rest.prefix { $0.isASCII && $0.isNumber }
                guard !digits.isEmpty, digits.count <= 5 else { return nil }
                rest = rest.dropFirst(digits.count)
            }
            guard rest.isEmpty || rest.first == "/" || rest.first == "?" else { return nil }
            return host + rest
        }
        return nil
    }

    /// The kind of a redirect URI a client may register (RFC 8252 §7), or nil when it may not be one:
    /// `https` (a claimed web address), a loopback IP address over `http`, or a private-use scheme in
    /// reverse-domain form (`com.example.app:/callback`). No fragment, no user information.
    public enum Kind: String, Sendable { case claimedHTTPS, loopback, privateUseScheme }

    public static func kind(of uri: String) -> Kind? {
        guard uri.utf8.count <= 2048, !uri.contains("#"), !uri.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }),
              let components = URLComponents(string: uri), let scheme = components.scheme?.lowercased()
        else { return nil }
        guard components.user == nil, components.password == nil else { return nil }
        if scheme == "https" { return (components.host ?? "").isEmpty ? nil : .claimedHTTPS }
        if scheme == "http" { return withoutLoopbackPort(uri) != nil ? .loopback : nil }
        // A private-use scheme names a domain the developer controls, so it holds a dot (RFC 8252 §7.1).
        guard scheme.contains("."), !["javascript", "data", "file", "vbscript"].contains(scheme) else { return nil }
        return .privateUseScheme
    }
}
