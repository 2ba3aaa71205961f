import Foundation

/// A small QR code encoder written from ISO/IEC 18004: byte mode, error correction level M,
/// versions 1–40, all eight masks scored with the standard penalty rules, rendered to a 1-bit PNG.
/// Used for TOTP enrolment (`otpauth://` URIs), so it favours clarity over speed.
public enum QRCode {
    /// Encodes `text` (UTF-8 bytes, byte mode) with error correction level M (choose the smallest version 1...40 that fits; throw if it does not fit) and returns the module matrix, true = dark.
    public static func matrix(for text: String) throws -> [[Bool]] {
        let bytes = Array(text.utf8)
        let version = try smallestVersion(byteCount: bytes.count)
        let data = dataCodewords(bytes, version: version)
        let codewords = interleavedWithErrorCorrection(data, version: version)

        var symbol = Symbol(version: version)
        symbol.drawFunctionPatterns()
        symbol.placeCodewords(codewords)

        // Try every mask and keep the one with the lowest penalty score.
        var best = symbol
        var bestPenalty = Int.max
        for mask in 0..<8 {
            var candidate = symbol
            candidate.applyMask(mask)
            candidate.drawFormatBits(mask: mask)
            let penalty = candidate.penaltyScore()
            if penalty < bestPenalty {
                best = candidate
                bestPenalty = penalty
            }
        }
        return best.modules
    }

    /// A PNG image (8-bit grayscale or 1-bit, your choice) of the code with a 4-module quiet zone, `scale` pixels per module (default 6).
    public static func png(for text: String, scale: Int = 6) throws -> [UInt8] {
        guard (1...64).contains(scale) else {
            throw QRCodeError(description: "QR code scale must be between 1 and 64 pixels per module, got \(scale)")
        }
        return PNGWriter.bilevelImage(modules: try matrix(for: text), scale: scale, quietZone: 4)
    }

    // MARK: - Tables for error correction level M (index 0 unused, index = version)

    /// Error correction codewords per block.
    private static let eccCodewordsPerBlock: [Int] = [
        0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
        26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    ]

    /// Number of error correction blocks.
    private static let blockCount: [Int] = [
        0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
        17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49,
    ]

    // MARK: - Capacity

    /// Modules available for data + ECC codewords (everything but function patterns and format/version info).
    static func rawDataModules(version: Int) -> Int {
        var result = (16 * version + 128) * version + 64  // size² minus finders, separators, timing, format
        if version >= 2 {
            let alignCount = version / 7 + 2
            result -= (25 * alignCount - 10) * alignCount - 55  // alignment patterns (minus timing overlap)
            if version >= 7 {
                result -= 36  // two version information blocks
            }
        }
        return result
    }

    /// Data codewords (excluding ECC) at level M.
    static func dataCodewordCount(version: Int) -> Int {
        rawDataModules(version: version) / 8 - eccCodewordsPerBlock[version] * blockCount[version]
    }

    /// Character count indicator width for byte mode.
    private static func countBits(version: Int) -> Int {
        version <= 9 ? 8 : 16
    }

    /// The most bytes a code holds: byte mode, level M, version 40 (2331). Longer text throws.
    public static let maxByteCount = (dataCodewordCount(version: 40) * 8 - 4 - countBits(version: 40)) / 8

    private static func smallestVersion(byteCount: Int) throws -> Int {
        for version in 1...40 {
            let neededBits = 4 + countBits(version: version) + 8 * byteCount
            if neededBits <= dataCodewordCount(version: version) * 8 {
                return version
            }
        }
        throw QRCodeError(description: "text of \(byteCount) bytes is too long for a QR code (max \(maxByteCount) bytes at level M)")
    }

    // MARK: - Data encoding

