import Crypto
import Foundation
import HummingbirdBcrypt
import NIOPosix

/// bcrypt over the MD5 hex of the password, as the legacy server stored it (admin-and-legacy.md §4):
/// the SDKs send `md5hex(plaintext)` and that string is the effective password. Hashing and verifying
/// run on NIO's bounded thread pool (one thread per core), never on the event loop or the cooperative
/// executor.
public struct PasswordHasher: Sendable {
    public let cost: Int
    let pool: NIOThreadPool

    public init(cost: Int = 10, pool: NIOThreadPool = .singleton) {
        precondition((4...31).contains(cost), "bcrypt cost must be between 4 and 31")
        self.cost = cost
        self.pool = pool
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

    public func hash(md5Hex: String) async throws -> String {
        let cost = UInt8(self.cost)
        return try await pool.runIfActive { Bcrypt.hash(md5Hex, cost: cost) }
    }

    /// Verifies against a stored bcrypt hash (`$2a$`, `$2b$`, `$2y$`).
    public func verify(md5Hex: String, hash: String) async throws -> Bool {
        try await pool.runIfActive { Bcrypt.verify(md5Hex, hash: hash) }
    }
}
