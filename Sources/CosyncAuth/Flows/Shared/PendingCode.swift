import Foundation
import Logging
import PostgresNIO

// One-time codes (signup, invite, reset, login, phone): sealed at rest, compared in constant time.

extension EndUserFlows {
    func sealCode(_ code: String, purpose: SealPurpose) throws -> Data { try codes.seal(code, purpose: purpose) }

    /// Constant-time comparison of a submitted code with a sealed one (`CodeChallenge`).
    func codeMatches(_ given: String, sealed: Data?, purpose: SealPurpose) -> Bool { codes.matches(given, sealed: sealed, purpose: purpose) }
}
