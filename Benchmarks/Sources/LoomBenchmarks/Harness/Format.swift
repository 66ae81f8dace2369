import Foundation

/// Number formatting for the table.
enum Format {
    static func seconds(_ value: Double) -> String {
        let magnitude = abs(value)
        if magnitude == 0 { return "0" }
        if magnitude < 1e-6 { return String(format: "%.0f ns", value * 1e9) }
        if magnitude < 1e-3 { return String(format: "%.1f µs", value * 1e6) }
        if magnitude < 1 { return String(format: "%.2f ms", value * 1e3) }
        return String(format: "%.2f s", value)
    }

    static func bytes(_ value: Double) -> String {
        let magnitude = abs(value)
        if magnitude < 10_000 { return String(format: "%.0f B", value) }
        if magnitude < 10 * 1_048_576 { return String(format: "%.1f KiB", value / 1024) }
        return String(format: "%.1f MiB", value / 1_048_576)
    }

    static func rate(_ value: Double) -> String {
        if value >= 1e6 { return String(format: "%.2f M/s", value / 1e6) }
        if value >= 1e3 { return String(format: "%.1f k/s", value / 1e3) }
        return String(format: "%.0f /s", value)
    }

    static func ratio(_ value: Double) -> String {
        value >= 10 ? String(format: "%.0f×", value) : String(format: "%.2f×", value)
    }

    static func percent(_ value: Double) -> String { String(format: "%.0f%%", value * 100) }

    static func value(_ value: Double, _ unit: Metric.Unit) -> String {
        switch unit {
        case .seconds: seconds(value)
        case .bytes: bytes(value)
        case .operationsPerSecond: rate(value)
        case .count: value == value.rounded() ? Format.count(Int(value)) : String(format: "%.1f", value)
        }
    }

    static func count(_ value: Int) -> String {
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        formatter.groupingSeparator = ","
        return formatter.string(from: NSNumber(value: value)) ?? String(value)
    }

    /// Pads or truncates to `width` columns, left- or right-aligned.
    static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let count = text.count
        if count >= width { return text }
        let padding = String(repeating: " ", count: width - count)
        return right ? padding + text : text + padding
    }
}
