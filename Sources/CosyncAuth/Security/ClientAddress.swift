import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which reverse proxies in front of the server are trusted to say who the client is
/// (`COSYNC_TRUSTED_PROXIES`), and the rule that picks the client address from the proxy header.
///
/// The chain is every entry of every proxy-header line, in order (a client or proxy may send several
/// `X-Forwarded-For` lines), followed by the TCP peer. Each proxy appends the address it saw, so only
/// the right end of the chain is written by proxies we run; everything to the left may be forged.
/// - `count(n)`: the `n` right-most entries are our proxies; the client is the entry just left of them.
/// - `networks`: walking from the right, entries inside a trusted network are skipped; the client is
///   the first entry that is not (or the left-most entry when all are trusted).
/// - `none`: the header is ignored; the client is the TCP peer.
public enum TrustedProxies: Sendable, Equatable {
    case none
    case count(Int)
    case networks([IPNetwork])

    /// A number of proxies (`1`), or a comma-separated list of addresses and CIDR networks
    /// (`10.0.0.0/8, 127.0.0.1, ::1`).
    public static func parse(_ text: String) throws(ConfigurationError) -> TrustedProxies {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let n = Int(trimmed) {
            guard (0...16).contains(n) else { throw ConfigurationError("COSYNC_TRUSTED_PROXIES", "must be a count from 0 to 16 or a list of CIDR networks") }
            return n == 0 ? .none : .count(n)
        }
        var networks: [IPNetwork] = []
        for part in trimmed.split(separator: ",") {
            guard let network = IPNetwork(part.trimmingCharacters(in: .whitespaces)) else {
                throw ConfigurationError("COSYNC_TRUSTED_PROXIES", "'\(part)' is not an IP address or CIDR network")
            }
            networks.append(network)
        }
        guard !networks.isEmpty else { throw ConfigurationError("COSYNC_TRUSTED_PROXIES", "must not be empty") }
        return .networks(networks)
    }

    /// The client address for a request from `peer` whose proxy header lines are `headerLines`.
    public func clientAddress(peer: String?, headerLines: [String]) -> String? {
        let forwarded = headerLines.flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        switch self {
        case .none:
            return peer
        case .count(let n):
            let chain = forwarded + (peer.map { [$0] } ?? [])
            guard !chain.isEmpty else { return nil }
            let index = chain.count - 1 - n
            return Self.bounded(chain[max(0, index)])
        case .networks(let networks):
            let chain = forwarded + (peer.map { [$0] } ?? [])
            for entry in chain.reversed() {
                guard let address = IPNetwork.Address(entry), networks.contains(where: { $0.contains(address) }) else {
                    return Self.bounded(entry)
                }
            }
            return chain.first.map(Self.bounded)
        }
    }

    /// A header entry is used as a counter key: never longer than an IPv6 address with a zone, counted
    /// in UTF-8 bytes (a character count lets combining marks make a key too long for its index).
    static func bounded(_ entry: String) -> String {
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in entry.unicodeScalars {
            bytes += UTF8.width(scalar)
            guard bytes <= 64 else { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }
}

/// An IPv4 or IPv6 network (`10.0.0.0/8`, `::1/128`; a bare address is a /32 or /128).
public struct IPNetwork: Sendable, Equatable {
    public struct Address: Sendable, Equatable {
        let bytes: [UInt8]  // 4 or 16

        public init?(_ text: String) {
            var v4 = in_addr()
            var v6 = in6_addr()
            if inet_pton(AF_INET, text, &v4) == 1 {
                bytes = withUnsafeBytes(of: &v4) { Array($0) }
            } else if inet_pton(AF_INET6, text, &v6) == 1 {
                let all = withUnsafeBytes(of: &v6) { Array($0) }
                // An IPv4-mapped IPv6 address (`::ffff:10.0.0.2`, what a dual-stack listener reports
                // for an IPv4 peer) is that IPv4 address.
                bytes = all.prefix(10).allSatisfy { $0 == 0 } && all[10] == 0xFF && all[11] == 0xFF ? Array(all.suffix(4)) : all
            } else {
                return nil
            }
        }

        /// The key that limits count a client under: an IPv4 address as itself, an IPv6 address by
        /// its /64 (one host usually holds a whole /64, so counting /128s would give it unlimited
        /// addresses). Text that is no address is kept, bounded.
        public static func limitKey(_ text: String) -> String {
            guard let address = Address(text) else { return TrustedProxies.bounded(text) }
            let b = address.bytes
            if b.count == 4 { return "\(b[0]).\(b[1]).\(b[2]).\(b[3])" }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(b[$0]) << 8 | UInt16(b[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        }
    }

    let base: Address
    let prefix: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let base = Address(String(parts[0])) else { return nil }
        let width = base.bytes.count * 8
        if parts.count == 2 {
            guard let prefix = Int(parts[1]), (0...width).contains(prefix) else { return nil }
            self.prefix = prefix
        } else {
            self.prefix = width
        }
        self.base = base
    }

    public func contains(_ address: Address) -> Bool {
        guard address.bytes.count == base.bytes.count else { return false }
        var remaining = prefix
        for (a, b) in zip(address.bytes, base.bytes) where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if a & mask != b & mask { return false }
            remaining -= bits
        }
        return true
    }
}