    /// Byte-mode segment, terminator, bit padding and pad codewords.
    private static func dataCodewords(_ bytes: [UInt8], version: Int) -> [UInt8] {
        let capacityBits = dataCodewordCount(version: version) * 8
        var bits = BitBuffer()
        bits.append(0b0100, count: 4)  // byte mode indicator
        bits.append(bytes.count, count: countBits(version: version))
        for byte in bytes {
            bits.append(Int(byte), count: 8)
        }
        bits.append(0, count: min(4, capacityBits - bits.count))  // terminator
        bits.append(0, count: (8 - bits.count % 8) % 8)  // pad to a byte boundary

        var codewords = bits.bytes()
        var padByte: UInt8 = 0xEC
        while codewords.count * 8 < capacityBits {
            codewords.append(padByte)
            padByte = padByte == 0xEC ? 0x11 : 0xEC
        }
        return codewords
    }

    /// Splits data into blocks, appends Reed–Solomon ECC to each, and interleaves them.
    private static func interleavedWithErrorCorrection(_ data: [UInt8], version: Int) -> [UInt8] {
        let numBlocks = blockCount[version]
        let eccLength = eccCodewordsPerBlock[version]
        let rawCodewords = rawDataModules(version: version) / 8
        let shortBlockCount = numBlocks - rawCodewords % numBlocks
        let shortDataLength = rawCodewords / numBlocks - eccLength  // long blocks hold one more

        let generator = ReedSolomon.generator(degree: eccLength)
        var dataBlocks: [[UInt8]] = []
        var eccBlocks: [[UInt8]] = []
        var offset = 0
        for index in 0..<numBlocks {
            let length = shortDataLength + (index < shortBlockCount ? 0 : 1)
            let block = Array(data[offset..<(offset + length)])
            offset += length
            dataBlocks.append(block)
            eccBlocks.append(ReedSolomon.remainder(of: block, generator: generator))
        }

        var result: [UInt8] = []
        result.reserveCapacity(rawCodewords)
        for column in 0...shortDataLength {
            for block in dataBlocks where column < block.count {
                result.append(block[column])
            }
        }
        for column in 0..<eccLength {
            for block in eccBlocks {
                result.append(block[column])
            }
        }
        return result
    }
}

public struct QRCodeError: Error, CustomStringConvertible {
    public let description: String
}

// MARK: - Bit buffer

private struct BitBuffer {
    private(set) var bits: [Bool] = []

    var count: Int { bits.count }

    /// Appends the low `count` bits of `value`, most significant first.
    mutating func append(_ value: Int, count: Int) {
        guard count > 0 else { return }
        for shift in stride(from: count - 1, through: 0, by: -1) {
            bits.append((value >> shift) & 1 == 1)
        }
    }

    /// Packs the bits (length must be a multiple of 8) into bytes.
    func bytes() -> [UInt8] {
        var result = [UInt8](repeating: 0, count: bits.count / 8)
        for (index, bit) in bits.enumerated() where bit {
            result[index / 8] |= 0x80 >> UInt8(index % 8)
        }
        return result
    }
}

// MARK: - Reed–Solomon over GF(256), primitive polynomial x^8 + x^4 + x^3 + x^2 + 1

private enum ReedSolomon {
    /// Multiplication in GF(256) modulo 0x11D (Russian peasant method).
    static func multiply(_ x: UInt8, _ y: UInt8) -> UInt8 {
        var a = Int(x)
        var b = Int(y)
        var product = 0
        while b != 0 {
            if b & 1 != 0 { product ^= a }
            a <<= 1
            if a & 0x100 != 0 { a ^= 0x11D }
            b >>= 1
        }
        return UInt8(product)
    }

    /// Coefficients of ∏(x − αⁱ) for i in 0..<degree, highest power first, leading 1 omitted.
    static func generator(degree: Int) -> [UInt8] {
        var coefficients = [UInt8](repeating: 0, count: degree)
        coefficients[degree - 1] = 1  // start with the polynomial "1"
        var root: UInt8 = 1  // α⁰
        for _ in 0..<degree {
            // Multiply the current polynomial by (x − root); subtraction is XOR.
            for j in 0..<degree {
                coefficients[j] = multiply(coefficients[j], root)
                if j + 1 < degree {
                    coefficients[j] ^= coefficients[j + 1]
                }
            }
            root = multiply(root, 0x02)
        }
        return coefficients
    }

