import Foundation

/// Runs workloads: warm-up rounds, then measured rounds with every contender once per round in
/// a rotating order, then one untimed memory run per contender.
@MainActor
final class Runner {
    let bench: Bench
    let warmupRounds: Int
    let measuredRounds: Int
    let contenderFilter: Set<Contender>?
    let measuresMemory: Bool

    init(bench: Bench, warmupRounds: Int, measuredRounds: Int, contenderFilter: Set<Contender>?, measuresMemory: Bool) {
        self.bench = bench
        self.warmupRounds = warmupRounds
        self.measuredRounds = measuredRounds
        self.contenderFilter = contenderFilter
        self.measuresMemory = measuresMemory
    }

    func run(_ workload: any Workload) async throws -> WorkloadResult {
        var result = WorkloadResult(id: workload.id, title: workload.title, available: workload.unavailableReason == nil,
                                    unavailableReason: workload.unavailableReason, memoryNote: workload.memoryNote)
        guard workload.unavailableReason == nil else { return result }
        let contenders = workload.contenders.filter { contenderFilter?.contains($0) ?? true }
        let labels = contenders.filter { workload.label(for: $0) != $0.label }.map { ($0.rawValue, workload.label(for: $0)) }
        if !labels.isEmpty { result.labels = Dictionary(uniqueKeysWithValues: labels) }
        guard !contenders.isEmpty else { return result }

        let started = monotonicNanoseconds()
        progress("\(workload.id): preparing")
        try workload.prepare(bench)
        var rounds: [Contender: [[String: Double]]] = [:]
        let total = warmupRounds + measuredRounds
        for index in 0..<total {
            let label = index < warmupRounds ? "warm-up \(index + 1)/\(warmupRounds)" : "round \(index - warmupRounds + 1)/\(measuredRounds)"
            progress("\(workload.id): \(label)")
            // Rotate the order, so that no contender always runs first (or right after another).
            let offset = index % contenders.count
            for contender in contenders[offset...] + contenders[..<offset] {
                let values = try await workload.run(contender, Round(index: index, meter: nil))
                if index >= warmupRounds { rounds[contender, default: []].append(values) }
            }
        }
        result.metrics = workload.metrics.map { MetricResult(metric: $0, rounds: rounds) }.filter { !$0.contenders.isEmpty }

        if measuresMemory {
            progress("\(workload.id): memory runs")
            for contender in contenders {
                let meter = HeapMeter()
                defer { meter.stop() }
                _ = try await workload.run(contender, Round(index: -1, meter: meter))
                let reading = meter.reading
                result.memory[contender.rawValue] = MemoryResult(peakGrowthBytes: reading.peakGrowth, retainedBytes: reading.retained, samples: reading.samples)
            }
        }
        result.notes = workload.notes(result)
        progress("\(workload.id): done in \(Format.seconds(seconds(since: started)))")
        return result
    }

    private func progress(_ text: String) {
        FileHandle.standardError.write(Data("[loom-bench] \(text)\n".utf8))
    }
}
