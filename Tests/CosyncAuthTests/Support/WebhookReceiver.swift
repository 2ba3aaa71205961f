import CosyncAuth
import Foundation

/// Tests/system/webhooks/receiver.py in a process of its own: it verifies every request with the
/// `standardwebhooks` package (COSYNC_TEST_PYTHON has it) and is driven through files in its folder.
final class WebhookReceiver: Sendable {
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// One request as the receiver logged it.
    struct Received: Sendable {
        let id: String
        let type: String
        let userId: String?
        let timestamp: Int
        let signature: String
        let attempt: Int
        let verified: [Bool]
        let status: Int
        let body: String
        var data: [String: JSONValue] {
            ((try? JSONDecoder().decode(JSONValue.self, from: Data(body.utf8)))?["data"]?.objectValue) ?? [:]
        }
    }

    let folder: URL
    let port: Int
    let pid: Int32

    private init(folder: URL, port: Int, pid: Int32) {
        self.folder = folder
        self.port = port
        self.pid = pid
    }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    static func start() async throws -> WebhookReceiver {
        guard let python = ProcessInfo.processInfo.environment["COSYNC_TEST_PYTHON"], !python.isEmpty else {
            throw Failure(description: "COSYNC_TEST_PYTHON is not set: run the tests with Tests/test.sh")
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webhooks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root.appendingPathComponent("Tests/system/webhooks/receiver.py").path, folder.path]
        // Neither output may hold the test runner's pipes open after the tests end.
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let portFile = folder.appendingPathComponent("port")
        for _ in 0..<200 {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let port = Int(text) {
                return WebhookReceiver(folder: folder, port: port, pid: process.processIdentifier)
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        kill(process.processIdentifier, SIGTERM)
        throw Failure(description: "receiver.py did not start")
    }

    /// Which secrets it verifies with, and which requests it answers 500 (by webhook-id or event type).
    func configure(secrets: [String], fail: [String: Int] = [:], failAll: Bool = false) throws {
        let config: JSONValue = .object([
            "secrets": .array(secrets.map { .string($0) }), "fail": .object(fail.mapValues { .int($0) }), "failAll": .bool(failAll),
        ])
        let temporary = folder.appendingPathComponent("config.tmp")
        try JSONCoding.encode(config).write(to: temporary)
        guard rename(temporary.path, folder.appendingPathComponent("config.json").path) == 0 else {
            throw Failure(description: "could not write the receiver's config.json")
        }
    }

    func received() -> [Received] {
        guard let text = try? String(contentsOf: folder.appendingPathComponent("received.jsonl"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let row = (try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)))?.objectValue else { return nil }
            return Received(
                id: row["id"]?.stringValue ?? "", type: row["type"]?.stringValue ?? "", userId: row["userId"]?.stringValue,
                timestamp: Int(row["timestamp"]?.stringValue ?? "") ?? 0, signature: row["signature"]?.stringValue ?? "",
                attempt: row["attempt"]?.intValue ?? 0,
                verified: row["verified"]?.arrayValue?.map { $0.boolValue ?? false } ?? [],
                status: row["status"]?.intValue ?? 0, body: row["body"]?.stringValue ?? "")
        }
    }

    /// Waits until `condition` holds for what arrived (or the timeout passes), and returns what arrived.
    @discardableResult
    func wait(timeout: Duration = .seconds(20), until condition: ([Received]) -> Bool) async throws -> [Received] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let all = received()
            if condition(all) { return all }
            try await Task.sleep(for: .milliseconds(50))
        }
        return received()
    }

    func stop() {
        kill(pid, SIGTERM)
        try? FileManager.default.removeItem(at: folder)
    }
}
