import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// The housekeeping pass over the AppKey tables: expired WebAuthn challenges (ChallengeStore), and
/// pending signups and passkey resets a day past their expiry (PasskeyStore, their owning store).
@Suite("AppKey housekeeping: expired challenges, signups and passkey resets")
struct AppKeyHousekeepingTests {
    @Test("a pass removes expired challenges, and signups and passkey resets expired over a day ago; the others stay")
    func purge() async throws {
        let services = try await TestEnvironment.services()
        try await TestEnvironment.withLiveServer { api in
            let (_, created) = try await AppKeyClient.makeApp(api)
            let appId = created.string("appId")
            let ref = try #require(try await TestEnvironment.value("SELECT id FROM apps WHERE app_id = \(appId)", as: Int64.self))
            let user = try #require(try await TestEnvironment.value(
                "INSERT INTO users (app_ref, handle) VALUES (\(ref), \(AppKeyClient.uniqueEmail())) RETURNING id", as: UUID.self))
            for (handle, age) in [("challenge-expired", "1 second"), ("challenge-live", "-5 minutes")] {
                try await TestEnvironment.sql("""
                    INSERT INTO webauthn_challenges (app_ref, challenge, purpose, handle, user_id, expires_at)
                    VALUES (\(ref), \(Base64URL.encode(Secrets.randomBytes(32))), 'login', \(handle), \(user), now() - \(age)::interval)
                    """)
            }
            for (handle, age) in [("signup-old@example.com", "2 days"), ("signup-recent@example.com", "1 hour")] {
                try await TestEnvironment.sql("""
                    INSERT INTO appkey_signups (app_ref, handle, user_id, credential_id, public_key_cose, algorithm, sign_count, aaguid,
                        format, attestation_verified, backup_eligible, backup_state, uv_initialized, code_sealed, token_hash, expires_at)
                    VALUES (\(ref), \(handle), \(UUID()), '\\x01'::bytea, '\\x02'::bytea, -7, 0, '\\x00'::bytea, 'none', false, false,
                        false, false, '\\x03'::bytea, \(Data(Secrets.randomBytes(32))), now() - \(age)::interval)
                    """)
            }
            for age in ["2 days", "1 hour"] {
                try await TestEnvironment.sql("""
                    INSERT INTO passkey_resets (id, app_ref, user_id, expires_at) VALUES (\(UUID()), \(ref), \(user), now() - \(age)::interval)
                    """)
            }

            let removed = try await LimitHousekeeping(client: services.client, logger: services.logger).purge()
            #expect(removed >= 3)
            #expect(try await TestEnvironment.value(
                "SELECT string_agg(handle, ',') FROM webauthn_challenges WHERE app_ref = \(ref)", as: String?.self) == "challenge-live")
            #expect(try await TestEnvironment.value(
                "SELECT string_agg(handle, ',') FROM appkey_signups WHERE app_ref = \(ref)", as: String?.self) == "signup-recent@example.com")
            #expect(try await TestEnvironment.value(
                "SELECT count(*)::int FROM passkey_resets WHERE app_ref = \(ref) AND expires_at > now() - interval '1 day'", as: Int.self) == 1)
            #expect(try await TestEnvironment.value("SELECT count(*)::int FROM passkey_resets WHERE app_ref = \(ref)", as: Int.self) == 1)
        }
    }
}
