import PostgresNIO

/// Tells a database that went away (a failover, a restart, a switchover's shutdown) from a real
/// failure: the APIs answer the first with 503 and `Retry-After` (the client retries, as with the
/// availability gate), the second with their internal-error answer. Found by the Patroni failover
/// test (Tests/system/failover): requests in flight at the switch were answered as internal errors.
public enum DatabaseAvailability {
    /// Whether `error` says PostgreSQL could not be reached, or ended the connection or session:
    /// connection errors, `08xxx` (connection exception), `57P01`-`57P03` (admin or crash shutdown,
    /// cannot connect now) and `25006` (a write that reached a standby just demoted or not yet
    /// promoted).
    public static func isUnavailable(_ error: any Error) -> Bool {
        // A transaction's failure wraps the statement's (begin, body or commit).
        if let transaction = error as? PostgresTransactionError {
            return [transaction.beginError, transaction.closureError, transaction.commitError].contains { $0.map(isUnavailable) ?? false }
        }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed:
            return true
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "25006"].contains(state)
        default:
            return false
        }
    }
}
