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
    }

    private let values = NIOLockedValueBox(Values())

    public init() {}

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
