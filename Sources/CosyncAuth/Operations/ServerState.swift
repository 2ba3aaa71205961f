import NIOConcurrencyHelpers

/// What `/readyz` and the availability gate read: whether this node is draining (a graceful shutdown
/// began) and whether PostgreSQL answered the last probe of the `DatabaseMonitor`.
public final class ServerState: Sendable {
    public enum Readiness: String, Sendable {
        case ready
        case draining
        case databaseUnavailable = "database_unavailable"
        case migrationsPending = "migrations_pending"
    }

    private struct Values {
        var draining = false
        var databaseUp = true
        var lastContact: ContinuousClock.Instant?
    }

    private let values = NIOLockedValueBox(Values())
    /// Wakes this node's outbox workers (`NOTIFY cosync_work, 'outbox'`).
    public let outboxWork = WorkSignal()
    /// Wakes this node's webhook workers (`NOTIFY cosync_work, 'webhooks'`).
    public let webhookWork = WorkSignal()

    public init() {}

    /// The app cache listener's connection just answered a ping: the database is reachable, so the
    /// database monitor may skip its own probe (an idle node then makes one probe, not two).
    public func noteDatabaseContact() { values.withLockedValue { $0.lastContact = ContinuousClock.now } }

    /// The listener's connection ended: the monitor probes on its own again at once.
    public func forgetDatabaseContact() { values.withLockedValue { $0.lastContact = nil } }

    /// Whether the database answered within `interval` (see `noteDatabaseContact`).
    public func heardFromDatabase(within interval: Duration) -> Bool {
        values.withLockedValue { $0.lastContact.map { ContinuousClock.now - $0 < interval } ?? false }
    }

    public var isDraining: Bool { values.withLockedValue { $0.draining } }
    public var isDatabaseUp: Bool { values.withLockedValue { $0.databaseUp } }

    /// From now on `/readyz` answers 503 `draining`; requests are still served.
    public func startDraining() { values.withLockedValue { $0.draining = true } }

    /// Returns true when the value changed.
    @discardableResult
    public func setDatabaseUp(_ up: Bool) -> Bool {
        values.withLockedValue { current in
            defer { current.databaseUp = up }
            return current.databaseUp != up
        }
    }
}
