import Foundation
import Logging
import PostgresNIO

/// Login challenges (`login_challenges`): the second step of a login, named by its login-token.
enum LoginChallengeStore {
    struct Challenge: Sendable {
        let id: UUID
        let userId: UUID
        let factor: SecondFactor
        let codeSealed: Data?
        let attempts: Int
        let expired: Bool
        let used: Bool
    }

    static func insertChallenge(
        _ db: PostgresConnection, id: UUID, appRef: Int64, userId: UUID, factor: SecondFactor, codeSealed: Data?, lifetimeSeconds: Int,
        logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO login_challenges (id, app_ref, user_id, factor, code_sealed, expires_at)
            VALUES (\(id), \(appRef), \(userId), \(factor.rawValue), \(codeSealed), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
        // Old challenges are of no use once expired.
        try await db.query("DELETE FROM login_challenges WHERE user_id = \(userId) AND expires_at < now() - interval '1 day'", logger: logger)
    }

    /// Drops every login challenge of the user (a password reset that turns the second factor off).
    static func deleteAll(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM login_challenges WHERE user_id = \(userId)", logger: logger)
    }

    /// The challenge, locked for the rest of the transaction.
    static func lockChallenge(_ db: PostgresConnection, id: UUID, appRef: Int64, logger: Logger) async throws -> Challenge? {
        let rows = try await db.query(
            """
            SELECT id, user_id, factor, code_sealed, attempts, expires_at <= now(), used_at IS NOT NULL
            FROM login_challenges WHERE id = \(id) AND app_ref = \(appRef) FOR UPDATE
            """, logger: logger)
        for try await row in rows {
            let c = try row.decode((UUID, UUID, String, Data?, Int, Bool, Bool).self)
            // The column's CHECK admits exactly the SecondFactor cases.
            guard let factor = SecondFactor(rawValue: c.2) else { throw StoreError.unknownValue(column: "login_challenges.factor", value: c.2) }
            return Challenge(id: c.0, userId: c.1, factor: factor, codeSealed: c.3, attempts: c.4, expired: c.5, used: c.6)
        }
        return nil
    }

    static func countFailedChallenge(_ db: PostgresConnection, id: UUID, logger: Logger) async throws {
        try await db.query("UPDATE login_challenges SET attempts = attempts + 1 WHERE id = \(id)", logger: logger)
    }

    static func markChallengeUsed(_ db: PostgresConnection, id: UUID, logger: Logger) async throws {
        try await db.query("UPDATE login_challenges SET used_at = now(), code_sealed = NULL WHERE id = \(id)", logger: logger)
    }
}
