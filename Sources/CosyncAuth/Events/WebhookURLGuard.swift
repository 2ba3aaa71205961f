import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The SSRF rule for endpoint URLs: `https` only (unless the operator allows `http`), no credentials
/// in the URL, and every address the host resolves to must be public, unless it lies in a network the
/// operator allowed (COSYNC_WEBHOOK_ALLOW_CIDRS). Checked when an endpoint is saved and again before
/// every delivery, as a DNS answer can change.
public struct WebhookURLGuard: Sendable {
    public let allowHTTP: Bool
    public let allowedNetworks: [IPNetwork]
    public static let maxLength = 2048

    public init(allowHTTP: Bool, allowedNetworks: [IPNetwork]) {
        self.allowHTTP = allowHTTP
        self.allowedNetworks = allowedNetworks
    }

    /// Why a URL is refused (the message is shown to the admin caller).
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let code: String
        public let message: String
        public var description: String { message }
    }

    /// Networks no webhook may reach unless allowed: this host, private and shared ranges, link-local
    /// (the cloud metadata address 169.254.169.254 among them), documentation, multicast and reserved.
    static let blocked: [IPNetwork] = [
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
        "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4",
        "240.0.0.0/4", "::/128", "::1/128", "::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2002::/16",
        "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
    ].compactMap { IPNetwork($0) }

    /// The parsed URL and its host, or a refusal; no network access.
    public func checkSyntax(_ text: String) -> Result<(url: URL, host: String), Refusal> {
        func refuse(_ message: String) -> Result<(url: URL, host: String), Refusal> { .failure(Refusal(code: "invalid_url", message: message)) }
        guard !text.isEmpty, text.unicodeScalars.count <= Self.maxLength else { return refuse("url must be 1-\(Self.maxLength) characters") }
        guard text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7F }) else {
            return refuse("url must be ASCII without spaces or control characters")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(), let url = components.url else {
            return refuse("url is not a valid URL")
        }
        guard scheme == "https" || (scheme == "http" && allowHTTP) else {
            return .failure(Refusal(code: "insecure_url", message: allowHTTP ? "url must be http or https" : "url must use https"))
        }
        guard components.user == nil, components.password == nil else { return refuse("url must not carry credentials") }
        guard components.fragment == nil else { return refuse("url must not have a fragment") }
        var host = components.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, host.count <= 253 else { return refuse("url must name a host") }
        if let port = components.port, !(1...65535).contains(port) { return refuse("url has an invalid port") }
        return .success((url, host))
    }

    /// Whether `address` may be reached.
    public func permits(_ address: IPNetwork.Address) -> Bool {
        if allowedNetworks.contains(where: { $0.contains(address) }) { return true }
        return !Self.blocked.contains(where: { $0.contains(address) })
    }

    /// Whether `text`, one address of a DNS answer, may be reached. An IPv4-mapped IPv6 address
    /// (`::ffff:0:0/96`) is refused whatever it maps to: no public host needs one, and a socket
    /// connecting to it reaches the IPv4 address it carries.
    func permits(resolved text: String) -> Bool {
        guard !Self.isIPv4Mapped(text), let address = IPNetwork.Address(text) else { return false }
        return permits(address)
    }

    static func isIPv4Mapped(_ text: String) -> Bool {
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        return bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
    }

    /// The full check: syntax, then every resolved address. Returns nil when the URL may be used.
    public func check(_ text: String) async -> Refusal? {
        switch await route(text) {
        case .failure(let refusal): return refusal
        case .success: return nil
        }
    }

    /// Where a delivery to a checked URL connects: `address`, one of the addresses its host resolved to
    /// (all of them checked). `pinnedHost` is the URL's host as the HTTP client reads it, when that is a
    /// name: the client must connect to `address` for it instead of resolving it again.
    public struct Route: Sendable, Equatable {
        public let pinnedHost: String?
        public let address: String
    }

    /// The check of a delivery: syntax, then one resolution of the host as the HTTP client reads it from
    /// the URL, every address checked, and the first one chosen (getaddrinfo's order) to connect to.
    public func route(_ text: String) async -> Result<Route, Refusal> {
        switch checkSyntax(text) {
        case .failure(let refusal): return .failure(refusal)
        case .success: break
        }
        // AsyncHTTPClient takes the host from Foundation's URL (brackets of an IPv6 literal removed): the
        // name resolved here is the very name the client would otherwise resolve.
        guard let written = URL(string: text)?.host, !written.isEmpty else {
            return .failure(Refusal(code: "invalid_url", message: "url must name a host"))
        }
        let host = written.hasPrefix("[") && written.hasSuffix("]") ? String(written.dropFirst().dropLast()) : written
        let forbidden = Refusal(
            code: "forbidden_address", message: "the url's host resolves to a private, loopback, link-local or reserved address")
        if IPNetwork.Address(host) != nil {
            return permits(resolved: host) ? .success(Route(pinnedHost: nil, address: host)) : .failure(forbidden)
        }
        let unresolvable = Refusal(code: "unresolvable_host", message: "the url's host does not resolve")
        let addresses: [String]
        do {
            addresses = try await withDeadline(.seconds(5)) { try await Self.resolve(host) }
        } catch {
            return .failure(unresolvable)
        }
        guard let first = addresses.first else { return .failure(unresolvable) }
        for address in addresses where !permits(resolved: address) { return .failure(forbidden) }
        return .success(Route(pinnedHost: host, address: first))
    }

    struct ResolveFailure: Error {}

    /// The addresses of `host` (getaddrinfo on a Dispatch thread, never on a Swift concurrency or event-loop thread).
    static func resolve(_ host: String) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var hints = addrinfo()
                hints.ai_family = AF_UNSPEC
                #if canImport(Glibc)
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                #else
                hints.ai_socktype = SOCK_STREAM
                #endif
                var result: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else {
                    continuation.resume(throwing: ResolveFailure())
                    return
                }
                defer { freeaddrinfo(first) }
                var addresses: [String] = []
                var cursor: UnsafeMutablePointer<addrinfo>? = first
                while let entry = cursor {
                    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
                    if let sockaddr = entry.pointee.ai_addr {
                        if entry.pointee.ai_family == AF_INET {
                            sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                                var address = v4.pointee.sin_addr
                                _ = inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count))
                            }
                        } else if entry.pointee.ai_family == AF_INET6 {
                            sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                                var address = v6.pointee.sin6_addr
                                _ = inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
                            }
                        }
                    }
                    let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    if !text.isEmpty, !addresses.contains(text) { addresses.append(text) }
                    cursor = entry.pointee.ai_next
                }
                continuation.resume(returning: addresses)
            }
        }
    }
}
