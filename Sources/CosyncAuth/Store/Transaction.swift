import Logging
import PostgresNIO

extension PostgresClient {
    /// Runs `body` in a transaction (rolled back when it throws) and rethrows the body's own error,
    /// not PostgresNIO's wrapper, so callers see their typed errors (a validation failure stays a
    /// validation failure).
    public func transaction<Result>(
        logger: Logger, isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        do {
            return try await withTransaction(logger: logger, isolation: isolation, body)
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError { throw inner }
            throw error
        }
    }
}