    /// Remainder of data(x)·x^degree divided by the generator: the ECC codewords.
    static func remainder(of data: [UInt8], generator: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: generator.count)
        for byte in data {
            let factor = byte ^ result[0]
            result.removeFirst()
            result.append(0)
            for index in result.indices {
                result[index] ^= multiply(generator[index], factor)
            }
        }
        return result
    }
}

// MARK: - Module matrix

/// The symbol being built; coordinates are (x = column, y = row).
private struct Symbol {
    let version: Int
    let size: Int
    var modules: [[Bool]]
    /// Modules that belong to function patterns (never masked, never hold data).
    var isFunction: [[Bool]]

    init(version: Int) {
        self.version = version
        size = version * 4 + 17
        modules = Array(repeating: Array(repeating: false, count: size), count: size)
        isFunction = modules
    }

    private mutating func setFunction(x: Int, y: Int, dark: Bool) {
        modules[y][x] = dark
        isFunction[y][x] = true
    }

    /// Alignment pattern centre coordinates (same list for rows and columns).
    private var alignmentPositions: [Int] {
        guard version > 1 else { return [] }
        let count = version / 7 + 2
        let step = (version * 8 + count * 3 + 5) / (count * 4 - 4) * 2
        var positions = [6]
        var position = size - 7
        for _ in 0..<(count - 1) {
            positions.insert(position, at: 1)
            position -= step
        }
        return positions
    }

    mutating func drawFunctionPatterns() {
        // Timing patterns along row 6 and column 6.
        for i in 0..<size {
            setFunction(x: 6, y: i, dark: i % 2 == 0)
            setFunction(x: i, y: 6, dark: i % 2 == 0)
        }
        // Finder patterns with their light separators.
        drawFinder(centerX: 3, centerY: 3)
        drawFinder(centerX: size - 4, centerY: 3)
        drawFinder(centerX: 3, centerY: size - 4)
        // Alignment patterns, except where they would overlap a finder.
        let positions = alignmentPositions
        let last = positions.count - 1
        for (i, x) in positions.enumerated() {
            for (j, y) in positions.enumerated() {
                let overlapsFinder = (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0)
                if !overlapsFinder {
                    drawAlignment(centerX: x, centerY: y)
                }
            }
        }
        // Reserve the format areas now (real bits are drawn per mask) and draw version info.
        drawFormatBits(mask: 0)
        drawVersionInfo()
    }

    private mutating func drawFinder(centerX: Int, centerY: Int) {
        for dy in -4...4 {
            for dx in -4...4 {
                let x = centerX + dx
                let y = centerY + dy
                guard (0..<size).contains(x), (0..<size).contains(y) else { continue }
                let ring = max(abs(dx), abs(dy))  // 0–1 core, 2 light, 3 dark, 4 separator
                setFunction(x: x, y: y, dark: ring != 2 && ring != 4)
            }
        }
    }

    private mutating func drawAlignment(centerX: Int, centerY: Int) {
        for dy in -2...2 {
            for dx in -2...2 {
                setFunction(x: centerX + dx, y: centerY + dy, dark: max(abs(dx), abs(dy)) != 1)
            }
        }
    }

