import Crypto
import Foundation

/// Seals secrets at rest (app private keys, TOTP secrets, provider credentials, app tokens) with
/// AES-256-GCM under the deployment's master key. Each value is bound to its purpose through the
/// associated data (for example `app-key:<kid>`), so a ciphertext copied into another row or column
/// does not open.
///
/// Layout: `0x01 ‖ nonce (12) ‖ ciphertext ‖ tag (16)`. The leading version byte leaves room for
/// master-key rotation.
public struct SecretBox: Sendable {
    public enum Failure: Error, CustomStringConvertible {
        case badMasterKey
        case cannotOpen(purpose: SealPurpose)
        public var description: String {
            switch self {
            case .badMasterKey:
                "COSYNC_MASTER_KEY must be 32 bytes, given as 64 hex characters or base64"
            case .cannotOpen(let purpose):
                "a sealed value (\(purpose.label)) does not open with this COSYNC_MASTER_KEY"
            }
        }
    }

    private static let version: UInt8 = 1
    private let key: SymmetricKey

    public init(key: SymmetricKey) { self.key = key }

    /// Parses the master key: 64 hex characters, or base64 (standard or URL-safe) of 32 bytes.
    public init(masterKey text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let bytes = Hex.decode(trimmed), bytes.count == 32 {
            self.key = SymmetricKey(data: bytes)
        } else if let data = Base64URL.decodeLenient(trimmed), data.count == 32 {
            self.key = SymmetricKey(data: data)
        } else {
            throw Failure.badMasterKey
        }
    }

    /// A fresh random master key in the text form `init(masterKey:)` accepts.
    public static func generateMasterKey() -> String {
        Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64EncodedString()
    }

    public func seal(_ plaintext: some DataProtocol, purpose: SealPurpose) throws -> Data {
        let box = try AES.GCM.seal(plaintext, using: key, authenticating: Data(purpose.label.utf8))
        guard let combined = box.combined else { throw Failure.cannotOpen(purpose: purpose) }
        return Data([Self.version]) + combined
    }

    public func seal(_ plaintext: String, purpose: SealPurpose) throws -> Data {
        try seal(Data(plaintext.utf8), purpose: purpose)
    }

    public func open(_ sealed: some DataProtocol, purpose: SealPurpose) throws -> Data {
        guard let opened = open(sealed, label: purpose.label) else { throw Failure.cannotOpen(purpose: purpose) }
        return opened
    }

    /// Opens with a label read back from the database (`Doctor` checks stored values whose purpose
    /// label it builds in SQL); nil when it does not open.
    func open(_ sealed: some DataProtocol, label: String) -> Data? {
        let bytes = Data(sealed)
        guard bytes.first == Self.version, let box = try? AES.GCM.SealedBox(combined: bytes.dropFirst()) else { return nil }
        return try? AES.GCM.open(box, using: key, authenticating: Data(label.utf8))
    }

    /// A key for another purpose (for example the HMAC key of DPoP nonces), derived from the master
    /// key with HKDF-SHA256 under `label`: every node with the same master key derives the same key,
    /// and knowing a derived key reveals nothing about the master key or the sealed values.
    public func derivedKey(label: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data("cosyncauth-derived-key:\(label)".utf8), outputByteCount: 32)
    }

    public func openString(_ sealed: some DataProtocol, purpose: SealPurpose) throws -> String {
        guard let text = String(data: try open(sealed, purpose: purpose), encoding: .utf8) else {
            throw Failure.cannotOpen(purpose: purpose)
        }
        return text
    }
}
