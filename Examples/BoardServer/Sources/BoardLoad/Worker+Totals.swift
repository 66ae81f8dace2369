extension Worker {
    /// What every worker of a run counted, added up.
    struct Totals {
        var samples: [OperationKind: [Double]] = [:]
        var errors: [String: Int] = [:]
        var requests = 0
        var operations = 0
        var conflicts = 0
        var unknown = 0
        var byServer: [Int: (requests: Int, successes: Int)] = [:]
        var violations: [String] = []
        var timeline: [Int: (ok: Int, failed: Int)] = [:]

        mutating func add(_ worker: Worker) {
            samples.merge(worker.latencies) { $0 + $1 }
            errors.merge(worker.errors) { $0 + $1 }
            requests += worker.requests
            operations += worker.operations
            conflicts += worker.conflicts
            unknown += worker.unknown
            for (server, count) in worker.requestsByServer { byServer[server, default: (0, 0)].requests += count }
            for (server, count) in worker.successesByServer { byServer[server, default: (0, 0)].successes += count }
            violations += worker.violations
            for (tenth, counts) in worker.timeline {
                timeline[tenth, default: (0, 0)].ok += counts.ok
                timeline[tenth, default: (0, 0)].failed += counts.failed
            }
        }

        /// The latencies of each kind that ran, in ``OperationKind/allCases`` order.
        func latencies() -> [LoadReport.Latency] {
            OperationKind.allCases.compactMap { kind in
                guard let values = samples[kind]?.sorted(), !values.isEmpty else { return nil }
                return LoadReport.Latency(
                    kind: kind, count: values.count, p50: Self.percentile(0.50, of: values),
                    p99: Self.percentile(0.99, of: values), max: values[values.count - 1])
            }
        }

        /// Every tenth of a second from the start to the last answer, in order.
        func tenths() -> [LoadReport.Tenth] {
            guard let last = timeline.keys.max() else { return [] }
            return (0...last).map { LoadReport.Tenth(ok: timeline[$0]?.ok ?? 0, failed: timeline[$0]?.failed ?? 0) }
        }

        func requestsByServer(_ count: Int) -> [Int] { (0..<count).map { byServer[$0]?.requests ?? 0 } }
        func successesByServer(_ count: Int) -> [Int] { (0..<count).map { byServer[$0]?.successes ?? 0 } }

        /// The nearest-rank percentile `q` (0…1) of `sorted`, which is not empty.
        static func percentile(_ q: Double, of sorted: [Double]) -> Double {
            let rank = Int((q * Double(sorted.count)).rounded(.up))
            return sorted[min(sorted.count - 1, max(0, rank - 1))]
        }
    }
}
