/// One benchmark: what it measures, who takes part, and one round of it for one contender.
///
/// The runner calls ``prepare(_:)`` once, then ``run(_:_:)`` for every contender in every
/// round (warm-up rounds first, contenders interleaved and their order rotated each round),
/// then once more per contender with a ``HeapMeter`` for memory. A round returns a value per
/// metric; a contender may leave out a metric that means nothing for it.
@MainActor
protocol Workload: AnyObject {
    /// `W1`, `W2`…
    var id: String { get }
    var title: String { get }
    var contenders: [Contender] { get }
    var metrics: [Metric] { get }
    /// What the memory column means for this workload.
    var memoryNote: String { get }
    /// Why the workload cannot run yet, or `nil` when it can.
    var unavailableReason: String? { get }

    func prepare(_ bench: Bench) throws
    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double]
    /// Remarks on a finished result worth printing under the workload's table.
    func notes(_ result: WorkloadResult) -> [String]
    /// What the table calls `contender` in this workload (the PostgreSQL workloads' `raw` is
    /// postgres-nio, their `loom` Loom on PostgreSQL).
    func label(for contender: Contender) -> String
}

/// A workload whose rounds block the main actor from start to end (all but W7). Its body is
/// synchronous, which also makes GRDB's `read` and `write` resolve to their blocking forms.
@MainActor
protocol SynchronousWorkload: Workload {
    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double]
}

extension SynchronousWorkload {
    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        try measure(contender, round)
    }
}

extension Workload {
    func notes(_ result: WorkloadResult) -> [String] { [] }
    func label(for contender: Contender) -> String { contender.label }
    var unavailableReason: String? { nil }
    var memoryNote: String { "peak heap growth during the timed part of one untimed run" }
}

/// One run of a workload by one contender.
struct Round {
    /// 0-based over warm-up and measured rounds; -1 for the memory run.
    var index: Int
    /// Set only for the memory run: workloads call `begin()` just before their timed part and
    /// `end()` just after it, while what it produced is still alive.
    var meter: HeapMeter?
}

/// A figure a workload reports, with the target Loom should meet, if any.
struct Metric {
    enum Unit: String, Codable { case seconds, operationsPerSecond = "ops/s", bytes, count }

    var key: String
    var label: String
    var unit: Unit = .seconds
    var target: Target?

    var higherIsBetter: Bool { unit == .operationsPerSecond }
}

/// A goal for Loom on one metric.
struct Target: Codable {
    enum Kind: String, Codable {
        /// Loom's value ÷ raw SQLite's in the same round, median over rounds, at most `limit`.
        case maxRatioToRaw
        /// The same ratio at least `limit` (throughput).
        case minRatioToRaw
        /// Loom's value ÷ another contender's, median over rounds, at most `limit`.
        case maxRatioToContender
        /// Loom's median at most `limit` (seconds or bytes).
        case maxMedian
        /// Loom's worst round at most `limit`.
        case maxWorst
    }

    var kind: Kind
    var limit: Double
    var contender: Contender? = nil

    var description: String {
        switch kind {
        case .maxRatioToRaw: "≤ \(Format.ratio(limit)) raw"
        case .minRatioToRaw: "≥ \(Format.percent(limit)) raw"
        case .maxRatioToContender: "≤ \(Format.ratio(limit)) \(contender?.label ?? "?")"
        case .maxMedian: "median ≤ \(Format.seconds(limit))"
        case .maxWorst: "worst ≤ \(Format.seconds(limit))"
        }
    }

    static func ratioToRaw(_ limit: Double) -> Target { Target(kind: .maxRatioToRaw, limit: limit) }
    static func atLeastOfRaw(_ limit: Double) -> Target { Target(kind: .minRatioToRaw, limit: limit) }
    static func median(_ limit: Double) -> Target { Target(kind: .maxMedian, limit: limit) }
    static func worst(_ limit: Double) -> Target { Target(kind: .maxWorst, limit: limit) }
}
