import Crypto
import Foundation
import HummingbirdBcrypt
import NIOCore
import NIOPosix

/// bcrypt over the MD5 hex of the password, as the legacy server stored it (<doc:LegacyImport> §4):
/// the SDKs send `md5hex(plaintext)` and that string is the effective password. Hashing and verifying
/// run on a thread pool of their own (one thread per core: `PasswordHasher.pool`), never on the event
/// loop, the cooperative executor or NIO's shared pool. A `KDFScheduler` admits the jobs: one running per
/// pool thread, the rest queued fairly per tenant, and refused (`KDFOverloaded`, HTTP 503) when the
/// expected wait passes its bound.
///
/// The pool is bcrypt's alone because the scheduler's bound counts only bcrypt jobs: on NIO's shared
/// pool a burst of other work (an app's RSA key generation, file I/O) queued in front of them, and a
/// login admitted for an expected wait under 2 s then waited for the whole burst (20 s and more).
public struct PasswordHasher: Sendable {
    public let cost: Int
    let pool: NIOThreadPool
    public let scheduler: KDFScheduler
    /// The hashing threads' nice value (`COSYNC_BCRYPT_NICE`, `BackgroundPriority`; 0, the default,
    /// leaves them at the request path's priority).
    let niceness: Int32

    public init(
        cost: Int = 10, pool: NIOThreadPool = PasswordHasher.pool, maxWait: Duration = .seconds(2), niceness: Int32 = 0
    ) {
        precondition((4...31).contains(cost), "bcrypt cost must be between 4 and 31")
        self.cost = cost
        self.pool = pool
        self.niceness = niceness
        // `PasswordHasher.pool` has one thread per core.
        self.scheduler = KDFScheduler(slots: System.coreCount, maxWait: maxWait)
    }

    /// bcrypt's thread pool for the whole process: one thread per core, started on first use and never
    /// shut down (like `NIOThreadPool.singleton`).
    public static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: System.coreCount)
        pool.start()
        return pool
    }()

    /// Runs one bcrypt job for `tenant` once the scheduler admits it.
    func run<T: Sendable>(_ operation: String, tenant: String, _ job: @Sendable @escaping () -> T) async throws -> T {
        let pool = self.pool
        let scheduler = self.scheduler
        let niceness = self.niceness
        return try await Telemetry.kdf(operation) { queued in
            try await scheduler.acquire(tenant: tenant)
            // The job's own time on its thread (not a wait for the pool, which other work shares) feeds
            // the scheduler's estimate.
            var ran = Duration.zero
            defer { scheduler.release(tenant: tenant, ranFor: ran) }
            Telemetry.kdfStarted(queuedAt: queued)
            let (result, took) = try await pool.runIfActive { () -> (T, Duration) in
                BackgroundPriority.lowerCurrentThread(to: niceness)  // COSYNC_BCRYPT_NICE (see BackgroundPriority)
                let started = ContinuousClock.now
                let result = job()
                return (result, ContinuousClock.now - started)
            }
            ran = took
            return result
        }
    }

    /// Lowercase hex MD5 of the UTF-8 plaintext: what the SDKs put on the wire.
    public static func md5Hex(_ plaintext: String) -> String {
        Hex.encode(Crypto.Insecure.MD5.hash(data: Data(plaintext.utf8)))
    }

    /// True when `text` has the wire form of a password: 32 lowercase hex characters.
    public static func isMD5Hex(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Imported raw-MD5 passwords (the legacy server before 2021-07) are stored as
    /// `$sha256-md5$<hex SHA-256 of the md5 hex>`: not the value clients send (so a database reader
    /// cannot log in with it), cheap to make for millions of rows, and replaced by bcrypt at the
    /// user's next successful login.
    public static let legacyDigestPrefix = "$sha256-md5$"

    public static func legacyDigest(md5Hex: String) -> String {
        legacyDigestPrefix + Hex.encode(SHA256.hash(data: Data(md5Hex.lowercased().utf8)))
    }

    /// `tenant` (the app's internal id as text) picks the queue the job waits in; jobs without an app share "".
    public func hash(md5Hex: String, tenant: String = "") async throws -> String {
        let cost = UInt8(self.cost)
        return try await run("hash", tenant: tenant) { Bcrypt.hash(md5Hex, cost: cost) }
    }

    /// The bcrypt costs a stored hash may have. Outside them a hash is never verified (cost 31 would
    /// hold a hashing thread for about a day); the legacy server used 10.
    public static let acceptedCosts = 4...16

    /// The cost of a well-formed bcrypt hash: `$2a$`, `$2b$` or `$2y$`, two cost digits, `$`, 53
    /// characters of bcrypt's base64 alphabet (60 in all). Nil for anything else.
    public static func bcryptCost(_ hash: String) -> Int? {
        let bytes = Array(hash.utf8)
        guard bytes.count == 60, bytes[0] == 0x24, bytes[1] == 0x32, [0x61, 0x62, 0x79].contains(bytes[2]), bytes[3] == 0x24,
            bytes[6] == 0x24, let cost = Int(String(decoding: bytes[4...5], as: UTF8.self)),
            bytes[7...].allSatisfy({ $0 == 0x2e || $0 == 0x2f || (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) })
        else { return nil }
        return cost
    }

    /// Verifies against a stored bcrypt hash (`$2a$`, `$2b$`, `$2y$`). `$2y$` (PHP's name for the
    /// same algorithm) is verified as `$2b$`: HummingbirdBcrypt accepts only `a` and `b`. A hash that is
    /// malformed or whose cost is outside `acceptedCosts` does not verify, and is never hashed.
    public func verify(md5Hex: String, hash: String, tenant: String = "") async throws -> Bool {
        guard let cost = Self.bcryptCost(hash), Self.acceptedCosts.contains(cost) else { return false }
        let stored = hash.hasPrefix("$2y$") ? "$2b$" + hash.dropFirst(4) : hash
        return try await run("verify", tenant: tenant) { Bcrypt.verify(md5Hex, hash: stored) }
    }
}
