import Foundation
import Logging
import PostgresNIO

/// The limits of password guessing that are not per app (`LoginThrottle`).
public struct PasswordLimits: Sendable {
    /// Failed-login counters reset after this long without a failure.
    public var throttleWindow: Int = 15 * 60
    /// The longest a lockout lasts.
    public var maxLockout: Int = 15 * 60
    /// A client address may fail this many times more than one handle before it is locked.
    public var addressThresholdFactor: Int = 5
    /// A handle as a whole (failures from several addresses) locks at this many times maxLoginAttempts.
    public var handleThresholdFactor: Int = 3
    public init() {}
}

/// The password sign-in method, one implementation for every flow that checks a password: the login,
/// the re-proof of changePassword and deleteAccount, and the coming OAuth login page and Portal.
///
/// Passwords arrive as the MD5 hex the SDKs send (<doc:EndUserAPI> §1.4). Every check is reserved in
/// PostgreSQL first, under the account's login limit (`LoginThrottle`), so no flow gives a password
/// guesser more tries than the login does.
public struct PasswordMethod: Sendable {
    let client: PostgresClient
    let hasher: PasswordHasher
    let limits: PasswordLimits
    let logger: Logger

    public init(client: PostgresClient, hasher: PasswordHasher, limits: PasswordLimits, logger: Logger) {
        self.client = client
        self.hasher = hasher
        self.limits = limits
        self.logger = logger
    }

    /// The limit of one attempt on `handle` (lower-cased) from `address`.
    func throttle(app: App, handle: String, address: String?) -> LoginThrottle {
        LoginThrottle(client: client, limits: limits, logger: logger, app: app, handle: handle, address: address)
    }

    /// Why a re-proof failed; the flow answers its own wire error and audits the reason.
    struct Refused: Error {
        /// For the audit row: "locked" or "wrong password".
        let reason: String
    }

    /// Re-proves a signed-in `user` by the password typed with this request, under the same reserved
    /// limit as a login of that account. Answers the proof (a password, now) or throws `Refused`.
    func reprove(app: App, user: User, password: String, address: String?) async throws -> AuthProof {
        let throttle = throttle(app: app, handle: user.handle.lowercased(), address: address)
        guard try await throttle.reserve() else { throw Refused(reason: "locked") }
        guard PasswordHasher.isMD5Hex(password), try await throttle.check({ try await verify(password, user: user) }) else {
            throw Refused(reason: "wrong password")
        }
        return .presented(.password)
    }

    /// Verifies an md5-hex password against a stored hash: bcrypt, or a legacy raw 32-hex MD5 (which
    /// is then upgraded to bcrypt). Not throttled: callers hold a reserved attempt (`LoginThrottle.check`).
    func verify(_ md5: String, user: User) async throws -> Bool {
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
