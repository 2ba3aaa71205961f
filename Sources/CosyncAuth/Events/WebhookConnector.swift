import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The HTTP clients of webhook deliveries, each pinned to an address the SSRF guard checked.
///
/// The guard resolves an endpoint's host and checks every address; if the HTTP client then resolved
/// the name again to connect, a DNS server answering a public address first and a private one next
/// (rebinding) would get the request delivered to the private one. So a delivery never lets the client
/// resolve: it connects to the first checked address through AsyncHTTPClient's `dnsOverride` (the host
/// name still gives the Host header, the TLS SNI and the name the certificate must carry). As
/// `dnsOverride` is a client setting, there is one client per (host, checked address), kept in a small
/// cache so that keep-alive connections are reused; an idle client beyond the cache's bound is shut down.
///
/// The clients do not follow redirects (a redirect could lead past the address check) and do not retry
/// a failed connection: a refused or reset connection fails its attempt at once, recorded as such,
/// instead of costing the whole attempt timeout.
final class WebhookConnector: Sendable {
    /// The process-wide connector of the webhook workers.
    static let shared = WebhookConnector()

    /// The most clients kept; beyond it, the least recently used idle ones are shut down.
    static let maxClients = 64

    struct Key: Hashable {
        /// The URL's host as AsyncHTTPClient reads it, when it is a name that needs pinning.
        let host: String?
        /// The checked address connections go to (nil: the host is itself an address).
        let address: String?
        let connectTimeout: Int64
    }

    private struct Entry {
        let client: HTTPClient
        var users: Int
        var lastUsed: UInt64
    }

    private struct State {
        var clients: [Key: Entry] = [:]
        var clock: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Runs `body` with the client for `route`; the client is not shut down while `body` runs.
    func withClient<T: Sendable>(
        _ route: WebhookURLGuard.Route, connectTimeout: Duration, _ body: (HTTPClient) async throws -> T
    ) async throws -> T {
        let key = Key(host: route.pinnedHost, address: route.pinnedHost == nil ? nil : route.address,
                      connectTimeout: connectTimeout.components.seconds)
        let (client, retired) = lease(key)
        for old in retired { Self.shutDown(old) }
        defer { release(key) }
        return try await body(client)
    }

    private func lease(_ key: Key) -> (HTTPClient, [HTTPClient]) {
        state.withLockedValue { state in
            state.clock += 1
            if var entry = state.clients[key] {
                entry.users += 1
                entry.lastUsed = state.clock
                state.clients[key] = entry
                return (entry.client, [])
            }
            let client = Self.makeClient(key)
            state.clients[key] = Entry(client: client, users: 1, lastUsed: state.clock)
            var retired: [HTTPClient] = []
            if state.clients.count > Self.maxClients {
                let idle = state.clients.filter { $0.value.users == 0 }.sorted { $0.value.lastUsed < $1.value.lastUsed }
                for (oldKey, entry) in idle.prefix(state.clients.count - Self.maxClients) {
                    state.clients[oldKey] = nil
                    retired.append(entry.client)
                }
            }
            return (client, retired)
        }
    }

    private func release(_ key: Key) {
        state.withLockedValue { state in
            if var entry = state.clients[key] {
                entry.users -= 1
                state.clients[key] = entry
            }
        }
    }

    private static func shutDown(_ client: HTTPClient) {
        Task.detached { try? await client.shutdown() }
    }

    private static func makeClient(_ key: Key) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(key.connectTimeout), read: .seconds(key.connectTimeout))
        configuration.decompression = .disabled
        // One connection attempt per request: the pool's retries would hide a refused connection until
        // the request's deadline.
        configuration.connectionPool.retryConnectionEstablishment = false
        if let host = key.host, let address = key.address { configuration.dnsOverride = [host: address] }
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// What an attempt's log says about a failed HTTP call: what happened on the network, in words.
    static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return describe(errno: error.errnoCode) }
        if let error = error as? NIOConnectionError {
            if let dns = error.dnsAError ?? error.dnsAAAAError { return "the host does not resolve (\(dns))" }
            if let first = error.connectionErrors.first { return describe(first.error) }
            return "could not connect"
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout: return "connect timed out"
            case .eof, .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed: return "connection closed by the endpoint"
            default: return "connection error (\(error))"
            }
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "connect timed out"
            case .deadlineExceeded: return "timed out"
            case .readTimeout: return "read timed out"
            case .remoteConnectionClosed: return "connection closed by the endpoint"
            case .cancelled: return "cancelled"
            default: return "HTTP error (\(error))"
            }
        }
        if error is NIOSSLError || error is BoringSSLError { return "TLS failed (\(error))" }
        return "\(type(of: error))"
    }

    static func describe(errno code: Int32) -> String {
        switch code {
        case ECONNREFUSED: return "connection refused"
        case ECONNRESET: return "connection reset"
        case ETIMEDOUT: return "connect timed out"
        case ENETUNREACH, EHOSTUNREACH: return "host unreachable"
        case EPIPE: return "connection closed by the endpoint"
        default: return "network error (\(String(cString: strerror(code))))"
        }
    }
}
