import Foundation
import Logging
import PostgresNIO

extension ChallengeStore {
    /// Drops every WebAuthn challenge naming the user (AppKey `deleteAccount`). Nothing cascades to
    /// them: `user_id` has no foreign key, as a signup's challenge names a user not created yet.
    static func deleteAll(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM webauthn_challenges WHERE user_id = \(userId)", logger: logger)
    }
}
