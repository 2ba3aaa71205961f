import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import ServiceLifecycle

/// The apps the end-user API reads on every request, held in memory by app id and by app-token hash.
///
/// **Consistency across nodes.** Every change to `apps`, `app_tokens` or `app_keys`, by any node, the
/// admin API, the CLI or the legacy importer, fires a trigger (sql/0012_app_cache.sql) that sends
/// `NOTIFY cosync_apps, '<app ref>'` when its transaction commits. Each node's `AppCacheListener`
/// listens on that channel and drops the app at once. The node that made the change also drops it
/// itself, before it answers, so its own next request never sees the old row.
///
/// **No listener, no cache.** Entries are served only while the listener's connection is up and has
/// been since they were loaded: a lost connection (notifications may have been missed) empties the
/// cache and turns it off until the listener is back. So a security change (suspension, deletion, a
/// rotated-away app token) never waits for the TTL; the TTL (`ttl`, `COSYNC_APP_CACHE_TTL`, 120 s by default) is only the net
/// under a connection that died without saying so, and the listener's ping bounds that case too.
///
/// **No stale write-back.** A load records the cache's generation before its query and stores its
/// result only if that app was not invalidated, and the cache not emptied, in between. (Other apps'
/// changes do not count: under steady admin traffic a global check would keep nearly nothing.)
public final class AppCache: Sendable {
    struct Entry {
        let row: App
        let loadedAt: ContinuousClock.Instant
    }

    struct TokenEntry {
        let ref: Int64
        /// The end of the token's grace period after a rotation; nil while it is the current token.
        let expiresAt: Date?
        let loadedAt: ContinuousClock.Instant
    }

    struct State {
        var live = false
        /// When the listener's connection went down, with entries kept: they are served for
        /// `AppCache.outageGrace` after it (a failover must not stall every cached read), never stored
        /// to, and dropped when the listener is back (notifications may have been missed meanwhile).
        var downSince: ContinuousClock.Instant?
        /// Each app's public keys as the JWKS route shows them.
        var jwksByRef: [Int64: (keys: [[String: String]], loadedAt: ContinuousClock.Instant, until: Date?)] = [:]
        /// Counts every invalidation; `lastReset` and `invalidatedAt` say when each kind last happened.
        var generation: UInt64 = 0
        var lastReset: UInt64 = 0
        var invalidatedAt: [Int64: UInt64] = [:]
        var byRef: [Int64: Entry] = [:]
        var refByAppId: [String: Int64] = [:]
        var byTokenHash: [Data: TokenEntry] = [:]
        var tokensByRef: [Int64: Set<Data>] = [:]
        /// The kid of each app's signing key (the parsed key itself stays in `TokenIssuer`, by kid).
        var signingKidByRef: [Int64: (kid: String, loadedAt: ContinuousClock.Instant)] = [:]
        /// Counts changes of the imported legacy server keys (and every reset, when notifications may
        /// have been missed): `TokenIssuer` reloads those keys when it differs from the one it loaded under.
        var legacyKeysGeneration: UInt64 = 0

        mutating func clear() {
            generation &+= 1
            legacyKeysGeneration &+= 1
            lastReset = generation
            invalidatedAt = [:]
            byRef = [:]
            refByAppId = [:]
            byTokenHash = [:]
            tokensByRef = [:]
            signingKidByRef = [:]
            jwksByRef = [:]
            downSince = nil
        }

        /// Whether entries may be served now: the listener is connected, or went down less than the
        /// grace ago.
        func serving(_ now: ContinuousClock.Instant, grace: Duration) -> Bool {
            live || downSince.map { now - $0 < grace } ?? false
        }

        mutating func drop(ref: Int64) {
            generation &+= 1
            invalidatedAt[ref] = generation
            if let entry = byRef.removeValue(forKey: ref) { refByAppId.removeValue(forKey: entry.row.appId) }
            for hash in tokensByRef.removeValue(forKey: ref) ?? [] { byTokenHash.removeValue(forKey: hash) }
            signingKidByRef.removeValue(forKey: ref)
            jwksByRef.removeValue(forKey: ref)
        }

        /// Whether a load of app `ref` that began at `generation` may be kept.
        func mayStore(ref: Int64, loadedSince generation: UInt64) -> Bool {
            live && lastReset <= generation && (invalidatedAt[ref] ?? 0) <= generation
        }
    }

    let state = NIOLockedValueBox(State())
    public let ttl: Duration
    /// Above this many apps the cache starts again empty (a bound on memory, not an eviction policy:
    /// 100,000 apps hold a few hundred MB at most, far more than one deployment serves).
    public let capacity: Int

