import Foundation
import GRDB
import Loom

/// W1: create M new objects and save them in one transaction, into a new file.
///
/// "create" turns the seed values into each contender's own values: plain structs for raw
/// SQLite and GRDB's fast path, `Codable` records for GRDB's record path, `@Model` objects
/// inserted into a context for Loom. "save" writes them: one transaction of prepared,
/// reused INSERTs (raw, GRDB), `record.insert(db)` per record, `context.save()`.
final class InsertAndSave: SynchronousWorkload {
    let id = "W1"
    var title = "Insert M objects and save once (new file each round)"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord] + fluentContenders + [.loom]
    let metrics = [
        Metric(key: "create", label: "create"),
        Metric(key: "save", label: "save"),
        Metric(key: "total", label: "create + save", target: .ratioToRaw(3)),
    ]
    var items: [ItemData] = []
    var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        items = bench.dataset.items
        title = "Insert \(Format.count(items.count)) objects and save once (new file each round)"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = bench.newDatabasePath("W1-\(contender.rawValue)")
        defer { bench.remove(path) }
        let meter = round.meter
        let items = self.items
        let create: Double, save: Double
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path)
            try db.createSchema()
            meter?.begin()
            let (rows, c) = timed { items.map { $0 } }
            let (_, s) = try timed { try db.insert(rows) }
            meter?.end()
            (create, save) = (c, s)
        case .grdb:
            let pool = try BenchSettings.openPool(path)
            try pool.write { try $0.createItemSchema() }
            meter?.begin()
            let (rows, c) = timed { items.map { $0 } }
            let (_, s) = try timed {
                try pool.write { db in
                    let statement = try db.makeStatement(sql: ItemSQL.insert)
                    for row in rows {
                        statement.setUncheckedArguments(row.insertArguments)
                        try statement.execute()
                    }
                }
            }
            meter?.end()
            try pool.close()
            (create, save) = (c, s)
        case .grdbRecord:
            let pool = try BenchSettings.openPool(path)
            try pool.write { try $0.createItemSchema() }
            meter?.begin()
            let (records, c) = timed { items.map(ItemRecord.init) }
            let (_, s) = try timed {
                try pool.write { db in
                    for record in records { try record.insert(db) }
                }
            }
            meter?.end()
            try pool.close()
            (create, save) = (c, s)
        case .fluent:
            return try runFluentRound(of: self, round, path: path)
        case .loom:
            (create, save) = try Self.loomRound(try PersistentContainer.bench(at: path), items, meter)
        }
        return ["create": create, "save": save, "total": create + save]
    }

    /// Loom's round on any store (W1 on SQLite, PG-W1 on PostgreSQL): inserts, saves, closes.
    static func loomRound(_ container: PersistentContainer, _ items: [ItemData], _ meter: HeapMeter?) throws -> (create: Double, save: Double) {
        let context = container.viewContext
        meter?.begin()
        let start = monotonicNanoseconds()
        for item in items { context.insert(Item(item)) }
        let create = seconds(since: start)
        let (_, save) = try timed { try context.save() }
        meter?.end()
        try container.closeAndWait()
        return (create, save)
    }
}
