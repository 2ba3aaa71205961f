import Foundation
import Logging
import NIOPosix
import PostgresNIO
import ServiceLifecycle

/// A new app's RSA key pair: taken from the pool generated ahead (sql/0032) when it has one, else
/// generated now. Every key is used once, so every app still has its own pair.
struct AppKeyPair {
    let kid: String
    let publicKeyPEM: String
    let privateKeySealed: Data

    var rawPublicKey: String { Data(publicKeyPEM.utf8).base64EncodedString() }

    /// In the creating transaction: a pooled key, or nil (then call `generate`).
    static func pooled(_ db: PostgresConnection, logger: Logger) async throws -> AppKeyPair? {
        guard let key = try await KeyPoolStore.take(db, logger: logger) else { return nil }
        return AppKeyPair(kid: key.kid, publicKeyPEM: key.publicKeyPEM, privateKeySealed: key.privateKeySealed)
    }

    /// A fresh pair, generated off the cooperative executor and sealed for its kid: on NIO's shared
    /// pool when a request waits for it, or (`ahead`) on the key pool's own thread, which runs below the
    /// request path (`BackgroundPriority`).
    static func generate(box: SecretBox, ahead: Bool = false) async throws -> AppKeyPair {
        let key = try await ahead
            ? generatorPool.runIfActive {
                BackgroundPriority.lowerCurrentThread()
                return try RSAKeyMaterial.generate()
            }
            : NIOThreadPool.singleton.runIfActive { try RSAKeyMaterial.generate() }
        return AppKeyPair(
            kid: key.kid, publicKeyPEM: key.publicKeyPEM, privateKeySealed: try box.seal(key.privateKeyPEM, purpose: .appKey(kid: key.kid)))
    }
}

extension AppKeyPair {
    /// The key pool's generator: one thread for the whole process, started on first use and never shut
    /// down (like `NIOThreadPool.singleton`), at background priority.
    static let generatorPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()
}

/// Keeps `size` key pairs in the pool (`COSYNC_KEY_POOL_SIZE`, default 64; 0 turns the pool off). It
/// tops the pool up when this node takes a key (`keyTaken`), and looks once a minute for the others'
/// takes; several nodes may fill at once and overshoot by a few keys, which costs nothing but CPU.
/// Keys are generated one at a time on a thread of their own, at background priority.
public struct KeyPoolFiller: Service {
    let client: PostgresClient
    let box: SecretBox
    let size: Int
    let logger: Logger
    let taken: WorkSignal

    public init(client: PostgresClient, box: SecretBox, size: Int, logger: Logger, taken: WorkSignal) {
        self.client = client
        self.box = box
        self.size = size
        self.logger = logger
        self.taken = taken
    }

    public func run() async throws {
        // Off: a service that returns early ends the whole service group (the server), so it waits instead.
        guard size > 0 else {
            try await gracefulShutdown()
            return
        }
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let seen = taken.generation
            do {
                _ = try await cancelWhenGracefulShutdown { try await fill() }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                logger.debug("key pool fill stopped", metadata: ["reason": "\(describeForOperator(error))"])
            }
            await cancelWhenGracefulShutdown { await taken.wait(since: seen, upTo: .seconds(60)) }
        }
    }

    /// Generates keys until the pool holds `size`. Returns how many it added.
    @discardableResult
    public func fill() async throws -> Int {
        var added = 0
        while !Task.isCancelled {
            let count = try await client.withConnection { try await KeyPoolStore.count($0, logger: logger) }
            guard count < size else { break }
            let key = try await AppKeyPair.generate(box: box, ahead: true)
            try await client.withConnection {
                try await KeyPoolStore.insert($0, kid: key.kid, publicKeyPEM: key.publicKeyPEM, privateKeySealed: key.privateKeySealed, logger: logger)
            }
            added += 1
        }
        return added
    }
}