    /// How long entries are still served after the listener's connection went down. A PostgreSQL
    /// failover (Tests/system/failover) takes the listener's connection with it for 2-5 s; without a
    /// grace every cached read (getApplication, the JWKS, token checks) stalled on the pool until the
    /// new primary answered. The price: a change made through another node in that window is seen here
    /// only when the listener is back (then the whole cache is dropped) or the grace ends.
    public let outageGrace: Duration

    public init(ttl: Duration = .seconds(120), capacity: Int = 100_000, outageGrace: Duration = .seconds(10)) {
        self.ttl = ttl
        self.capacity = max(1, capacity)
        self.outageGrace = outageGrace
    }

    /// Whether entries are being served (the listener is connected).
    public var isLive: Bool { state.withLockedValue { $0.live } }

    /// The generation to pass to `store`, or nil when the cache is off (then do not store).
    func beginLoad() -> UInt64? {
        state.withLockedValue { $0.live ? $0.generation : nil }
    }

    func app(appId: String) -> App? {
        let now = ContinuousClock.now
        return state.withLockedValue { state in
            guard state.serving(now, grace: outageGrace), let ref = state.refByAppId[appId], let entry = state.byRef[ref], now - entry.loadedAt < ttl
            else { return nil }
            return entry.row
        }
    }

    func app(tokenHash: Data) -> App? {
        let now = ContinuousClock.now
        let wall = Date()
        return state.withLockedValue { state in
            guard state.serving(now, grace: outageGrace), let token = state.byTokenHash[tokenHash], now - token.loadedAt < ttl,
                token.expiresAt.map({ $0 > wall }) ?? true,
                let entry = state.byRef[token.ref], now - entry.loadedAt < ttl
            else { return nil }
            return entry.row
        }
    }

    /// Keeps `row` (and, when given, the token that led to it) unless the app changed, or the cache was
    /// emptied, since `generation`.
    func store(_ row: App, tokenHash: Data? = nil, tokenExpiresAt: Date? = nil, generation: UInt64) {
        let now = ContinuousClock.now
        state.withLockedValue { state in
            guard state.mayStore(ref: row.ref, loadedSince: generation) else { return }
            if state.byRef.count >= capacity && state.byRef[row.ref] == nil || state.invalidatedAt.count >= capacity {
                state.clear()
                return
            }
            state.byRef[row.ref] = Entry(row: row, loadedAt: now)
            state.refByAppId[row.appId] = row.ref
            if let tokenHash {
                state.byTokenHash[tokenHash] = TokenEntry(ref: row.ref, expiresAt: tokenExpiresAt, loadedAt: now)
                state.tokensByRef[row.ref, default: []].insert(tokenHash)
            }
        }
    }

    /// The kid of the app's signing key, if known.
    func signingKid(ref: Int64) -> String? {
        let now = ContinuousClock.now
        return state.withLockedValue { state in
            guard state.serving(now, grace: outageGrace), let entry = state.signingKidByRef[ref], now - entry.loadedAt < ttl else { return nil }
            return entry.kid
        }
    }

    func storeSigningKid(_ kid: String, ref: Int64, generation: UInt64) {
        let now = ContinuousClock.now
        state.withLockedValue { state in
            guard state.mayStore(ref: ref, loadedSince: generation), state.signingKidByRef.count < capacity else { return }
            state.signingKidByRef[ref] = (kid, now)
        }
    }

    /// The app's JWKS keys, if known.
    func jwks(ref: Int64) -> [[String: String]]? {
        let now = ContinuousClock.now
        let wall = Date()
        return state.withLockedValue { state in
            guard state.serving(now, grace: outageGrace), let entry = state.jwksByRef[ref], now - entry.loadedAt < ttl,
                entry.until.map({ $0 > wall }) ?? true
            else { return nil }
            return entry.keys
        }
    }

    /// Keeps an app's JWKS keys, at most until `until` (the first retirement of a rotated-out key).
    func storeJWKS(_ keys: [[String: String]], ref: Int64, until: Date?, generation: UInt64) {
        let now = ContinuousClock.now
        state.withLockedValue { state in
            guard state.mayStore(ref: ref, loadedSince: generation), state.jwksByRef.count < capacity else { return }
            state.jwksByRef[ref] = (keys, now, until)
        }
    }

    /// Drops one app (by its internal id), on this node's own change or a notification.
    public func invalidate(ref: Int64) {
        state.withLockedValue { $0.drop(ref: ref) }
    }

    /// The imported legacy server keys changed (sql/0020_legacy_token_keys_notify.sql): this node's own
    /// import, or a notification.
    public func legacyKeysChanged() {
        state.withLockedValue { $0.legacyKeysGeneration &+= 1 }
    }

    /// Whether a copy of the legacy server keys loaded under `generation` is still current: no change was
    /// announced since, and the listener did not come or go (notifications may have been missed).
    func legacyKeysCurrent(since generation: UInt64) -> Bool {
        state.withLockedValue { $0.legacyKeysGeneration == generation }
    }

