/// Median, minimum and p99 of one contender's rounds on one metric.
struct Summary: Codable, Sendable {
    var median: Double
    var min: Double
    /// Nearest-rank p99 over rounds: with fewer than 100 rounds, the worst round.
    var p99: Double
    /// Every measured round, in order.
    var rounds: [Double]

    init(_ rounds: [Double]) {
        self.rounds = rounds
        median = Statistics.median(rounds)
        min = rounds.min() ?? 0
        p99 = Statistics.percentile(rounds, 0.99)
    }
}

/// How Loom did against a target.
struct TargetResult: Codable, Sendable {
    var kind: Target.Kind
    var target: String
    /// The figure compared with the limit (a ratio, seconds or bytes).
    var value: Double
    var passed: Bool
    /// The target's limit (``Target/limit``), for the chart; older JSON files have none.
    var limit: Double? = nil
}

struct MetricResult: Codable, Sendable {
    var key: String
    var label: String
    var unit: Metric.Unit
    /// By contender (`raw`, `grdb`, `grdb-record`, `loom`).
    var contenders: [String: Summary]
    /// Loom's value ÷ each other contender's, per round, median over rounds.
    var loomRatios: [String: Double]
    var target: TargetResult?
}

struct MemoryResult: Codable, Sendable {
    var peakGrowthBytes: Int64
    var retainedBytes: Int64
    var samples: Int
}

struct WorkloadResult: Codable, Sendable {
    var id: String
    var title: String
    var available: Bool
    var unavailableReason: String?
    var memoryNote: String?
    /// Contender names where this workload's differ from the usual ones (by `Contender` raw value).
    var labels: [String: String]? = nil
    var metrics: [MetricResult] = []
    var memory: [String: MemoryResult] = [:]
    var notes: [String] = []

    func label(_ contender: Contender) -> String { labels?[contender.rawValue] ?? contender.label }

    /// A contender's median on a metric.
    func median(_ key: String, _ contender: Contender) -> Double? {
        metrics.first { $0.key == key }?.contenders[contender.rawValue]?.median
    }
}

extension MetricResult {
    init(metric: Metric, rounds: [Contender: [[String: Double]]]) {
        key = metric.key
        label = metric.label
        unit = metric.unit
        var series: [Contender: [Double?]] = [:]
        for (contender, values) in rounds {
            let column = values.map { $0[metric.key] }
            if column.contains(where: { $0 != nil }) { series[contender] = column }
        }
        contenders = Dictionary(uniqueKeysWithValues: series.map { ($0.key.rawValue, Summary($0.value.compactMap { $0 })) })
        loomRatios = [:]
        if let loom = series[.loom] {
            for (contender, other) in series where contender != .loom {
                let ratios = zip(loom, other).compactMap { l, o -> Double? in
                    guard let l, let o, o > 0 else { return nil }
                    return l / o
                }
                if !ratios.isEmpty { loomRatios[contender.rawValue] = Statistics.median(ratios) }
            }
        }
        target = metric.target.flatMap { evaluate($0) }
    }

    private func evaluate(_ target: Target) -> TargetResult? {
        let value: Double?
        switch target.kind {
        case .maxRatioToRaw, .minRatioToRaw: value = loomRatios[Contender.raw.rawValue]
        case .maxRatioToContender: value = target.contender.flatMap { loomRatios[$0.rawValue] }
        case .maxMedian: value = contenders[Contender.loom.rawValue]?.median
        case .maxWorst: value = contenders[Contender.loom.rawValue]?.rounds.max()
        }
        guard let value else { return nil }
        let passed = target.kind == .minRatioToRaw ? value >= target.limit : value <= target.limit
        return TargetResult(kind: target.kind, target: target.description, value: value, passed: passed, limit: target.limit)
    }
}
