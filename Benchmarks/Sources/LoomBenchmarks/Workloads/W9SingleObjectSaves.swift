import Foundation
import GRDB
import Loom

/// W9: one new object per save, many times over, into a new file: with `synchronous=NORMAL`
/// (every contender's default in WAL mode) and with `FULL` (a sync of the WAL per commit).
///
/// Each save is timed alone, creating the object included: an autocommitted prepared INSERT
/// (raw SQLite), `pool.write` with a cached statement (GRDB) or `record.insert(db)` (GRDB
/// record), `context.insert` + `context.save()` on the view context (Loom).
final class SingleObjectSaves: SynchronousWorkload {
    let id = "W9"
    var title = "Single-object saves"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord] + fluentContenders + [.loom]
    let metrics = [
        Metric(key: "normal.p50", label: "NORMAL save p50", target: .median(50e-6)),
        Metric(key: "normal.p99", label: "NORMAL save p99"),
        Metric(key: "full.p50", label: "FULL save p50"),
        Metric(key: "full.p99", label: "FULL save p99"),
    ]
    var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        let sizes = bench.sizes
        title = "Single-object saves: \(Format.count(sizes.singleSavesNormal)) with synchronous=NORMAL, \(Format.count(sizes.singleSavesFull)) with FULL (new file each)"
    }

    func notes(_ result: WorkloadResult) -> [String] {
        guard let rawNormal = result.median("normal.p50", .raw), let rawFull = result.median("full.p50", .raw),
              let loomNormal = result.median("normal.p50", .loom), let loomFull = result.median("full.p50", .loom),
              rawFull > 4 * rawNormal, loomFull < 2 * loomNormal else { return [] }
        return [
            "Loom's FULL saves take about as long as its NORMAL ones (\(Format.seconds(loomFull)) vs \(Format.seconds(loomNormal))) while raw SQLite's take \(Format.ratio(rawFull / rawNormal)) longer: SQLiteStore.Options(synchronous: .full) is not in effect on Loom's writer connection (GRDB's DatabasePool sets synchronous=NORMAL on its writer after prepareDatabase runs). See Benchmarks/README.md.",
        ]
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        var result: [String: Double] = [:]
        round.meter?.begin()
        for (mode, count) in [("normal", bench.sizes.singleSavesNormal), ("full", bench.sizes.singleSavesFull)] {
            let path = bench.newDatabasePath("W9-\(contender.rawValue)-\(mode)")
            defer { bench.remove(path) }
            let latencies = try saves(contender, path: path, full: mode == "full", items: bench.dataset.items.prefix(count))
            let sorted = latencies.sorted()
            result["\(mode).p50"] = Statistics.percentile(sorted: sorted, 0.5)
            result["\(mode).p99"] = Statistics.percentile(sorted: sorted, 0.99)
        }
        round.meter?.end()
        return result
    }

    private func saves(_ contender: Contender, path: String, full: Bool, items: ArraySlice<ItemData>) throws -> [Double] {
        var latencies: [Double] = []
        latencies.reserveCapacity(items.count)
        let synchronous = full ? "FULL" : "NORMAL"
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path, synchronous: synchronous)
            try db.createSchema()
            let statement = try db.prepare(ItemSQL.insert)
            for item in items {
                let start = monotonicNanoseconds()
                statement.bindItem(item)
                try statement.run()
                latencies.append(seconds(since: start))
            }
        case .grdb, .grdbRecord:
            let pool = try BenchSettings.openPool(path, synchronous: synchronous)
            try pool.write { try $0.createItemSchema() }
            for item in items {
                let start = monotonicNanoseconds()
                if contender == .grdbRecord {
                    let record = ItemRecord(item)
                    try pool.write { try record.insert($0) }
                } else {
                    try pool.write { db in
                        let statement = try db.cachedStatement(sql: ItemSQL.insert)
                        statement.setUncheckedArguments(item.insertArguments)
                        try statement.execute()
                    }
                }
                latencies.append(seconds(since: start))
            }
            try pool.close()
        case .fluent:
            latencies = try fluentSingleSaves(path: path, full: full, items: items)
        case .loom:
            latencies = try Self.loomSaves(try PersistentContainer.bench(at: path, synchronous: full ? .full : .normal), items)
        }
        return latencies
    }

    /// Loom's single-object saves on any store (W9 on SQLite, PG-W9 on PostgreSQL), each timed;
    /// closes the container.
    static func loomSaves(_ container: PersistentContainer, _ items: ArraySlice<ItemData>) throws -> [Double] {
        var latencies: [Double] = []
        latencies.reserveCapacity(items.count)
        let context = container.viewContext
        for item in items {
            let start = monotonicNanoseconds()
            context.insert(Item(item))
            try context.save()
            latencies.append(seconds(since: start))
        }
        try container.closeAndWait()
        return latencies
    }
}