    /// The generation to record before loading the legacy server keys.
    var legacyKeysGeneration: UInt64 { state.withLockedValue { $0.legacyKeysGeneration } }

    /// Empties the cache and turns it on or off (the listener's connection came up or went down).
    func reset(live: Bool) {
        state.withLockedValue { state in
            state.clear()
            state.live = live
        }
    }

    /// The listener's connection went down: nothing new is stored, and what is held is served for
    /// `outageGrace` more (see there), then not at all until the listener is back (`reset(live: true)`).
    func listenerLost() {
        let now = ContinuousClock.now
        state.withLockedValue { state in
            guard state.live else { return }
            state.live = false
            state.downSince = now
        }
    }

    /// The number of apps held (for tests and metrics).
    public var count: Int { state.withLockedValue { $0.byRef.count } }
}

/// Keeps one pooled connection listening on `cosync_apps` and turns the cache on while it does. A
/// notification's payload is the app's internal id, or `legacy-token-keys` (the imported legacy server
/// keys changed); anything else empties the whole cache. A ping every
/// `pingInterval` finds a connection that died silently; then the cache is off until it is back.
public struct AppCacheListener: Service {
    public static let channel = "cosync_apps"
    /// The payload that announces a change of the imported legacy server keys (sql/0020).
    static let legacyKeysPayload = "legacy-token-keys"
    let cache: AppCache
    let client: PostgresClient
    let logger: Logger
    let pingInterval: Duration
    /// The node's state: its ping is the database monitor's sign of life, and `cosync_work`
    /// notifications (heard on the same connection) wake its workers.
    let state: ServerState?
    /// The channel of the workers' wake-ups (sql/0030): payload `outbox` or `webhooks`.
    public static let workChannel = "cosync_work"

    public init(cache: AppCache, client: PostgresClient, logger: Logger, pingInterval: Duration = .seconds(2), state: ServerState? = nil) {
        self.cache = cache
        self.client = client
        self.logger = logger
        self.pingInterval = pingInterval
        self.state = state
    }

    public func run() async throws {
        var wait = Duration.milliseconds(250)
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let started = ContinuousClock.now
            do {
                try await cancelWhenGracefulShutdown { try await abandoningOnCancel { try await listenOnce() } }
            } catch {
                cache.listenerLost()
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                logger.debug("app cache listener reconnecting", metadata: ["reason": "\(describeForOperator(error))"])
            }
            cache.listenerLost()
            // A connection that lasted is a fresh start: the next outage retries quickly again.
            if ContinuousClock.now - started > .seconds(10) { wait = .milliseconds(250) }
            let pause = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            wait = min(wait * 2, .seconds(5))
        }
        cache.reset(live: false)
    }

    /// One connection's life: listen, turn the cache on, apply notifications and ping until it fails.
    func listenOnce() async throws {
        try await client.withConnection { connection in
            try await connection.listen(on: Self.workChannel) { work in
                try await connection.listen(on: Self.channel) { notifications in
                    // LISTEN is in place: whatever changes from now on is notified. What was cached before
                    // (under an earlier connection) is gone with the reset. The workers, which polled while
                    // no one listened, look once more and then wait for notifications.
                    cache.reset(live: true)
                    state?.outboxWork.setListening(true)
                    state?.webhookWork.setListening(true)
                    state?.outboxWork.signal()
                    state?.webhookWork.signal()
                    defer {
                        state?.forgetDatabaseContact()
                        cache.listenerLost()
                        state?.outboxWork.setListening(false)
                        state?.webhookWork.setListening(false)
                    }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for try await notification in notifications {
                                if let ref = Int64(notification.payload) {
                                    cache.invalidate(ref: ref)
                                } else if notification.payload == Self.legacyKeysPayload {
                                    cache.legacyKeysChanged()
                                } else {
                                    cache.reset(live: true)
                                }
                            }
                            throw AppCacheListenerEnded()
                        }
                        group.addTask {
                            for try await notification in work {
                                switch notification.payload {
                                case "outbox": state?.outboxWork.signal()
                                case "webhooks": state?.webhookWork.signal()
                                default:
                                    state?.outboxWork.signal()
                                    state?.webhookWork.signal()
                                }
                            }
                            throw AppCacheListenerEnded()
                        }
                        group.addTask {
                            while true {
                                try await Task.sleep(for: pingInterval)
                                try await withDeadline(pingInterval) {
                                    try await DatabaseStatusStore.ping(connection, logger: logger)
                                    return true
                                }
                                state?.noteDatabaseContact()
                            }
                        }
                        _ = try await group.next()
                        group.cancelAll()
                    }
                }
            }
        }
    }
}

struct AppCacheListenerEnded: Error {}
