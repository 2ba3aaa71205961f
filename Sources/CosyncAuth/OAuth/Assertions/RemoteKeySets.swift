import AsyncHTTPClient
import Foundation
import Logging
import NIOCore

/// The rule for URLs an app registers for the server to fetch (a backend's JWK set, an upstream
/// provider's discovery document and the endpoints it names): `https`, or `http` to a loopback address
/// only (a provider running beside the server, and the tests); an absolute URL with a host, no user
/// information, no fragment, ASCII without spaces, at most 2048 characters.
public enum FetchableURL {
    public static let maxLength = 2048

    /// Nil when `text` may be fetched; else why not (a sentence for the admin caller).
    public static func refusal(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= maxLength, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            return "must be an ASCII URL of 1-\(maxLength) characters without spaces"
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty
        else { return "must be an absolute URL with a host" }
        guard components.user == nil, components.password == nil, components.fragment == nil else {
            return "must not carry user information or a fragment"
        }
        if let port = components.port, !(1...65535).contains(port) { return "has an invalid port" }
        switch scheme {
        case "https": return nil
        // A loopback address passes here; whether the operator lets the server call it is decided at
        // every fetch (`GuardedFetch`), under the same rule as webhooks and client JWKS URLs.
        case "http": return isLoopback(host) ? nil : "must use https (http only to a loopback address)"
        default: return "must use https"
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if bare == "localhost" || bare == "::1" { return true }
        let parts = bare.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { part in part.count <= 3 && UInt8(part) != nil }
    }
}

/// JWK sets fetched from URLs apps registered (their backends' keys, their upstream providers'), cached
/// on this node. A set is fetched when first needed, again when a token names a key id the cached set
/// lacks (at most once per `minimumRefetchInterval` per URL, so junk tokens cannot make the server
/// hammer anyone), and again once it is `maximumAge` old, so a withdrawn key stops being trusted. A
/// failed fetch keeps what was cached. Nodes cache on their own: nothing here needs to agree.
public actor RemoteKeySets {
    struct Entry {
        var keys: [[String: JSONValue]]
        var fetchedAt: ContinuousClock.Instant
    }

    let http: HTTPClient
    /// The operator's rule for outgoing calls: it decides whether a loopback URL may be fetched.
    public let outbound: WebhookURLGuard
    let minimumRefetchInterval: Duration
    let maximumAge: Duration
    var entries: [String: Entry] = [:]
    var lastAttempt: [String: ContinuousClock.Instant] = [:]
    /// The cache holds at most this many URLs; the oldest goes first.
    static let maxEntries = 1000
    /// A JWK set may not be bigger, nor hold more keys.
    static let maxBytes = 256 * 1024
    static let maxKeys = 100

    public init(
        http: HTTPClient = .shared, outbound: WebhookURLGuard = ClientKeys.publicOnly, minimumRefetchInterval: Duration = .seconds(10),
        maximumAge: Duration = .seconds(3600)
    ) {
        self.http = http
        self.outbound = outbound
        self.minimumRefetchInterval = minimumRefetchInterval
        self.maximumAge = maximumAge
    }

    /// The usable keys of the set at `url` (normalised by `PublicJWK`; keys it cannot use are left
    /// out), fetched as the type's rules say. `kid` is the key id a token names, if any. Nil when the
    /// set was never fetched successfully.
    func keys(url: String, kid: String?, logger: Logger) async -> [[String: JSONValue]]? {
        let now = ContinuousClock.now
        let cached = entries[url]
        if let cached, now - cached.fetchedAt < maximumAge, kid == nil || cached.keys.contains(where: { $0["kid"]?.stringValue == kid }) {
            return cached.keys
        }
        if let last = lastAttempt[url], now - last < minimumRefetchInterval { return cached?.keys }
        lastAttempt[url] = now
        do {
            let fetched = try await fetch(url)
            if entries.count >= Self.maxEntries, entries[url] == nil,
               let oldest = entries.min(by: { $0.value.fetchedAt < $1.value.fetchedAt })?.key {
                entries[oldest] = nil
                lastAttempt[oldest] = nil
            }
            entries[url] = Entry(keys: fetched, fetchedAt: .now)
            return fetched
        } catch {
            logger.warning("could not fetch a JWK set", metadata: ["url": "\(url)", "error": "\(error)"])
            return cached?.keys
        }
    }

    /// Fetches and reads a JWK set now (the admin API checks a URL when it is registered). Throws a
    /// `Failure` naming what went wrong.
    func fetch(_ url: String) async throws(Failure) -> [[String: JSONValue]] {
        let document = try await Self.fetchJSON(url, http: http, outbound: outbound, maxBytes: Self.maxBytes)
        guard let list = document["keys"]?.arrayValue, list.count <= Self.maxKeys else {
            throw Failure(reason: "the document is not a JWK set (an object with at most \(Self.maxKeys) keys)")
        }
        return list.compactMap { $0.objectValue.flatMap { try? PublicJWK.normalized($0) } }
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// GETs a JSON object (10 s at most, `maxBytes` at most, status 200), for JWK sets and discovery
    /// documents. The URL must pass `FetchableURL`.
    static func fetchJSON(_ url: String, http: HTTPClient, outbound: WebhookURLGuard, maxBytes: Int) async throws(Failure) -> [String: JSONValue] {
        if let refusal = FetchableURL.refusal(url) { throw Failure(reason: "the URL \(refusal)") }
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let body: ByteBuffer
        do {
            let answer = try await GuardedFetch.send(request, outbound: outbound, maxBytes: maxBytes)
            guard answer.status == 200 else { throw Failure(reason: "the server answered HTTP \(answer.status)") }
            body = answer.body
        } catch let failure as Failure {
            throw failure
        } catch let refused as GuardedFetch.Refused {
            throw Failure(reason: "the URL may not be fetched: \(refused.description)")
        } catch {
            throw Failure(reason: "the URL could not be fetched (\(type(of: error)))")
        }
        guard let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(body.readableBytesView)))?.objectValue else {
            throw Failure(reason: "the answer is not a JSON object")
        }
        return object
    }
}

