import Foundation
import Logging
import PostgresNIO

/// SQL of `oauth_dpop_proofs`: the DPoP proofs seen (RFC 9449 §11.1), one row per key thumbprint and
/// `jti`, kept until the proof could no longer be accepted anyway.
enum OAuthDPoPProofStore {
    /// Records the proof (`jkt`, `jti`) for `lifetimeSeconds`; true when this is its first use. One
    /// statement: of two concurrent uses, on any nodes, exactly one inserts the row. A row that expired
    /// but was not yet deleted is taken over (its proof is out of its window; this is a new one).
    static func record(_ db: PostgresConnection, jkt: String, jti: String, lifetimeSeconds: Int, logger: Logger) async throws -> Bool {
        let rows = try await db.query(
            """
            INSERT INTO oauth_dpop_proofs (jkt, jti, expires_at)
            VALUES (\(jkt), \(jti), now() + make_interval(secs => \(lifetimeSeconds)::int))
            ON CONFLICT (jkt, jti) DO UPDATE SET expires_at = EXCLUDED.expires_at
                WHERE oauth_dpop_proofs.expires_at < now()
            RETURNING 1
            """, logger: logger)
        for try await _ in rows.decode(Int.self) { return true }
        return false
    }

    /// Deletes the rows whose proofs left the acceptance window (housekeeping); answers how many.
    static func purgeExpired(_ db: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await db.query(
            """
            WITH d AS (DELETE FROM oauth_dpop_proofs WHERE expires_at < now() RETURNING 1)
            SELECT count(*)::int FROM d
            """, logger: logger)
        for try await n in rows.decode(Int.self) { return n }
        return 0
    }
}
