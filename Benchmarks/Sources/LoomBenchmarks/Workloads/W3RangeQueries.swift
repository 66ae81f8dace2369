import Foundation
import GRDB
import Loom

/// W3: 1,000 different parameterized queries — one category, a score range, ordered by
/// score — each returning about 50 rows, every attribute of which is read.
///
/// Raw SQLite binds a reused prepared statement; GRDB's fast path a cached statement; GRDB's
/// record path builds the query with its query interface; Loom builds a `FetchRequest` with a
/// `#Predicate` and a `SortDescriptor` per query and fetches with the default request settings
/// (faults, which reading the attributes fires from the rows the fetch cached). An index on
/// (category, score) serves every contender. Loom also runs the queries on a context pinned to
/// a query generation (`pinnedP50`), which reads through its own connection's open read
/// transaction and does not fill the shared row cache.
final class RangeQueries: SynchronousWorkload {
    let id = "W3"
    let title = "1,000 different predicate + sort queries, ~50 rows each, every attribute read"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord] + fluentContenders + [.loom]
    let metrics = [
        Metric(key: "p50", label: "query p50", target: .ratioToRaw(2)),
        Metric(key: "p99", label: "query p99"),
        Metric(key: "total", label: "1,000 queries"),
        // Loom only: the same queries on a context pinned to a query generation (issue 12:
        // within 5% of Loom's own p50).
        Metric(key: "pinnedP50", label: "query p50, pinned (Loom)"),
    ]
    var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W3-\(contender.rawValue)")
        defer { bench.remove(path) }
        let meter = round.meter
        let queries = bench.dataset.queries
        var times: [Double] = []
        times.reserveCapacity(queries.count)
        var rows = 0
        var pinned: Double?
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path)
            _ = try db.scalar(ItemSQL.count)
            meter?.begin()
            let statement = try db.prepare(ItemSQL.selectRange)
            for query in queries {
                let start = monotonicNanoseconds()
                let items = try statement.items(matching: query)
                blackHole(items.checksum)
                times.append(seconds(since: start))
                rows += items.count
            }
            meter?.end()
        case .grdb, .grdbRecord:
            let pool = try BenchSettings.openPool(path)
            _ = try pool.read { try Int.fetchOne($0, sql: ItemSQL.count) }
            meter?.begin()
            for query in queries {
                let start = monotonicNanoseconds()
                let count: Int
                if contender == .grdbRecord {
                    let records = try pool.read { try ItemRecord.matching(query).fetchAll($0) }
                    blackHole(records.checksum)
                    count = records.count
                } else {
                    let items = try pool.read { try $0.items(matching: query) }
                    blackHole(items.checksum)
                    count = items.count
                }
                times.append(seconds(since: start))
                rows += count
            }
            meter?.end()
            try pool.close()
        case .fluent:
            return try runFluentRound(of: self, round, path: path)
        case .loom:
            // The queries on a context reading the latest data, and (not under the memory
            // meter) on one pinned to a query generation, each on a container of its own; which
            // goes first alternates with the round.
            var pinnedTimes: [Double] = []
            func run(pinned: Bool) throws {
                try Self.loomQueries(try PersistentContainer.bench(at: path), queries, pinned: pinned, meter: meter) { time, count in
                    if pinned {
                        pinnedTimes.append(time)
                    } else {
                        times.append(time)
                        rows += count
                    }
                }
            }
            for pinned in round.index % 2 == 0 ? [false, true] : [true, false] where !pinned || meter == nil {
                try run(pinned: pinned)
            }
            if !pinnedTimes.isEmpty {
                pinned = Statistics.percentile(sorted: pinnedTimes.sorted(), 0.5)
            }
        }
        let sorted = times.sorted()
        var result = [
            "p50": Statistics.percentile(sorted: sorted, 0.5),
            "p99": Statistics.percentile(sorted: sorted, 0.99),
            "total": times.reduce(0, +),
            "rows": Double(rows) / Double(queries.count),
        ]
        if let pinned { result["pinnedP50"] = pinned }
        return result
    }

    /// Loom's queries on any store (W3 on SQLite, PG-W3 on PostgreSQL) on the container's view
    /// context, pinned to a query generation or not; `record` gets each query's time and rows.
    /// Closes the container.
    static func loomQueries(_ container: PersistentContainer, _ queries: [RangeQuery], pinned: Bool, meter: HeapMeter?,
                            record: (Double, Int) -> Void) throws {
        let context = container.viewContext
        if pinned { try context.setQueryGenerationFrom(.current) }
        _ = try context.count(for: FetchRequest<Item>())
        if !pinned { meter?.begin() }
        for query in queries {
            let start = monotonicNanoseconds()
            let objects = try context.fetch(.matching(query))
            blackHole(objects.checksum)
            record(seconds(since: start), objects.count)
        }
        if !pinned { meter?.end() }
        try container.closeAndWait()
    }
}