    /// 15-bit format information: level M (00) + mask, BCH(15,5), XOR 0x5412; drawn twice.
    mutating func drawFormatBits(mask: Int) {
        let data = (0b00 << 3) | mask
        var remainder = data
        for _ in 0..<10 {
            remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537)
        }
        let bits = ((data << 10) | remainder) ^ 0x5412
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }

        // First copy, around the top-left finder.
        for i in 0...5 { setFunction(x: 8, y: i, dark: bit(i)) }
        setFunction(x: 8, y: 7, dark: bit(6))
        setFunction(x: 8, y: 8, dark: bit(7))
        setFunction(x: 7, y: 8, dark: bit(8))
        for i in 9..<15 { setFunction(x: 14 - i, y: 8, dark: bit(i)) }

        // Second copy, split between the top-right and bottom-left finders.
        for i in 0..<8 { setFunction(x: size - 1 - i, y: 8, dark: bit(i)) }
        for i in 8..<15 { setFunction(x: 8, y: size - 15 + i, dark: bit(i)) }
        setFunction(x: 8, y: size - 8, dark: true)  // the always-dark module
    }

    /// 18-bit version information (version + BCH(18,6)) for versions 7 and up, drawn twice.
    private mutating func drawVersionInfo() {
        guard version >= 7 else { return }
        var remainder = version
        for _ in 0..<12 {
            remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25)
        }
        let bits = (version << 12) | remainder
        for i in 0..<18 {
            let dark = (bits >> i) & 1 == 1
            let a = size - 11 + i % 3
            let b = i / 3
            setFunction(x: a, y: b, dark: dark)  // top-right block
            setFunction(x: b, y: a, dark: dark)  // bottom-left block
        }
    }

    /// Places codewords in the two-column zigzag, right to left, skipping the vertical timing column.
    mutating func placeCodewords(_ codewords: [UInt8]) {
        let totalBits = codewords.count * 8
        var bitIndex = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = (right + 1) & 2 == 0
            for step in 0..<size {
                let y = upward ? size - 1 - step : step
                for dx in 0..<2 {
                    let x = right - dx
                    guard !isFunction[y][x] else { continue }
                    if bitIndex < totalBits {
                        modules[y][x] = (codewords[bitIndex >> 3] >> UInt8(7 - (bitIndex & 7))) & 1 == 1
                        bitIndex += 1
                    }
                    // Remainder bits stay light.
                }
            }
            right -= 2
        }
    }

    /// XORs the data modules with mask pattern `mask` (0–7).
    mutating func applyMask(_ mask: Int) {
        for y in 0..<size {
            for x in 0..<size where !isFunction[y][x] {
                let invert: Bool
                switch mask {
                case 0: invert = (x + y) % 2 == 0
                case 1: invert = y % 2 == 0
                case 2: invert = x % 3 == 0
                case 3: invert = (x + y) % 3 == 0
                case 4: invert = (x / 3 + y / 2) % 2 == 0
                case 5: invert = x * y % 2 + x * y % 3 == 0
                case 6: invert = (x * y % 2 + x * y % 3) % 2 == 0
                default: invert = ((x + y) % 2 + x * y % 3) % 2 == 0
                }
                if invert {
                    modules[y][x].toggle()
                }
            }
        }
    }

    /// The standard mask penalty (rules N1–N4); lower is better.
    func penaltyScore() -> Int {
        var penalty = 0
        let columns = (0..<size).map { x in modules.map { $0[x] } }

        for line in modules + columns {
            // N1: runs of five or more same-coloured modules.
            var runLength = 1
            for i in 1..<size {
                if line[i] == line[i - 1] {
                    runLength += 1
                } else {
                    if runLength >= 5 { penalty += runLength - 2 }
                    runLength = 1
                }
            }
            if runLength >= 5 { penalty += runLength - 2 }

            // N3: dark-light-dark-dark-dark-light-dark (1:1:3:1:1) with four light modules before
            // or after it; modules beyond the edge count as light (they are quiet zone).
            func isLight(_ range: Range<Int>) -> Bool {
                range.allSatisfy { !line.indices.contains($0) || !line[$0] }
            }
            // A counted pattern is not reused by an overlapping one.
            var start = 0
            while start + 7 <= size {
                if line[start..<(start + 7)].elementsEqual(Self.finderCore),
                   isLight((start - 4)..<start) || isLight((start + 7)..<(start + 11)) {
                    penalty += 40
                    start += 7
                } else {
                    start += 1
                }
            }
        }

        // N2: 2×2 blocks of one colour.
        for y in 0..<(size - 1) {
            for x in 0..<(size - 1) {
                let colour = modules[y][x]
                if modules[y][x + 1] == colour, modules[y + 1][x] == colour, modules[y + 1][x + 1] == colour {
                    penalty += 3
                }
            }
        }

        // N4: 10 points per full 5% deviation of the dark ratio from 50%.
        let dark = modules.reduce(0) { $0 + $1.filter { $0 }.count }
        let total = size * size
        penalty += abs(dark * 20 - total * 10) / total * 10
        return penalty
    }

    /// The 1:1:3:1:1 core of a finder pattern.
    private static let finderCore: [Bool] = [true, false, true, true, true, false, true]
}

