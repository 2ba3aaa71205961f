import Foundation

/// Progress of an import: on a terminal, one redrawn bar per collection (rows, rows/s, ETA); else a
/// plain line every few seconds. Written to standard error.
public final class ImportProgress: @unchecked Sendable {
    public let isInteractive: Bool
    let interval: TimeInterval
    var total: Int?
    var lastLine = Date.distantPast
    var quiet: Bool
    /// Told of every step (a collection's rows done, its total when counted, whether it finished) and
    /// every line, for a caller that shows progress its own way (the Portal's import page).
    let observer: (@Sendable (_ collection: String, _ done: Int, _ total: Int?, _ finished: Bool) -> Void)?
    let lineObserver: (@Sendable (String) -> Void)?

    public init(
        interactive: Bool? = nil, quiet: Bool = false, interval: TimeInterval = 2,
        observer: (@Sendable (_ collection: String, _ done: Int, _ total: Int?, _ finished: Bool) -> Void)? = nil,
        lineObserver: (@Sendable (String) -> Void)? = nil
    ) {
        isInteractive = interactive ?? (isatty(STDERR_FILENO) == 1)
        self.interval = interval
        self.quiet = quiet
        self.observer = observer
        self.lineObserver = lineObserver
    }

    func emit(_ text: String) {
        guard !quiet else { return }
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// A line of its own (on a terminal, the bar in progress is cleared first and redrawn by the next update).
    public func line(_ text: String) {
        lineObserver?(text)
        emit((isInteractive ? "\r\u{1B}[K" : "") + text + "\n")
    }

    func start(_ name: String, total: Int?, resumedAt: Int) {
        self.total = total
        lastLine = .distantPast
        observer?(name, resumedAt, total, false)
        if resumedAt > 0 { line("\(name): resuming after \(resumedAt) rows already imported") }
    }

    func advance(_ name: String, done: Int, rate: Double) {
        observer?(name, done, total, false)
        if isInteractive {
            let width = 30
            var bar = ""
            var eta = ""
            if let total, total > 0 {
                let fraction = min(1, Double(done) / Double(total))
                let filled = Int(fraction * Double(width))
                bar = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
                let seconds = rate > 0 ? Int(Double(total - done) / rate) : 0
                eta = String(format: "  ETA %d:%02d", seconds / 60, seconds % 60)
                emit("\r\u{1B}[K\(name.padding(toLength: 14, withPad: " ", startingAt: 0)) \(bar)\(done)/\(total)  \(Int(rate)) rows/s\(eta)")
            } else {
                emit("\r\u{1B}[K\(name) \(done) rows  \(Int(rate)) rows/s")
            }
        } else if Date().timeIntervalSince(lastLine) >= interval {
            lastLine = Date()
            line("\(name): \(done) rows, \(Int(rate)) rows/s")
        }
    }

    func finish(_ name: String, read: Int) {
        observer?(name, read, total, true)
        if isInteractive { emit("\r\u{1B}[K") }
        line("\(name): done, \(read) rows")
    }
}
