import Foundation
import Logging
import PostgresNIO

// One-time codes (signup, invite, reset, login, phone): sealed at rest, compared in constant time.

extension EndUserFlows {
    func sealCode(_ code: String, purpose: SealPurpose) throws -> Data { try box.seal(code, purpose: purpose) }

    /// Constant-time comparison of a submitted code with a sealed one.
    func codeMatches(_ given: String, sealed: Data?, purpose: SealPurpose) -> Bool {
        guard let sealed, let stored = try? box.openString(sealed, purpose: purpose) else { return false }
        return Secrets.constantTimeEquals(Data(given.utf8), Data(stored.utf8))
    }
}
