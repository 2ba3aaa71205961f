import Foundation
import Logging
import PostgresNIO

/// The account a verified provider account names, for the end-user and AppKey social flows.
enum SocialAccounts {
    /// The user holding the provider account (`linked`), else the user whose handle is the provider's
    /// verified e-mail (not linked).
    static func match(
        _ db: PostgresConnection, appRef: Int64, provider: SocialProvider, email: String?, subject: String, logger: Logger
    ) async throws -> (user: User, linked: Bool)? {
        if let user = try await IdentityStore.user(db, appRef: appRef, kind: IdentityKind(provider), subject: subject, logger: logger) {
            return (user, true)
        }
        guard let email, !email.isEmpty else { return nil }
        return try await UserStore.user(db, appRef: appRef, handle: email, logger: logger).map { ($0, false) }
    }
}
