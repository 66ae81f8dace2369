import Foundation
import GRDB
import Loom

/// W5: change two attributes (score, title) on every tenth of M loaded objects and save.
///
/// Every contender first loads all M objects (untimed). "change" sets the two values: on
/// structs for raw SQLite and GRDB's fast path, on copies of the records for GRDB's record
/// path (which then saves with `updateChanges(db, from: original)`, GRDB's own change
/// tracking), through the generated accessors for Loom. "save" writes them in one
/// transaction: a reused `UPDATE … SET score = ?, title = ? WHERE id = ?` for raw SQLite and
/// GRDB, `context.save()` for Loom (which also checks and bumps its optimistic-locking column).
/// "empty save" is Loom's `save()` with nothing to save, per call, averaged over 10,000 calls.
final class ChangeAndSave: SynchronousWorkload {
    let id = "W5"
    var title = "Change 2 attributes on 10% of M objects and save"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord] + fluentContenders + [.loom]
    let metrics = [
        Metric(key: "change", label: "change"),
        Metric(key: "save", label: "save"),
        Metric(key: "total", label: "change + save", target: .ratioToRaw(3)),
        Metric(key: "empty", label: "empty save (per call)", target: .median(50e-6)),
    ]
    var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        title = "Change 2 attributes on \(Format.count(bench.sizes.objects / 10)) of \(Format.count(bench.sizes.objects)) loaded objects and save; empty save"
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W5-\(contender.rawValue)")
        defer { bench.remove(path) }
        let meter = round.meter
        let titles = bench.dataset.newTitles
        let changed = Array(stride(from: 0, to: bench.sizes.objects, by: 10))
        var result: [String: Double] = [:]
        switch contender {
        case .raw:
            let db = try RawDatabase(path: path)
            var items = try db.prepare(ItemSQL.selectAll).items()
            meter?.begin()
            let (_, change) = timed {
                for (j, i) in changed.enumerated() {
                    items[i].score += 1
                    items[i].title = titles[j]
                }
            }
            let (_, save) = try timed {
                try db.execute("BEGIN IMMEDIATE")
                let statement = try db.prepare(ItemSQL.updateScoreAndTitle)
                for i in changed {
                    statement.bind(items[i].score, at: 1)
                    statement.bind(items[i].title, at: 2)
                    statement.bind(items[i].id, at: 3)
                    try statement.run()
                }
                try db.execute("COMMIT")
            }
            meter?.end()
            blackHole(items)
            result = ["change": change, "save": save, "total": change + save]
        case .grdb:
            let pool = try BenchSettings.openPool(path)
            var items = try pool.read { try $0.items(ItemSQL.selectAll) }
            meter?.begin()
            let (_, change) = timed {
                for (j, i) in changed.enumerated() {
                    items[i].score += 1
                    items[i].title = titles[j]
                }
            }
            let snapshot = items
            let (_, save) = try timed {
                try pool.write { db in
                    let statement = try db.cachedStatement(sql: ItemSQL.updateScoreAndTitle)
                    for i in changed {
                        statement.setUncheckedArguments([snapshot[i].score, snapshot[i].title, snapshot[i].id])
                        try statement.execute()
                    }
                }
            }
            meter?.end()
            blackHole(snapshot)
            try pool.close()
            result = ["change": change, "save": save, "total": change + save]
        case .grdbRecord:
            let pool = try BenchSettings.openPool(path)
            let records = try pool.read { try ItemRecord.order(Column("id")).fetchAll($0) }
            meter?.begin()
            let (pairs, change) = timed { () -> [(ItemRecord, ItemRecord)] in
                var pairs: [(ItemRecord, ItemRecord)] = []
                pairs.reserveCapacity(changed.count)
                for (j, i) in changed.enumerated() {
                    var record = records[i]
                    record.score += 1
                    record.title = titles[j]
                    pairs.append((record, records[i]))
                }
                return pairs
            }
            let (_, save) = try timed {
                try pool.write { db in
                    for (record, original) in pairs { try record.updateChanges(db, from: original) }
                }
            }
            meter?.end()
            blackHole((records, pairs))
            try pool.close()
            result = ["change": change, "save": save, "total": change + save]
        case .fluent:
            result = try runFluentRound(of: self, round, path: path)
        case .loom:
            result = try Self.loomRound(try PersistentContainer.bench(at: path), changed: changed, titles: titles, meter: meter)
        }
        return result
    }

    /// Loom's round on any store (W5 on SQLite, PG-W5 on PostgreSQL), closing the container.
    static func loomRound(_ container: PersistentContainer, changed: [Int], titles: [String], meter: HeapMeter?,
                          emptySaves calls: Int = 10_000) throws -> [String: Double] {
        let context = container.viewContext
        var request = FetchRequest<Item>()
        request.returnsObjectsAsFaults = false
        let objects = try context.fetch(request)
        meter?.begin()
        let (_, change) = timed {
            for (j, i) in changed.enumerated() {
                objects[i].score += 1
                objects[i].title = titles[j]
            }
        }
        let (_, save) = try timed { try context.save() }
        meter?.end()
        let (_, empty) = try timed {
            for _ in 0..<calls { try context.save() }
        }
        blackHole(objects)
        try container.closeAndWait()
        return ["change": change, "save": save, "total": change + save, "empty": empty / Double(calls)]
    }
}
