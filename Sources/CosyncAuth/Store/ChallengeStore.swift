import Foundation
import Logging
import PostgresNIO

/// SQL of WebAuthn challenges (<doc:AppKeyAPI> §6.1). A challenge is taken by one `DELETE … RETURNING`:
/// of two completions racing with the same challenge, exactly one gets the row, on any node.
public enum ChallengeStore {
    public struct Row: Sendable {
        public let purpose: ChallengePurpose
        public let handle: String
        public let userId: UUID?
        public let sessionId: UUID?
        public let displayName: String?
        public let firstName: String?
        public let lastName: String?
        public let locale: String?
    }

    static func insert(
        _ db: PostgresConnection, appRef: Int64, challenge: String, purpose: ChallengePurpose, handle: String, userId: UUID?, sessionId: UUID? = nil,
        displayName: String? = nil, firstName: String? = nil, lastName: String? = nil, locale: String? = nil, lifetimeSeconds: Int,
        logger: Logger
    ) async throws {
        try await db.query(
            """
            INSERT INTO webauthn_challenges (app_ref, challenge, purpose, handle, user_id, session_id, display_name, first_name,
                                             last_name, locale, expires_at)
            VALUES (\(appRef), \(challenge), \(purpose.rawValue), \(handle), \(userId), \(sessionId), \(displayName), \(firstName),
                    \(lastName), \(locale), now() + make_interval(secs => \(lifetimeSeconds)::int))
            """, logger: logger)
    }

    /// Takes (deletes) the app's challenge with this value; nil when there is none or it expired.
    /// An expired row is deleted too: a challenge is never answered twice, nor late.
    static func consume(_ db: PostgresConnection, appRef: Int64, challenge: String, logger: Logger) async throws -> Row? {
        let rows = try await db.query(
            """
            DELETE FROM webauthn_challenges WHERE app_ref = \(appRef) AND challenge = \(challenge)
            RETURNING purpose, handle, user_id, session_id, display_name, first_name, last_name, locale, expires_at > now()
            """, logger: logger)
        for try await c in rows.decode((String, String, UUID?, UUID?, String?, String?, String?, String?, Bool).self) {
            guard c.8 else { return nil }
            // The column's CHECK admits exactly the ChallengePurpose cases.
            guard let purpose = ChallengePurpose(rawValue: c.0) else {
                throw StoreError.unknownValue(column: "webauthn_challenges.purpose", value: c.0)
            }
            return Row(purpose: purpose, handle: c.1, userId: c.2, sessionId: c.3, displayName: c.4, firstName: c.5, lastName: c.6, locale: c.7)
        }
        return nil
    }

    /// Drops every WebAuthn challenge naming the user (AppKey `deleteAccount`). Nothing cascades to
    /// them: `user_id` has no foreign key, as a signup's challenge names a user not created yet.
    static func deleteAll(_ db: PostgresConnection, userId: UUID, logger: Logger) async throws {
        try await db.query("DELETE FROM webauthn_challenges WHERE user_id = \(userId)", logger: logger)
    }

    /// Housekeeping: removes expired challenges; returns how many. (Pending AppKey signups and passkey
    /// resets are PasskeyStore's: `purgeExpiredSignups`, `purgeExpiredResets`.)
    public static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH c AS (DELETE FROM webauthn_challenges WHERE expires_at < now() RETURNING 1)
            SELECT count(*)::int FROM c
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
