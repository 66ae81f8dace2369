import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
@testable import loom_bench
import Testing

/// `loom-bench --svg`: which rows the chart has, where their dots and target bars go, and that the
/// file it writes is well-formed SVG, from a report made here and from a committed run's JSON.
@Suite("Benchmark chart")
struct BenchmarkChartTests {
    typealias Metric = ChartInput.Metric
    typealias Target = ChartInput.Target

    static func metric(_ key: String, unit: String = "seconds", ratios: [String: Double], target: Target? = nil) -> Metric {
        Metric(key: key, label: key, unit: unit, loomRatios: ratios, target: target)
    }

    @Test("A ratio target is marked at its limit; time targets are named, not marked")
    func targets() throws {
        let input = ChartInput(workloads: [
            .init(id: "W1", available: true, metrics: [
                Self.metric("create", ratios: ["raw": 2]),
                Self.metric("total", ratios: ["raw": 1.9, "fluent": 0.4],
                            target: Target(kind: "maxRatioToRaw", target: "≤ 1.50× raw", limit: 1.5)),
                Self.metric("empty", ratios: ["raw": 3], target: Target(kind: "maxMedian", target: "median ≤ 50.0 µs")),
            ]),
        ])
        let rows = Chart.rows(of: input)
        #expect(rows.map(\.label) == ["total", "empty (target median ≤ 50.0 µs)"])
        #expect(rows[0].target?.limit == 1.5)
        #expect(rows[0].points.map(\.contender) == [.raw, .fluent])
        #expect(rows[0].points.map(\.ratio) == [1.9, 0.4])
        #expect(rows[1].target == nil)
    }

    @Test("Throughput rows are inverted, so that left of 1 means Loom does better on every row")
    func throughputInverted() throws {
        let input = ChartInput(workloads: [
            .init(id: "W8", available: true, metrics: [
                Self.metric("lookups", unit: "ops/s", ratios: ["raw": 0.8, "grdb-record": 4],
                            target: Target(kind: "minRatioToRaw", target: "≥ 85% raw")),
            ]),
        ])
        let row = try #require(Chart.rows(of: input).first)
        #expect(row.points.map(\.ratio) == [1.25, 0.25])
        // An older file's target has no limit: read from its text, then inverted like the dots.
        let limit = try #require(row.target?.limit)
        #expect(abs(limit - 1 / 0.85) < 1e-12)
    }

    @Test("Workloads without a target chart their first metric with ratios; counts, failures and empty ratios are left out")
    func rowSelection() throws {
        let input = ChartInput(workloads: [
            .init(id: "PG-W9", available: true, labels: ["raw": "postgres-nio", "fluent": "Fluent on PG"], metrics: [
                Self.metric("statements", unit: "count", ratios: ["raw": 9]),
                Self.metric("p50", ratios: ["raw": 1.2, "fluent": .nan, "grdb": 0, "grdb-record": .infinity]),
                Self.metric("p99", ratios: ["raw": 1.4]),
            ]),
            .init(id: "W6", available: false, metrics: [Self.metric("p50", ratios: ["raw": 1])]),
            .init(id: "W7", available: true, metrics: [Self.metric("p50", ratios: [:])]),
        ])
        let rows = Chart.rows(of: input)
        #expect(rows.count == 1)
        #expect(rows.first?.label == "p50")
        #expect(rows.first?.points == [Chart.Point(contender: .raw, label: "postgres-nio", ratio: 1.2)])
    }

    @Test("Targets of older files: the limit read from the printed target")
    func targetText() {
        #expect(Target(kind: "maxRatioToRaw", target: "≤ 3.00× raw").ratioLimit == 3)
        #expect(Target(kind: "maxRatioToContender", target: "≤ 2.00× GRDB record").ratioLimit == 2)
        #expect(Target(kind: "minRatioToRaw", target: "≥ 70% raw").ratioLimit == 0.7)
        #expect(Target(kind: "maxWorst", target: "worst ≤ 16.00 ms").ratioLimit == nil)
        #expect(Target(kind: "maxRatioToRaw", target: "≤ 1.50× raw", limit: 1.2).ratioLimit == 1.2)
    }

