import Foundation
import LegacyImport
import Testing
import ZIPFoundation

/// The legacy export ZIP is unpacked within limits (the Portal's import and `cosyncauth
/// import-legacy` alike): a ZIP bomb is refused by the sizes it declares, by its compression ratio,
/// and, when its declared sizes lie, by the bytes counted while it is unpacked. Nothing of it is left
/// on disk.
@Suite("Legacy export ZIP limits: ZIP bombs are refused")
struct LegacyZipLimitTests {
    /// A ZIP of the five files of a legacy export, deflated; `big` holds `size` bytes of "A" (a
    /// 32 MiB one is about 32 KB compressed), the others a few bytes.
    static func bomb(big: String = "user-collection.csv", size: Int64 = 32 << 20) throws -> Data {
        let folder = try scratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("bomb.zip")
        let archive = try Archive(url: url, accessMode: .create)
        for name in LegacyZipExport.files {
            try archive.addEntry(with: name, type: .file, uncompressedSize: name == big ? size : 20, compressionMethod: .deflate) { _, chunk in
                Data(repeating: UInt8(ascii: "A"), count: chunk)
            }
        }
        return try Data(contentsOf: url)
    }

    /// `zip` with the uncompressed size of entry `name` declared as `size` in its local header and
    /// in the central directory (the content is left as it is).
    static func declaring(_ zip: Data, _ name: String, size: UInt32) throws -> Data {
        var bytes = [UInt8](zip)
        let wanted = Array(name.utf8)
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func named(_ at: Int, lengthAt: Int) -> Bool {
            let length = u16(lengthAt)
            return at + length <= bytes.count && Array(bytes[at..<(at + length)]) == wanted
        }
        func put(_ at: Int) { for k in 0..<4 { bytes[at + k] = UInt8(truncatingIfNeeded: size >> (8 * k)) } }
        var patched = 0
        var at = 0
        while at + 46 < bytes.count {
            if bytes[at] == 0x50, bytes[at + 1] == 0x4B {
                if bytes[at + 2] == 3, bytes[at + 3] == 4, named(at + 30, lengthAt: at + 26) {
                    put(at + 22)
                    patched += 1
                } else if bytes[at + 2] == 1, bytes[at + 3] == 2, named(at + 46, lengthAt: at + 28) {
                    put(at + 24)
                    patched += 1
                }
            }
            at += 1
        }
        try #require(patched == 2, "the local header and the central directory entry of \(name)")
        return Data(bytes)
    }

    static func scratch() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("zip-limits-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// Converts `zip` in a fresh work directory; returns the refusal's text and what is left in the
    /// work directory (in bytes, the ZIP itself not counted).
    static func refusal(_ zip: Data, limits: LegacyZipExport.Limits = .init()) throws -> (message: String, leftBytes: Int) {
        let work = try scratch()
        defer { try? FileManager.default.removeItem(at: work) }
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("zip-limits-\(UUID().uuidString).zip")
        try zip.write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        var message = "(converted)"
        do {
            _ = try LegacyZipExport.convert(zip: input, workDirectory: work, limits: limits)
        } catch {
            message = "\(error)"
        }
        var left = 0
        if let walker = FileManager.default.enumerator(at: work, includingPropertiesForKeys: [.fileSizeKey]) {
            for case let url as URL in walker { left += (try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0 }
        }
        return (message, left)
    }

    @Test("a bomb (32 MiB of one byte in ~32 KB, about 1000:1) is refused by its ratio before anything is unpacked")
    func ratio() throws {
        let zip = try Self.bomb()
        #expect(zip.count < 200_000, "\(zip.count) bytes")
        let (message, left) = try Self.refusal(zip)
        #expect(message.contains("user-collection.csv") && message.contains("ZIP bomb"), "\(message)")
        #expect(left == 0, "\(left) bytes left in the work directory")
    }

    @Test("declared sizes over the per-file or the total limit are refused before anything is unpacked")
    func declaredSizes() throws {
        // 3 GiB declared for one file (the default per-file limit is 512 MiB).
        let huge = try Self.declaring(try Self.bomb(size: 1000), "user-collection.csv", size: 3 << 30)
        let (message, left) = try Self.refusal(huge)
        #expect(message.contains("user-collection.csv would unpack to 3072 MiB, over the limit of 512 MiB for one file"), "\(message)")
        #expect(left == 0)
        // Two files of 600 KB each under a total of 1 MiB; each alone is within the per-file limit.
        let zip = try Self.declaring(try Self.bomb(size: 600_000), "signup-collection.csv", size: 600_000)
        let limits = LegacyZipExport.Limits(maxTotalBytes: 1 << 20, maxEntryBytes: 1 << 20)
        let total = try Self.refusal(zip, limits: limits)
        #expect(total.message.contains("would unpack to more than the limit of 1 MiB"), "\(total.message)")
        #expect(total.leftBytes == 0)
    }

    @Test("an entry that declares 100 bytes and inflates to 8 MiB is stopped while it is unpacked; nothing large is written")
    func lyingSizes() throws {
        let zip = try Self.declaring(try Self.bomb(size: 8 << 20), "user-collection.csv", size: 100)
        let (message, left) = try Self.refusal(zip)
        #expect(message.contains("user-collection.csv unpacks to more than the 100 bytes it declares"), "\(message)")
        #expect(left == 0, "\(left) bytes left in the work directory")
    }
}
