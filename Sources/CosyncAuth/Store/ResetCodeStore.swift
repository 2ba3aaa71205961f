import Foundation
import Logging
import PostgresNIO

/// Password-reset codes (`reset_codes`): one live code per user.
enum ResetCodeStore {
    struct ResetCode: Sendable {
        let id: UUID
        let userId: UUID
        let codeSealed: Data
        let attempts: Int
    }

    /// Inserts a reset code and drops the user's older ones: only the newest code is live, since
    /// several live codes would multiply the odds of each guess.
    static func insertResetCode(
        _ db: PostgresConnection, appRef: Int64, userId: UUID, identifier: String, codeSealed: Data, lifetimeSeconds: Int, logger: Logger
    ) async throws {
        try await db.query(
            """
            WITH fresh AS (
                INSERT INTO reset_codes (app_ref, user_id, identifier, code_sealed, expires_at)
                VALUES (\(appRef), \(userId), \(identifier), \(codeSealed), now() + make_interval(secs => \(lifetimeSeconds)::int))
                RETURNING id)
            DELETE FROM reset_codes WHERE user_id = \(userId) AND id NOT IN (SELECT id FROM fresh)
            """, logger: logger)
    }

    /// The unexpired codes of an identifier, locked (all belong to one user: codes are made for the
    /// account the identifier named).
    static func liveResetCodes(_ db: PostgresConnection, appRef: Int64, identifier: String, logger: Logger) async throws -> [ResetCode] {
        let rows = try await db.query(
            """
            SELECT id, user_id, code_sealed, attempts FROM reset_codes
            WHERE app_ref = \(appRef) AND identifier = \(identifier) AND expires_at > now()
            ORDER BY created_at
            FOR UPDATE
            """, logger: logger)
        var codes: [ResetCode] = []
        for try await (id, userId, sealed, attempts) in rows.decode((UUID, UUID, Data, Int).self) {
            codes.append(ResetCode(id: id, userId: userId, codeSealed: sealed, attempts: attempts))
        }
        return codes
    }

    static func deleteResetCodes(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM reset_codes WHERE user_id = \(userId)", logger: logger)
    }
}