    @Test("The log scale: 1-2-5 ticks around every value and 1, monotonic, values outside clamped")
    func logScale() {
        let scale = Chart.LogScale(values: [0.3, 4.2, 1], left: 100, right: 600)
        #expect(scale.low == 0.2)
        #expect(scale.high == 5)
        #expect(scale.ticks == [0.2, 0.5, 1, 2, 5])
        #expect(scale.x(0.2) == 100)
        #expect(abs(scale.x(5) - 600) < 1e-9)
        #expect(scale.x(0.3) < scale.x(1) && scale.x(1) < scale.x(4.2))
        #expect(scale.x(1_000) == scale.x(5))
        #expect(scale.x(0) == scale.x(0.2))
        // Every value at 1 (or nothing at all) still gives an axis.
        let flat = Chart.LogScale(values: [1], left: 0, right: 10)
        #expect(flat.low < 1 && flat.high > 1)
    }

    @Test("The SVG is well-formed XML, one marker per dot, one bar per ratio target, labels escaped")
    func wellFormed() throws {
        let input = ChartInput(workloads: [
            .init(id: "W<1>", available: true, metrics: [
                Metric(key: "total", label: "create & save", unit: "seconds", loomRatios: ["raw": 1.9, "grdb": 1.3, "grdb-record": 0.5, "fluent": 0.3],
                       target: Target(kind: "maxRatioToRaw", target: "≤ 3.00× raw", limit: 3)),
            ]),
        ], caption: "Loom abc · \"quoted\"")
        let svg = Chart.svg(input)
        let delegate = ElementCounter()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = delegate
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        #expect(delegate.counts["svg"] == 1)
        #expect(svg.contains("W&lt;1&gt;"))
        #expect(svg.contains("create &amp; save"))
        // Dots: raw's and Loom's circles in the legend and the row (the legend has no Loom), a
        // square for GRDB, a diamond and a triangle (polygons) for the record layer and Fluent.
        #expect(svg.components(separatedBy: "create &amp; save: Loom ÷ ").count - 1 == 4)
        #expect(svg.components(separatedBy: "<title>target ≤ 3.00× raw</title>").count - 1 == 1)
        #expect(delegate.counts["polygon"] == 4)   // legend + row, for the record layer and Fluent
    }

    @Test("--svg-from: a committed run's JSON charts every metric with a target")
    func committedRun() throws {
        let json = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../Results/full-2core.json").standardized
        let input = try ChartInput.decode(try Data(contentsOf: json))
        let rows = Chart.rows(of: input)
        // The 27 metrics with a target and a ratio in that run (W5's empty save has no ratio):
        // a run with a metric more or less changes it.
        #expect(rows.count == 27)
        #expect(rows.first?.workload == "W1")
        #expect(input.caption?.contains("Loom") == true)
        let out = FileManager.default.temporaryDirectory.appending(path: "loom-bench-chart-\(UUID().uuidString).svg")
        defer { try? FileManager.default.removeItem(at: out) }
        try Chart.write(fromJSON: json.path, to: out.path)
        #expect(try String(contentsOf: out, encoding: .utf8).hasPrefix("<svg"))
    }

    @Test("--svg-from on a missing or foreign file: an error naming it, and no chart written")
    func badInput() throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "loom-bench-chart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let svg = folder.appending(path: "chart.svg").path
        let missing = folder.appending(path: "missing.json").path
        let notFound = #expect(throws: BenchError.self) { try Chart.write(fromJSON: missing, to: svg) }
        #expect(notFound?.description.contains(missing) == true)
        let foreign = folder.appending(path: "foreign.json")
        try Data(#"{"rows": []}"#.utf8).write(to: foreign)
        let notARun = #expect(throws: BenchError.self) { try Chart.write(fromJSON: foreign.path, to: svg) }
        #expect(notARun?.description.contains("foreign.json is not a loom-bench --json file") == true)
        let truncated = folder.appending(path: "truncated.json")
        try Data(#"{"workloads": [{"id": "W1", "avail"#.utf8).write(to: truncated)
        #expect(throws: BenchError.self) { try Chart.write(fromJSON: truncated.path, to: svg) }
        #expect(!FileManager.default.fileExists(atPath: svg))
    }
}

/// Counts the elements an `XMLParser` meets, by name.
private final class ElementCounter: NSObject, XMLParserDelegate {
    var counts: [String: Int] = [:]

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName: String?, attributes: [String: String] = [:]) {
        counts[elementName, default: 0] += 1
    }
}
