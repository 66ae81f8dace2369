import Foundation

/// Everything a run measured, as printed and as written by `--json`.
struct RunReport: Codable, Sendable {
    var command: String
    var quick: Bool
    var warmupRounds: Int
    var measuredRounds: Int
    var sizes: Sizes
    var environment: EnvironmentInfo
    /// How the memory figures were measured.
    var memoryMethod: String
    /// How the round statistics and ratios were computed.
    var statisticsMethod: String
    var workloads: [WorkloadResult]
    var durationSeconds: Double

    static let memoryMethodText = """
        Heap bytes in use from glibc's mallinfo2() (uordblks + hblkhd: every arena's in-use chunks \
        with malloc's headers, plus mmapped chunks), which includes SQLite's page caches and \
        statements. Measured in one extra, untimed run per contender after the timed rounds: the \
        workload marks the start and end of its timed part, a sampler thread reads the heap about \
        every 0.5 ms in between; peak = highest sample minus the start, retained = end minus start. \
        Short spikes between samples can be missed; the figure is process-wide, but nothing else \
        runs during a memory run. Not RSS: freed memory that malloc keeps is not counted.
        """

    static let statisticsMethodText = """
        Every contender runs each workload once per round, in the same process, contenders \
        interleaved in a rotating order, after warm-up rounds. median, min and p99 are over the \
        measured rounds (p99 is nearest-rank: with fewer than 100 rounds it is the worst round). \
        Loom÷X is Loom's value divided by X's value in the same round, median over rounds.
        """

    func writeJSON(to path: String) throws {
        try jsonData().write(to: URL(filePath: path))
    }

    /// The `--json` file's contents.
    func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try encoder.encode(self)
    }

    /// The readable table.
    func text() -> String {
        var out = ""
        let env = environment
        out += "Loom benchmarks — \(env.date)\n"
        out += "Loom \(env.loomRevision) at \(env.loomPath)\n"
        out += "Machine: \(env.cores) cores, \(env.memoryGiB) GiB, \(env.kernel); load average \(env.loadAverageAtStart) at start, \(env.loadAverageAtEnd ?? "?") at end\n"
        if let fluentVersion = env.fluentSQLiteVersion {
            out += "SQLite \(env.sqliteVersion) for raw SQLite, GRDB and Loom: \(env.sqliteLibraries.joined(separator: ", "))\n"
            out += "SQLite \(fluentVersion) for Fluent: sqlite-nio's own copy, compiled into this binary\n"
        } else {
            out += "SQLite \(env.sqliteVersion), one library for every contender: \(env.sqliteLibraries.joined(separator: ", "))\n"
        }
        out += "Settings read back per contender (page_size / cache_size / journal_mode / synchronous):\n"
        for contender in Contender.allCases {
            guard let s = env.settings[contender.rawValue] else { continue }
            out += "  \(Format.pad(contender.label, 12)) \(s.pageSize) / \(s.cacheSize) / \(s.journalMode) / \(s.synchronous)\n"
        }
        out += "Sizes: M = \(Format.count(sizes.objects)) objects\(quick ? " (--quick)" : ""); \(warmupRounds) warm-up + \(measuredRounds) measured rounds; run took \(Format.seconds(durationSeconds))\n"
        out += "Statistics: \(RunReport.statisticsMethodText)\n"
        out += "Memory: \(RunReport.memoryMethodText)\n"

        var passed = 0, missed = 0
        for workload in workloads {
            out += "\n\(workload.id)  \(workload.title)\n"
            guard workload.available else {
                let reason = workload.unavailableReason ?? ""
                out += reason.hasPrefix("FAILED") ? "    \(reason)\n" : "    not available yet: \(reason)\n"
                continue
            }
            if workload.metrics.isEmpty {
                out += "    (no contender selected)\n"
                continue
            }
            let header = "    " + Format.pad("metric", 26) + Format.pad("contender", 13)
                + Format.pad("median", 11, right: true) + Format.pad("min", 11, right: true) + Format.pad("p99", 11, right: true)
                + Format.pad("Loom÷this", 11, right: true) + "   target → result"
            out += header + "\n"
            for metric in workload.metrics {
                var first = true
                for contender in Contender.allCases {
                    guard let summary = metric.contenders[contender.rawValue] else { continue }
                    var line = "    " + Format.pad(first ? metric.label : "", 26) + Format.pad(workload.label(contender), 13)
                    line += Format.pad(Format.value(summary.median, metric.unit), 11, right: true)
                    line += Format.pad(Format.value(summary.min, metric.unit), 11, right: true)
                    line += Format.pad(Format.value(summary.p99, metric.unit), 11, right: true)
                    if contender != .loom, let ratio = metric.loomRatios[contender.rawValue] {
                        line += Format.pad(Format.ratio(ratio), 11, right: true)
                    } else {
                        line += Format.pad("", 11)
                    }
                    if contender == .loom, let target = metric.target {
                        let value = switch target.kind {
                        case .minRatioToRaw: Format.percent(target.value)
                        case .maxRatioToRaw, .maxRatioToContender: Format.ratio(target.value)
                        case .maxMedian, .maxWorst: Format.value(target.value, metric.unit)
                        }
                        line += "   \(target.target) → \(value) \(target.passed ? "PASS" : "MISS")"
                        if target.passed { passed += 1 } else { missed += 1 }
                    }
                    out += line + "\n"
                    first = false
                }
            }
            if !workload.memory.isEmpty {
                let parts = Contender.allCases.compactMap { contender -> String? in
                    guard let m = workload.memory[contender.rawValue] else { return nil }
                    return "\(workload.label(contender)) \(Format.bytes(Double(m.peakGrowthBytes))) peak, \(Format.bytes(Double(m.retainedBytes))) retained"
                }
                out += "    memory (\(workload.memoryNote ?? "")): " + parts.joined(separator: " · ") + "\n"
            }
            for note in workload.notes { out += "    note: \(note)\n" }
        }
        out += "\nTargets: \(passed) PASS, \(missed) MISS\n"
        return out
    }
}
