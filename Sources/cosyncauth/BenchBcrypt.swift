import ArgumentParser
import CosyncAuth
import Foundation

/// `cosyncauth bench-bcrypt`: the bcrypt ceiling of this machine, measured on the same bounded pool
/// the server hashes on (NIO's thread pool, one thread per core). tools/bench/login.sh prints it next
/// to the measured login rate.
struct BenchBcrypt: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-bcrypt", abstract: "Measure bcrypt verifies per second on the server's hashing pool.")

    @Option(help: "Seconds to run") var seconds: Double = 5
    @Option(help: "bcrypt cost") var cost: Int = 10
    @Option(help: "Concurrent callers (more than the pool's threads keeps it busy)") var concurrency: Int = 8

    func run() async throws {
        guard (4...16).contains(cost), seconds > 0, concurrency > 0 else {
            throw ValidationError("cost must be 4-16, seconds and concurrency positive")
        }
        // No admission bound: the callers queue on purpose (on a busy machine the 2 s default refuses them).
        let hasher = PasswordHasher(cost: cost, maxWait: .seconds(3600))
        let md5 = PasswordHasher.md5Hex("benchmark password")
        let hash = try await hasher.hash(md5Hex: md5)
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let start = ContinuousClock.now
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var count = 0
                    while ContinuousClock.now < deadline {
                        guard try await hasher.verify(md5Hex: md5, hash: hash) else { throw ValidationError("verify failed") }
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = (ContinuousClock.now - start) / .seconds(1)
        print(String(format: "bcrypt cost %d: %d verifies in %.1f s = %.1f verifies/s (pool threads: %d)",
                     cost, total, elapsed, Double(total) / elapsed, ProcessInfo.processInfo.activeProcessorCount))
    }
}
