import Foundation
import GRDB
import Loom

/// W10: open a store of M objects and fetch the first 100 (every attribute read); then the heap
/// each materialized object keeps.
///
/// The store file was just copied, so it is in the OS page cache: this is a warm open, not a
/// cold disk read. Opening is `sqlite3_open_v2` with the pragmas (raw), `DatabasePool(path:)`
/// (GRDB), `PersistentContainer(name:for:location:)` (Loom: it checks the file's header and
/// saved schema, then opens the pool). "bytes/object" fetches all M objects after one
/// full fetch has warmed the page cache, keeps them, and divides the heap growth by M: plain
/// structs (raw SQLite, GRDB), a GRDB *class* record decoded by index (the GRDB record row),
/// and for Loom objects with every attribute loaded (`returnsObjectsAsFaults = false`), their
/// registration in the context included; "as faults" is Loom's default fetch with nothing
/// read, the rows it puts in the coordinator's shared cache included.
final class OpenAndFirstFetch: SynchronousWorkload {
    let id = "W10"
    var title = "Open a store of M objects, fetch the first 100; memory per materialized object"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord, .loom]
    let metrics = [
        Metric(key: "open", label: "open", target: .median(0.010)),
        Metric(key: "fetch", label: "first 100-object fetch"),
        Metric(key: "total", label: "open + fetch"),
        Metric(key: "perObject", label: "bytes/object (loaded)", unit: .bytes, target: Target(kind: .maxRatioToContender, limit: 2, contender: .grdbRecord)),
        Metric(key: "perFault", label: "bytes/object (as faults)", unit: .bytes),
    ]
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        title = "Open a store of \(Format.count(bench.sizes.objects)) objects, fetch the first 100; heap per materialized object"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W10-\(contender.rawValue)")
        defer { bench.remove(path) }
        let meter = round.meter
        let count = Double(bench.sizes.objects)
        var result: [String: Double] = [:]
        switch contender {
        case .raw:
            meter?.begin()
            let (db, open) = try timed { try RawDatabase(path: path) }
            let (_, fetch) = try timed { blackHole(try db.prepare(ItemSQL.selectFirst100).items().checksum) }
            meter?.end()
            result = ["open": open, "fetch": fetch, "total": open + fetch]
            if meter == nil {
                let statement = try db.prepare(ItemSQL.selectAll)
                blackHole(try statement.items())
                result["perObject"] = try heapGrowth { try statement.items() } / count
            }
        case .grdb, .grdbRecord:
            meter?.begin()
            let (pool, open) = try timed { try BenchSettings.openPool(path) }
            let (_, fetch) = try timed {
                if contender == .grdbRecord {
                    blackHole(try pool.read { try ItemRecord.order(Column("id")).limit(100).fetchAll($0) }.checksum)
                } else {
                    blackHole(try pool.read { try $0.items(ItemSQL.selectFirst100) }.checksum)
                }
            }
            meter?.end()
            result = ["open": open, "fetch": fetch, "total": open + fetch]
            if meter == nil {
                if contender == .grdbRecord {
                    let fetchAll = { try pool.read { try ItemClassRecord.fetchAll($0, sql: ItemSQL.selectAll) } }
                    blackHole(try fetchAll())
                    result["perObject"] = try heapGrowth(fetchAll) / count
                } else {
                    let fetchAll = { try pool.read { try $0.items(ItemSQL.selectAll) } }
                    blackHole(try fetchAll())
                    result["perObject"] = try heapGrowth(fetchAll) / count
                }
            }
            try pool.close()
        case .fluent:
            throw BenchError("W10 has no Fluent contender")
        case .loom:
            meter?.begin()
            let (container, open) = try timed { try PersistentContainer.bench(at: path) }
            let (_, fetch) = try timed {
                blackHole(try container.viewContext.fetch(FetchRequest<Item>(fetchLimit: 100)).checksum)
            }
            meter?.end()
            result = ["open": open, "fetch": fetch, "total": open + fetch]
            if meter == nil {
                var loaded = FetchRequest<Item>()
                loaded.returnsObjectsAsFaults = false
                try container.newBackgroundContext(name: "warm-up").performAndWait { blackHole(try $0.fetch(loaded).checksum) }
                // Measured inside a new context's queue, so that its registry is counted and the
                // objects are alive when the heap is read.
                result["perObject"] = try container.newBackgroundContext(name: "W10 loaded").performAndWait { context in
                    let before = heapInUse()
                    let objects = try context.fetch(loaded)
                    blackHole(objects.checksum)
                    let after = heapInUse()
                    blackHole(objects)
                    return Double(Int64(after) - Int64(before)) / count
                }
                result["perFault"] = try container.newBackgroundContext(name: "W10 faults").performAndWait { context in
                    let before = heapInUse()
                    let objects = try context.fetch(FetchRequest<Item>())
                    let after = heapInUse()
                    blackHole(objects)
                    return Double(Int64(after) - Int64(before)) / count
                }
            }
            try container.closeAndWait()
        }
        return result
    }

    /// The heap growth while what `body` returns is alive.
    private func heapGrowth<T>(_ body: () throws -> T) rethrows -> Double {
        let before = heapInUse()
        let value = try body()
        let after = heapInUse()
        blackHole(value)
        return Double(Int64(after) - Int64(before))
    }
}