/// Sends a request to a URL an app registered (an upstream provider's discovery document, JWK set or
/// token endpoint; a backend's JWK set) under the same rule as webhook deliveries and client JWKS
/// URLs: the host is resolved once, every address it resolves to must be public (`ClientKeys.publicOnly`),
/// the connection goes to the address that was checked, and redirects are not followed
/// (`WebhookConnector`). A loopback host (`FetchableURL`'s http exception: a provider beside the
/// server, and the tests) is connected to directly, and only where the operator's rule for outgoing
/// calls allows http and that address (COSYNC_WEBHOOK_ALLOW_HTTP, COSYNC_WEBHOOK_ALLOW_CIDRS), as for a
/// client's JWKS URL: otherwise any app's developer could make the server call services on its own host.
enum GuardedFetch {
    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    static func send(_ request: HTTPClientRequest, outbound: WebhookURLGuard, maxBytes: Int) async throws -> (status: UInt, body: ByteBuffer) {
        guard let components = URLComponents(string: request.url), let host = components.host else {
            throw Refused(description: "not an absolute URL")
        }
        let route: WebhookURLGuard.Route
        if FetchableURL.isLoopback(host) {
            if let refusal = await outbound.check(request.url) {
                throw Refused(description: "a loopback address only where the operator allows it (\(refusal.message))")
            }
            let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            route = WebhookURLGuard.Route(pinnedHost: nil, address: bare == "localhost" ? "127.0.0.1" : bare)
        } else {
            switch await ClientKeys.publicOnly.route(request.url) {
            case .success(let checked): route = checked
            case .failure(let refusal): throw Refused(description: refusal.message)
            }
        }
        return try await WebhookConnector.shared.withClient(route, connectTimeout: .seconds(5)) { http in
            let response = try await http.execute(request, timeout: .seconds(10))
            return (UInt(response.status.code), try await response.body.collect(upTo: maxBytes))
        }
    }
}
