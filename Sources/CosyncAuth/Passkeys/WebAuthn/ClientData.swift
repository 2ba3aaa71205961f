import Foundation

/// The fields of clientDataJSON (WebAuthn §5.8.1) the checks need. It is parsed as JSON, never
/// matched byte for byte; unknown members are ignored.
public struct ClientData: Sendable {
    public let type: String
    /// The challenge bytes, decoded from base64url (padding and the standard alphabet tolerated).
    public let challenge: [UInt8]
    public let origin: String
    public let crossOrigin: Bool?
    public let topOrigin: String?

    private struct Wire: Decodable {
        var type: String
        var challenge: String
        var origin: String
        var crossOrigin: Bool?
        var topOrigin: String?
    }

    /// Longest challenge accepted (the server issues 32 bytes).
    public static let maximumChallengeBytes = 256

    public init(_ bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= WebAuthn.maxClientDataJSONBytes else { throw .malformed("clientDataJSON too large") }
        guard bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) == UInt8(ascii: "{") else {
            throw .malformed("clientDataJSON is not a JSON object")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(bytes))
        } catch {
            throw .malformed("clientDataJSON is not valid JSON with type, challenge and origin")
        }
        guard let challenge = WebAuthnBase64URL.decode(wire.challenge, maxBytes: Self.maximumChallengeBytes), !challenge.isEmpty else {
            throw .malformed("clientDataJSON challenge is not base64url")
        }
        type = wire.type
        self.challenge = challenge
        origin = wire.origin
        crossOrigin = wire.crossOrigin
        topOrigin = wire.topOrigin
    }
}
