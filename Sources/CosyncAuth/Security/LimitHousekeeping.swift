import Logging
import PostgresNIO
import ServiceLifecycle

/// Removes idle limit counters (`login_throttle`, `rate_limits`) and long-expired sessions every `interval` on every node (the
/// delete is idempotent). A counter idle for `idleSeconds` (8 days: longer than any window, lock or
/// code lifetime a setting allows) counts nothing any more; without this, every handle and address an
/// attacker tries would stay a row for ever.
public struct LimitHousekeeping: Service {
    let client: PostgresClient
    let logger: Logger
    let interval: Duration
    let idleSeconds: Int

    public init(client: PostgresClient, logger: Logger, interval: Duration = .seconds(600), idleSeconds: Int = 8 * 86_400) {
        self.client = client
        self.logger = logger
        self.interval = interval
        self.idleSeconds = idleSeconds
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                _ = try? await abandoningOnCancel { try await purge() }
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Events are kept this many days (replays reach back that far), then removed with their
    /// deliveries and attempt logs, unless a delivery of them is still pending.
    public static let eventRetentionDays = 30

    /// One pass; returns how many rows were removed: idle counters, sessions expired for over a day,
    /// expired WebAuthn challenges, AppKey signups and passkey resets expired for over a day, events
    /// past their retention (at most 10,000 a pass), expired OAuth client assertions, and DPoP proofs seen
    /// that left their window. Each table's rows go through its own store.
    @discardableResult
    public func purge() async throws -> Int {
        // One statement per store, summed one by one (a single long `+` chain is too slow to type-check).
        try await client.withConnection { db in
            var removed = 0
            removed += try await ThrottleStore.purgeIdle(db, idleSeconds: idleSeconds, logger: logger)
            removed += try await SessionStore.purgeExpired(db, logger: logger)
            removed += try await ChallengeStore.purgeExpired(db, logger: logger)
            removed += try await PasskeyStore.purgeExpiredSignups(db, logger: logger)
            removed += try await PasskeyStore.purgeExpiredResets(db, logger: logger)
            removed += try await EventStore.purgeOld(db, olderThanDays: Self.eventRetentionDays, logger: logger)
            removed += try await OAuthDPoPProofStore.purgeExpired(db, logger: logger)
            removed += try await OAuthRefreshTokenStore.purgeExpired(db, logger: logger)
            removed += try await OAuthGrantStore.purgeExpired(db, logger: logger)
            removed += try await OAuthClientAssertionStore.purgeExpired(db, logger: logger)
            removed += try await OAuthAssertionJTIStore.purgeExpired(db, logger: logger)
            removed += try await OAuthUpstreamLoginStore.purgeExpired(db, logger: logger)
            removed += try await OAuthRequestStore.deleteExpired(db, limit: 10_000, logger: logger)
            removed += try await OAuthCodeStore.deleteExpired(db, logger: logger)
            removed += try await PortalStore.purgeExpired(db, absoluteSeconds: PortalAccounts.absoluteSeconds, logger: logger)
            return removed
        }
    }
}
