import CosyncAuth
import Foundation
import Hummingbird
import JWTKit
import Logging
import NIOCore
import _CryptoExtras

/// Starts a Hummingbird router on 127.0.0.1 (free port) and returns the port once it listens.
func startFakeServer(_ router: Router<BasicRequestContext>, label: String) async throws -> Int {
    var logger = Logger(label: label)
    logger.logLevel = .error
    let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
    Task.detached { try? await app.runService(gracefulShutdownSignals: []) }
    for await port in stream { return port }
    throw CancellationError()
}

/// Reads until at least `count` items are there or the timeout passes; returns the last read.
func waitForItems<T: Sendable>(count: Int, timeout: Duration, _ read: @Sendable () async -> [T]) async throws -> [T] {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        let found = await read()
        if found.count >= count { return found }
        try await Task.sleep(for: .milliseconds(25))
    }
    return await read()
}

/// A Twilio stand-in: accepts `POST /2010-04-01/Accounts/{sid}/Messages.json` like the real API
/// (201, form body To/From/Body, HTTP Basic sid:token) and keeps what it received.
actor FakeTwilio {
    struct SMS: Sendable {
        let account: String
        let to: String
        let from: String
        let body: String
        let authorization: String
    }

    private(set) var messages: [SMS] = []
    private(set) var port = 0

    func record(_ sms: SMS) { messages.append(sms) }
    func setPort(_ port: Int) { self.port = port }
    func messages(to phone: String) -> [SMS] { messages.filter { $0.to == phone } }

    func waitForMessages(to phone: String, count: Int = 1, timeout: Duration = .seconds(10)) async throws -> [SMS] {
        try await waitForItems(count: count, timeout: timeout) { await self.messages(to: phone) }
    }

    static func start() async throws -> FakeTwilio {
        let fake = FakeTwilio()
        let router = Router()
        router.post("2010-04-01/Accounts/:sid/Messages.json") { request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            let form = LegacyFormDecoding.strict(String(buffer: body))
            await fake.record(SMS(
                account: context.parameters.get("sid") ?? "", to: form["To"] ?? "", from: form["From"] ?? "",
                body: form["Body"] ?? "", authorization: request.headers[.authorization] ?? ""))
            return Response(
                status: .created, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"sid":"SM00000000000000000000000000000000","status":"queued"}"#)))
        }
        await fake.setPort(try await startFakeServer(router, label: "fake-twilio"))
        return fake
    }
}

/// Standard x-www-form-urlencoded decoding (what Twilio's server does), for the fake.
enum LegacyFormDecoding {
    static func strict(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        for piece in text.split(separator: "&") {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s) }
            out[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return out
    }
}

/// Apple's and Google's key endpoints on 127.0.0.1, with keys the tests hold, so they can sign ID
/// tokens of their own. `rotate` adds a key (new kid) the server has not seen yet.
actor FakeIdentityProviders {
    struct Key: Sendable {
        let kid: String
        let pem: String
        let modulus: Data
        let exponent: Data
    }

    private(set) var keys: [SocialProvider: [Key]] = [:]
    private(set) var port = 0
    private(set) var fetches: [SocialProvider: Int] = [:]

    func setPort(_ port: Int) { self.port = port }

    static func makeKey() throws -> Key {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let rsa = try Insecure.RSA.PrivateKey(pem: key.pemRepresentation)
        let (modulus, exponent) = try rsa.publicKey.getKeyPrimitives()
        return Key(kid: "kid-" + Secrets.hexIdentifier().prefix(12), pem: key.pemRepresentation, modulus: modulus, exponent: exponent)
    }

    @discardableResult
    func rotate(_ provider: SocialProvider) throws -> Key {
        let key = try Self.makeKey()
        keys[provider, default: []].append(key)
        return key
    }

    func current(_ provider: SocialProvider) -> Key? { keys[provider]?.last }

    func jwks(_ provider: SocialProvider) -> String {
        fetches[provider, default: 0] += 1
        let list = (keys[provider] ?? []).map { key -> JSONValue in
            .object([
                "kty": .string("RSA"), "alg": .string("RS256"), "use": .string("sig"), "kid": .string(key.kid),
                "n": .string(Base64URL.encode(Array(key.modulus))), "e": .string(Base64URL.encode(Array(key.exponent))),
            ])
        }
        return String(decoding: (try? JSONCoding.encode(JSONValue.object(["keys": .array(list)]))) ?? Data(), as: UTF8.self)
    }

    var appleURL: String { "http://127.0.0.1:\(port)/apple/auth/keys" }
    var googleURL: String { "http://127.0.0.1:\(port)/google/oauth2/v3/certs" }

    static func start() async throws -> FakeIdentityProviders {
        let fake = FakeIdentityProviders()
        try await fake.rotate(.apple)
        try await fake.rotate(.google)
        let router = Router()
        router.get("apple/auth/keys") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: await fake.jwks(.apple))))
        }
        router.get("google/oauth2/v3/certs") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: await fake.jwks(.google))))
        }
        await fake.setPort(try await startFakeServer(router, label: "fake-jwks"))
        return fake
    }
}

/// The claims of a provider ID token, as the tests mint them.
struct TestIDToken: JWTPayload {
    var iss: String
    var aud: String
    var exp: Int
    var iat: Int?
    var sub: String
    var email: String?
    var email_verified: Bool? = nil
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    static let appleIssuer = "https://appleid.apple.com"
    static let googleIssuer = "https://accounts.google.com"

    /// Signs with `key` (PEM) and puts `kid` in the header (it may name another key: a forgery).
    static func sign(_ claims: TestIDToken, pem: String, kid: String) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: pem), digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }
}
