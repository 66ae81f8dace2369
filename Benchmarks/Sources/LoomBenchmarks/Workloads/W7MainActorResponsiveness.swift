import Foundation
import GRDB
import Loom

/// W7: while a background writer imports more objects in saves of 1,000, the main actor runs a
/// 50-row query loop and a 1 ms ticker.
///
/// "largest stall" is the longest gap between two ticks of a task that sleeps 1 ms at a time on
/// the main actor (so 1 ms plus timer slack when nothing blocks it; a query in progress also
/// delays it). The query is W3's, on categories the import does not touch, so it keeps
/// returning ~50 rows; its p50 and p99 are over every query run during the import. Raw SQLite
/// runs the same query on its own connection on the main actor while a thread imports through
/// another connection; GRDB reads with `pool.read` and imports with `pool.write`; Loom queries
/// the view context while a background context imports. GRDB's record path is left out here.
final class MainActorResponsiveness: Workload {
    let id = "W7"
    var title = "Main-actor responsiveness during a background import"
    let contenders: [Contender] = [.raw, .grdb, .loom]
    let metrics = [
        Metric(key: "stall", label: "largest main-actor stall", target: .worst(0.016)),
        Metric(key: "p50", label: "query p50 under import"),
        Metric(key: "p99", label: "query p99 under import", target: .ratioToRaw(2)),
        Metric(key: "max", label: "slowest query"),
        Metric(key: "import", label: "import time"),
    ]
    private var bench: Bench!
    private var importItems: [ItemData] = []

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        let sizes = bench.sizes
        importItems = bench.dataset.importItems(count: sizes.importObjects, startID: Int64(sizes.objects + 1))
        title = "Main actor: 50-row queries + 1 ms ticker while a background context imports \(Format.count(sizes.importObjects)) objects in saves of \(Format.count(sizes.importBatch))"
    }

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W7-\(contender.rawValue)")
        defer { bench.remove(path) }
        let meter = round.meter
        let queries = bench.dataset.queries
        let importItems = self.importItems
        let batch = bench.sizes.importBatch
        let flag = DoneFlag()
        let importTime = SharedSamples()
        let foreground: (stall: Double, latencies: [Double])
        switch contender {
        case .raw:
            let reader = try RawDatabase(path: path)
            let writer = try RawDatabase(path: path)
            let statement = try reader.prepare(ItemSQL.selectRange)
            _ = try statement.items(matching: queries[0])
            meter?.begin()
            startThread("W7 raw import") {
                let start = monotonicNanoseconds()
                do {
                    for offset in stride(from: 0, to: importItems.count, by: batch) {
                        try writer.insert(importItems[offset..<min(offset + batch, importItems.count)])
                    }
                    importTime.append(contentsOf: [seconds(since: start)])
                    flag.finish()
                } catch {
                    flag.finish(error: error)
                }
            }
            foreground = try await runForeground(until: flag) { i in
                let items = try statement.items(matching: queries[i % queries.count])
                return items.checksum
            }
            meter?.end()
        case .grdb:
            let pool = try BenchSettings.openPool(path)
            _ = try blockingRead(pool) { try $0.items(matching: queries[0]) }
            meter?.begin()
            startThread("W7 GRDB import") {
                let start = monotonicNanoseconds()
                do {
                    for offset in stride(from: 0, to: importItems.count, by: batch) {
                        try pool.write { db in
                            let statement = try db.cachedStatement(sql: ItemSQL.insert)
                            for item in importItems[offset..<min(offset + batch, importItems.count)] {
                                statement.setUncheckedArguments(item.insertArguments)
                                try statement.execute()
                            }
                        }
                    }
                    importTime.append(contentsOf: [seconds(since: start)])
                    flag.finish()
                } catch {
                    flag.finish(error: error)
                }
            }
            foreground = try await runForeground(until: flag) { i in
                let items = try pool.read { try $0.items(matching: queries[i % queries.count]) }
                return items.checksum
            }
            meter?.end()
            try pool.close()
        case .grdbRecord, .fluent:
            return [:]
        case .loom:
            let container = try PersistentContainer.bench(at: path)
            let context = container.viewContext
            _ = try context.fetch(.matching(queries[0]))
            let importer = container.newBackgroundContext(name: "W7 import")
            meter?.begin()
            startThread("W7 Loom import") {
                let start = monotonicNanoseconds()
                do {
                    try importer.performAndWait { context in
                        for offset in stride(from: 0, to: importItems.count, by: batch) {
                            for item in importItems[offset..<min(offset + batch, importItems.count)] {
                                context.insert(Item(item))
                            }
                            try context.save()
                        }
                    }
                    importTime.append(contentsOf: [seconds(since: start)])
                    flag.finish()
                } catch {
                    flag.finish(error: error)
                }
            }
            foreground = try await runForeground(until: flag) { i in
                try context.fetch(.matching(queries[i % queries.count])).checksum
            }
            meter?.end()
            try await container.close()
        }
        try flag.check()
        let sorted = foreground.latencies.sorted()
        return [
            "stall": foreground.stall,
            "p50": Statistics.percentile(sorted: sorted, 0.5),
            "p99": Statistics.percentile(sorted: sorted, 0.99),
            "max": sorted.last ?? 0,
            "import": importTime.all.first ?? 0,
            "queries": Double(sorted.count),
        ]
    }

    /// Runs `query` in a loop on the main actor, yielding between queries, next to a ticker
    /// that sleeps 1 ms at a time, until `flag` is set. Returns the largest gap between ticks
    /// and every query's latency.
    private func runForeground(until flag: DoneFlag, _ query: (Int) throws -> Int) async throws -> (stall: Double, latencies: [Double]) {
        let ticker = Task { @MainActor () -> UInt64 in
            var last = monotonicNanoseconds()
            var largest: UInt64 = 0
            while !flag.isDone {
                try? await Task.sleep(for: .milliseconds(1))
                let now = monotonicNanoseconds()
                largest = max(largest, now - last)
                last = now
            }
            return largest
        }
        var latencies: [Double] = []
        var i = 0
        while !flag.isDone {
            let start = monotonicNanoseconds()
            blackHole(try query(i))
            latencies.append(seconds(since: start))
            i += 1
            await Task.yield()
        }
        let largest = await ticker.value
        return (Double(largest) / 1e9, latencies)
    }
}

/// GRDB's blocking `read`, from an async function (where `pool.read` means the async one).
func blockingRead<T>(_ pool: DatabasePool, _ body: (Database) throws -> T) throws -> T {
    try pool.read(body)
}
