import Foundation
import Logging
import PostgresNIO

// The password check every password flow shares (bcrypt, or a legacy MD5 upgraded on success).

extension EndUserFlows {
    /// Verifies an md5-hex password against a stored hash: bcrypt, or a legacy raw 32-hex MD5 (which
    /// is then upgraded to bcrypt).
    func verifyPassword(_ md5: String, user: User) async throws -> Bool {
        guard let stored = user.passwordHash else { return false }
        let legacy = stored.hasPrefix(PasswordHasher.legacyDigestPrefix)
        if PasswordHasher.isMD5Hex(stored) || legacy {
            let given = legacy ? PasswordHasher.legacyDigest(md5Hex: md5) : md5
            guard Secrets.constantTimeEquals(Data(given.utf8), Data(stored.utf8)) else { return false }
            let upgraded = try await hasher.hash(md5Hex: md5, tenant: String(user.appRef))
            try await client.withConnection {
                try await UserStore.upgradePasswordHash($0, userId: user.id, from: stored, to: upgraded, logger: logger)
            }
            return true
        }
        return try await hasher.verify(md5Hex: md5, hash: stored, tenant: String(user.appRef))
    }
}