// MARK: - PNG

private enum PNGWriter {
    /// 1-bit grayscale PNG; each module is `scale`×`scale` pixels, surrounded by a light quiet zone.
    static func bilevelImage(modules: [[Bool]], scale: Int, quietZone: Int) -> [UInt8] {
        let moduleCount = modules.count + 2 * quietZone
        let width = moduleCount * scale
        let rowBytes = (width + 7) / 8

        // Raw scanlines: filter type 0, then pixels packed MSB first (0 = black, 1 = white).
        var raw: [UInt8] = []
        raw.reserveCapacity((rowBytes + 1) * width)
        for moduleY in 0..<moduleCount {
            var row = [UInt8](repeating: 0, count: rowBytes)
            for pixelX in 0..<width {
                let mx = pixelX / scale - quietZone
                let my = moduleY - quietZone
                let inside = modules.indices.contains(my) && modules[my].indices.contains(mx)
                let dark = inside && modules[my][mx]
                if !dark {
                    row[pixelX / 8] |= 0x80 >> UInt8(pixelX % 8)
                }
            }
            for _ in 0..<scale {
                raw.append(0)
                raw.append(contentsOf: row)
            }
        }

        var header: [UInt8] = []
        header.appendBigEndian(UInt32(width))
        header.appendBigEndian(UInt32(width))
        header.append(contentsOf: [1, 0, 0, 0, 0])  // bit depth 1, grayscale, deflate, filter 0, no interlace

        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        appendChunk("IHDR", header, to: &png)
        appendChunk("IDAT", zlibStored(raw), to: &png)
        appendChunk("IEND", [], to: &png)
        return png
    }

    private static func appendChunk(_ type: String, _ data: [UInt8], to png: inout [UInt8]) {
        let typeBytes = Array(type.utf8)
        png.appendBigEndian(UInt32(data.count))
        png.append(contentsOf: typeBytes)
        png.append(contentsOf: data)
        png.appendBigEndian(crc32(typeBytes + data))
    }

    /// zlib stream made of uncompressed ("stored") deflate blocks.
    private static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]  // deflate, 32K window, no preset dictionary, check bits OK
        var offset = 0
        repeat {
            let length = min(65_535, data.count - offset)
            let isFinal = offset + length == data.count
            out.append(isFinal ? 1 : 0)  // BFINAL bit, BTYPE 00 (stored)
            out.append(UInt8(length & 0xFF))
            out.append(UInt8(length >> 8))
            out.append(UInt8(~length & 0xFF))
            out.append(UInt8((~length >> 8) & 0xFF))
            out.append(contentsOf: data[offset..<(offset + length)])
            offset += length
        } while offset < data.count
        out.appendBigEndian(adler32(data))
        return out
    }

    private static func adler32(_ data: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return (b << 16) | a
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 {
            c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1
        }
        return c
    }

    private static func crc32(_ data: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
        }
        return crc ^ 0xFFFF_FFFF
    }
}

private extension Array where Element == UInt8 {
    mutating func appendBigEndian(_ value: UInt32) {
        append(UInt8(value >> 24))
        append(UInt8((value >> 16) & 0xFF))
        append(UInt8((value >> 8) & 0xFF))
        append(UInt8(value & 0xFF))
    }
}
