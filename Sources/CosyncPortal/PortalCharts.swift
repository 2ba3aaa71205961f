import Foundation

/// Charts of the Portal's overview as server-rendered SVG (issue 23): pure functions from numbers to
/// markup, no chart library, no script, no `style` attribute (colours come from classes in
/// portal.css). Every chart has `role="img"`, an `aria-label` and a `<title>`/`<desc>` naming its
/// numbers; the page shows the same numbers in a table for those who cannot see it. Every text that
/// goes in is escaped here; values are clamped to 0 and above, and sums saturate (no trap on any input).
public enum PortalCharts {
    /// Text for an SVG/HTML text node or a quoted attribute value.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                // Control characters are not allowed in XML 1.0 (except tab, newline, carriage return).
                if scalar.value < 0x20 && scalar != "\t" && scalar != "\n" && scalar != "\r" { out += " " } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }

    /// An id or class fragment: lower-case letters, digits and `-` only (anything else becomes `-`).
    public static func token(_ text: String) -> String {
        let kept = String(text.lowercased().unicodeScalars.prefix(40).map { scalar -> Character in
            ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) ? Character(scalar) : "-"
        })
        return kept.isEmpty ? "chart" : kept
    }

    /// The sum of the values above 0, saturating at `Int.max`.
    public static func total(_ values: [Int]) -> Int {
        var sum = 0
        for value in values where value > 0 {
            let (next, overflow) = sum.addingReportingOverflow(value)
            if overflow { return Int.max }
            sum = next
        }
        return sum
    }

    /// A coordinate with at most one decimal (no exponent, no NaN).
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let tenths = (value * 10).rounded()
        guard abs(tenths) < 1e15 else { return "0" }
        let whole = Int(tenths)
        let sign = whole < 0 ? "-" : ""
        let magnitude = whole.magnitude
        return magnitude % 10 == 0 ? "\(sign)\(magnitude / 10)" : "\(sign)\(magnitude / 10).\(magnitude % 10)"
    }

    /// The height (0...1) of `value` against `top`.
    static func fraction(_ value: Int, of top: Int) -> Double {
        guard top > 0, value > 0 else { return 0 }
        return min(1, Double(value) / Double(top))
    }

    static func header(id: String, kind: String, width: Int, height: Int, title: String, summary: String) -> String {
        let id = token(id)
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-\(id)\" class=\"chart chart-\(token(kind))\" viewBox=\"0 0 \(width) \(height)\""
            + " width=\"\(width)\" height=\"\(height)\" preserveAspectRatio=\"xMinYMin meet\" role=\"img\" aria-label=\"\(escape(title))\""
            + " aria-describedby=\"chart-\(id)-desc\" focusable=\"false\">"
            + "<title id=\"chart-\(id)-title\">\(escape(title))</title><desc id=\"chart-\(id)-desc\">\(escape(summary))</desc>"
    }

    /// Vertical bars, one per label (a day), with the scale's top and 0 on the left and the first and
    /// last labels below. Each bar carries its own `<title>` (label: value).
    public static func columns(id: String, title: String, summary: String, labels: [String], values: [Int], kind: String) -> String {
        let count = max(labels.count, values.count)
        let width = 640, height = 180, left = 56, right = 8, top = 12, bottom = 28
        let plotWidth = Double(width - left - right), plotHeight = Double(height - top - bottom)
        let peak = values.max().map { max($0, 0) } ?? 0
        var svg = header(id: id, kind: kind, width: width, height: height, title: title, summary: summary)
        svg += "<g class=\"axis\" aria-hidden=\"true\">"
        svg += "<line x1=\"\(left)\" y1=\"\(top)\" x2=\"\(left)\" y2=\"\(height - bottom)\"/>"
        svg += "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width - right)\" y2=\"\(height - bottom)\"/>"
        svg += "<text class=\"tick\" x=\"\(left - 6)\" y=\"\(top + 4)\" text-anchor=\"end\">\(peak)</text>"
        svg += "<text class=\"tick\" x=\"\(left - 6)\" y=\"\(height - bottom)\" text-anchor=\"end\">0</text>"
        if let first = labels.first {
            svg += "<text class=\"tick\" x=\"\(left)\" y=\"\(height - 8)\" text-anchor=\"start\">\(escape(first))</text>"
        }
        if labels.count > 1, let last = labels.last {
            svg += "<text class=\"tick\" x=\"\(width - right)\" y=\"\(height - 8)\" text-anchor=\"end\">\(escape(last))</text>"
        }
        svg += "</g>"
        if count > 0 {
            let slot = plotWidth / Double(count)
            let barWidth = max(1, slot * 0.8)
            svg += "<g class=\"bars\">"
            for index in 0..<count {
                let value = index < values.count ? max(values[index], 0) : 0
                let label = index < labels.count ? labels[index] : ""
                let barHeight = fraction(value, of: peak) * plotHeight
                let x = Double(left) + Double(index) * slot + (slot - barWidth) / 2
                let y = Double(height - bottom) - barHeight
                svg += "<rect class=\"bar\" x=\"\(number(x))\" y=\"\(number(y))\" width=\"\(number(barWidth))\" height=\"\(number(barHeight))\">"
                svg += "<title>\(escape(label)): \(value)</title></rect>"
            }
            svg += "</g>"
        }
        if peak == 0 {
            svg += "<text class=\"empty\" x=\"\(left + Int(plotWidth / 2))\" y=\"\(top + Int(plotHeight / 2))\" text-anchor=\"middle\">0</text>"
        }
        return svg + "</svg>"
    }

    /// Horizontal bars, one row per label (at most 60 characters of it), the value at the bar's end.
    public static func bars(id: String, title: String, summary: String, labels: [String], values: [Int], kind: String) -> String {
        let count = min(max(labels.count, values.count), 200)
        let row = 28, width = 640, labelWidth = 260, valueWidth = 80, top = 6
        let height = max(top * 2 + count * row, 40)
        let plotWidth = Double(width - labelWidth - valueWidth - 16)
        let peak = values.max().map { max($0, 0) } ?? 0
        var svg = header(id: id, kind: kind, width: width, height: height, title: title, summary: summary)
        svg += "<g class=\"bars\">"
        for index in 0..<count {
            let value = index < values.count ? max(values[index], 0) : 0
            var label = index < labels.count ? labels[index] : ""
            if label.count > 60 { label = String(label.prefix(59)) + "…" }
            let y = top + index * row
            let barWidth = fraction(value, of: peak) * plotWidth
            svg += "<text class=\"label\" x=\"\(labelWidth - 8)\" y=\"\(y + 18)\" text-anchor=\"end\">\(escape(label))</text>"
            svg += "<rect class=\"bar\" x=\"\(labelWidth)\" y=\"\(y + 4)\" width=\"\(number(barWidth))\" height=\"\(row - 8)\">"
            svg += "<title>\(escape(label)): \(value)</title></rect>"
            svg += "<text class=\"value\" x=\"\(number(Double(labelWidth) + barWidth + 6))\" y=\"\(y + 18)\">\(value)</text>"
        }
        svg += "</g>"
        return svg + "</svg>"
    }
}
