import Foundation

/// What a load run measured and what the check after it found. A value, `Codable` as the JSON
/// that `board-load --json` writes and `board-load table` reads.
public struct LoadReport: Codable, Sendable {
    /// The latencies of one kind of operation.
    public struct Latency: Codable, Sendable {
        public var kind: OperationKind
        /// Operations that completed as expected (their latency is counted).
        public var count: Int
        /// Median and 99th percentile, in milliseconds (0 without operations).
        public var p50: Double
        public var p99: Double
        public var max: Double
    }

    /// The requests answered as expected, and those that failed, in a tenth of a second.
    public struct Tenth: Codable, Sendable, Equatable {
        public var ok: Int
        public var failed: Int
    }

    /// What the check after the run read.
    public struct Check: Codable, Sendable {
        /// Increments acknowledged (200), and of unknown outcome.
        public var acknowledgedIncrements: Int
        public var unknownIncrements: Int
        /// The counter's value as each server served it after the run.
        public var counterValues: [Int]
        /// Cards read back, and boards listed, checking every acknowledged write.
        public var cardsChecked: Int
        public var boardsChecked: Int
        /// What did not hold (the first 20), and how many things did not.
        public var violations: [String]
        public var violationCount: Int
    }

    /// Names the configuration (`Loom on PostgreSQL, 2 servers`).
    public var label: String
    public var servers: Int
    public var concurrency: Int
    /// How long the operations ran (the setup and the check excluded), in seconds.
    public var seconds: Double
    /// HTTP requests sent (an increment's retries each count) and operations made.
    public var requests: Int
    public var operations: Int
    /// Answers 412 to an increment, each followed by a fresh read and a retry.
    public var conflicts: Int
    /// The latency of each kind of operation; an increment's spans its retries.
    public var latencies: [Latency]
    /// Failures by kind and cause (`create card: 503`, `get card: connection refused`).
    public var errors: [String: Int]
    /// Writes whose outcome is unknown (no answer, or a 5xx).
    public var unknownOutcomes: Int
    /// Requests sent to each server, and how many of them were answered as expected.
    public var requestsByServer: [Int]
    public var successesByServer: [Int]
    public var check: Check
    /// Requests answered as expected and failed, by tenth of a second since the run started:
    /// when a fault began to show and when the servers served again.
    public var timeline: [Tenth]

    /// Requests per second, and operations per second.
    public var requestsPerSecond: Double { seconds > 0 ? Double(requests) / seconds : 0 }
    public var operationsPerSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    /// Failures of any kind.
    public var errorCount: Int { errors.values.reduce(0, +) }
    /// Whether every acknowledged write was found and the counter lost no increment.
    public var invariantsHold: Bool { check.violationCount == 0 }

    /// The report as lines of text, for a terminal.
    public var text: String {
        var lines = [
            "\(label): \(servers) server\(servers == 1 ? "" : "s"), \(concurrency) at once, \(format(seconds, 1)) s",
            "  \(requests) requests (\(format(requestsPerSecond, 0))/s), \(operations) operations (\(format(operationsPerSecond, 0))/s), \(conflicts) increments retried after 412",
        ]
        lines.append("  " + "kind".padding(toLength: 14, withPad: " ", startingAt: 0) + "count".leftPadded(8) + "p50 ms".leftPadded(10) + "p99 ms".leftPadded(10) + "max ms".leftPadded(10))
        for latency in latencies {
            lines.append("  " + latency.kind.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)
                + "\(latency.count)".leftPadded(8) + format(latency.p50, 2).leftPadded(10)
                + format(latency.p99, 2).leftPadded(10) + format(latency.max, 2).leftPadded(10))
        }
        if servers > 1 {
            let shares = zip(requestsByServer, successesByServer).enumerated().map { "server \($0.offset + 1): \($0.element.1)/\($0.element.0)" }
            lines.append("  answered as expected, by server: " + shares.joined(separator: ", "))
        }
        lines.append("  errors: " + (errors.isEmpty ? "none" : errors.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")))
        if unknownOutcomes > 0 { lines.append("  writes of unknown outcome: \(unknownOutcomes)") }
        lines.append("  counter: \(check.acknowledgedIncrements) increments acknowledged"
            + (check.unknownIncrements > 0 ? " (+\(check.unknownIncrements) unknown)" : "")
            + ", served as " + check.counterValues.map(String.init).joined(separator: " / "))
        lines.append("  checked \(check.cardsChecked) acknowledged cards and \(check.boardsChecked) board lists: "
            + (invariantsHold ? "every acknowledged write present, no lost update" : "\(check.violationCount) violations"))
        for violation in check.violations { lines.append("    ✗ \(violation)") }
        return lines.joined(separator: "\n")
    }

    /// A Markdown table of `reports`, one row each.
    public static func table(_ reports: [LoadReport]) -> String {
        var lines = [
            "| Configuration | Servers | Requests/s | list p50/p99 ms | get p50/p99 | create p50/p99 | update p50/p99 | increment p50/p99 | 412 retries | Errors | Invariants |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for report in reports {
            let latencies = OperationKind.allCases.map { kind in
                report.latencies.first { $0.kind == kind }.map { "\(format($0.p50, 1)) / \(format($0.p99, 1))" } ?? "–"
            }
            let errors = report.errors.isEmpty ? "0" : "\(report.errorCount) (" + report.errors.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ") + ")"
            let invariants = report.invariantsHold
                ? "hold (\(report.check.acknowledgedIncrements) increments, \(report.check.cardsChecked) cards)"
                : "**\(report.check.violationCount) violations**"
            lines.append("| \(report.label) | \(report.servers) | \(format(report.requestsPerSecond, 0)) | "
                + latencies.joined(separator: " | ") + " | \(report.conflicts) | \(errors) | \(invariants) |")
        }
        return lines.joined(separator: "\n")
    }
}

/// `value` with `digits` decimals.
func format(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

extension String {
    /// The string right-aligned in `width` characters.
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
