import Foundation
import GRDB
import Loom

/// W2: fetch all M objects of a populated store.
///
/// (a) Loom returns faults (`returnsObjectsAsFaults = true`) and no attribute is read;
/// (b) every attribute of every object is read: with `returnsObjectsAsFaults = false`, and
/// with faults fired one by one (the default request). "cold" is the first fetch in a new
/// context; "warm" fetches again in the same context while the first result is alive, so
/// every object is already registered. Raw SQLite and GRDB have no faults: in (a) and (b)
/// alike they decode every row into values (structs or records), (b) also reads them; their
/// "cold" prepares the statement, "warm" reuses it. Every contender's connection has run one
/// query first, so connection set-up is not timed.
final class FetchAll: SynchronousWorkload {
    let id = "W2"
    var title = "Fetch all M objects"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord] + fluentContenders + [.loom]
    let metrics = [
        Metric(key: "a.cold", label: "(a) faults, cold", target: .ratioToRaw(1.5)),
        Metric(key: "a.warm", label: "(a) faults, warm", target: .ratioToRaw(1.5)),
        Metric(key: "b.cold", label: "(b) read all, cold", target: .ratioToRaw(2)),
        Metric(key: "b.warm", label: "(b) read all, warm", target: .ratioToRaw(2)),
        Metric(key: "b.faults", label: "(b) via faults, cold", target: .ratioToRaw(2)),
    ]
    var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        title = "Fetch all \(Format.count(bench.sizes.objects)) objects: (a) as faults, (b) reading every attribute"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W2-\(contender.rawValue)")
        defer { bench.remove(path) }
        let meter = round.meter
        var result: [String: Double] = [:]
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path)
            _ = try db.scalar(ItemSQL.count)
            meter?.begin()
            do {
                // Raw SQLite has no registered objects to keep: the first result goes before the
                // second fetch (Loom's warm fetch keeps it, or there would be nothing registered).
                let (statement, first, cold) = try timed3 { let s = try db.prepare(ItemSQL.selectAll); return (s, try s.items()) }
                blackHole(first)
                let (second, warm) = try timed { try statement.items() }
                blackHole(second)
                result["a.cold"] = cold
                result["a.warm"] = warm
            }
            do {
                let (statement, first, cold) = try timed3 { () throws -> (RawStatement, [ItemData]) in
                    let s = try db.prepare(ItemSQL.selectAll)
                    let items = try s.items()
                    blackHole(items.checksum)
                    return (s, items)
                }
                blackHole(first)
                let (second, warm) = try timed { () throws -> [ItemData] in
                    let items = try statement.items()
                    blackHole(items.checksum)
                    return items
                }
                blackHole(second)
                result["b.cold"] = cold
                result["b.warm"] = warm
            }
            let (_, faults) = try timed { blackHole(try db.prepare(ItemSQL.selectAll).items().checksum) }
            result["b.faults"] = faults
            meter?.end()
        case .grdb, .grdbRecord:
            let pool = try BenchSettings.openPool(path)
            _ = try pool.read { try Int.fetchOne($0, sql: ItemSQL.count) }
            let record = contender == .grdbRecord
            let fetch: @Sendable (Bool) throws -> Int = { reads in
                try pool.read { db in
                    if record {
                        let records = try ItemRecord.order(Column("id")).fetchAll(db)
                        return reads ? records.checksum : records.count
                    }
                    let items = try db.items(ItemSQL.selectAll)
                    return reads ? items.checksum : items.count
                }
            }
            meter?.begin()
            for (key, reads) in [("a.cold", false), ("a.warm", false), ("b.cold", true), ("b.warm", true), ("b.faults", true)] {
                let (value, time) = try timed { try fetch(reads) }
                blackHole(value)
                result[key] = time
            }
            meter?.end()
            try pool.close()
        case .fluent:
            result = try runFluentRound(of: self, round, path: path)
        case .loom:
            result = try Self.loomRound(try PersistentContainer.bench(at: path), meter)
        }
        return result
    }

    /// Loom's round on any store (W2 on SQLite, PG-W2 on PostgreSQL), closing the container.
    static func loomRound(_ container: PersistentContainer, _ meter: HeapMeter?) throws -> [String: Double] {
        _ = try container.newBackgroundContext(name: "primer").performAndWait { try $0.count(for: FetchRequest<Item>()) }
        meter?.begin()
        let (aCold, aWarm) = try container.newBackgroundContext(name: "W2a").performAndWait { context in
            var request = FetchRequest<Item>()
            request.returnsObjectsAsFaults = true
            let (first, cold) = try timed { try context.fetch(request) }
            let (second, warm) = try timed { try context.fetch(request) }
            blackHole((first, second))
            return (cold, warm)
        }
        let (bCold, bWarm) = try container.newBackgroundContext(name: "W2b").performAndWait { context in
            var request = FetchRequest<Item>()
            request.returnsObjectsAsFaults = false
            let (first, cold) = try timed { () throws -> [Item] in
                let objects = try context.fetch(request)
                blackHole(objects.checksum)
                return objects
            }
            let (second, warm) = try timed { () throws -> [Item] in
                let objects = try context.fetch(request)
                blackHole(objects.checksum)
                return objects
            }
            blackHole((first, second))
            return (cold, warm)
        }
        let faults = try container.newBackgroundContext(name: "W2b-faults").performAndWait { context in
            let (objects, time) = try timed { () throws -> [Item] in
                let objects = try context.fetch(FetchRequest<Item>())
                blackHole(objects.checksum)
                return objects
            }
            blackHole(objects)
            return time
        }
        meter?.end()
        try container.closeAndWait()
        return ["a.cold": aCold, "a.warm": aWarm, "b.cold": bCold, "b.warm": bWarm, "b.faults": faults]
    }
}

/// ``timed(_:)`` for a body returning a pair.
@inline(__always)
func timed3<A, B>(_ body: () throws -> (A, B)) rethrows -> (A, B, Double) {
    let ((a, b), time) = try timed(body)
    return (a, b, time)
}
