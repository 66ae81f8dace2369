import Foundation
import Loom
@_spi(LoomTesting) import LoomCore

/// W15: live queries — how long after a background save the main actor has the new result of a
/// query and the exact change from the old one.
///
/// A query of `resultCount` (10,000) items in sections by category (~100 sections), ordered by
/// score, on the main actor. "100 changed" saves the scores of 100 random items of the result
/// from a background context, 50 times; "shuffle" gives every item a new score (every item
/// moves), 3 times; each is timed from the start of the main actor's merge to the moment it
/// holds the new result with its change. "fan-out" registers 1,000 queries that each match one
/// item, then one save changes an attribute none of them filters on in all 10,000 items: the
/// time until every query has delivered its update (Core Data's fetched results controllers take
/// 4.4 s on this, by the Dflat study). "unrelated save" is what 1,000 live queries add to the
/// merge of a save that touches no entity they read, per query.
///
/// Loom: `viewContext.liveQuery(_:sectionedBy:)`, read with `for try await`; the merge is
/// `mergePendingSaves()`. Raw SQLite, what an app without live queries writes: run the query
/// again after the commit and compare the old and new lists of IDs with the standard library's
/// `difference(from:).inferringMoves()` (no sections, no updates); for fan-out, run the 1,000
/// point queries again.
final class LiveQueries: Workload {
    let id = "W15"
    var title = "Live queries"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "hundred.p50", label: "100 changed p50", target: .median(2e-3)),
        Metric(key: "hundred.p99", label: "100 changed p99", target: .median(5e-3)),
        Metric(key: "shuffle", label: "shuffle of all", target: .median(30e-3)),
        Metric(key: "fanout", label: "fan-out 1,000 × 1", target: .median(0.4)),
        Metric(key: "unrelated", label: "unrelated save, per query", target: .median(1e-6)),
    ]
    /// 10,000, or all of a smaller run's items (`--objects`).
    private(set) var resultCount = 10_000
    let fanOut = 1_000
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        resultCount = min(10_000, bench.dataset.items.count)
        let sections = Set(bench.dataset.items.prefix(resultCount).map(\.category)).count
        title = "Live queries: a sectioned result of \(Format.count(resultCount)) (\(sections) sections) after saves of 100 changed and of all; \(Format.count(fanOut)) queries after one save of \(Format.count(resultCount)); an unrelated save"
    }

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        let items = Array(bench.dataset.items.prefix(resultCount))
        let path = bench.newDatabasePath("W15-\(contender.rawValue)-\(round.index)")
        defer { bench.remove(path) }
        var random = SplitMix64(seed: UInt64(bitPattern: Int64(round.index)) &+ 15)
        switch contender {
        case .loom: return try await loom(items, path: path, round: round, random: &random)
        case .raw: return try raw(items, path: path, round: round, random: &random)
        default: return [:]
        }
    }

    private func loom(_ items: [ItemData], path: String, round: Round, random: inout SplitMix64) async throws -> [String: Double] {
        let container = try PersistentContainer(name: "LoomBench", for: Item.self, Note.self, location: .file(URL(filePath: path)))
        let view = container.viewContext
        let writer = container.newBackgroundContext()
        let ids: [ObjectID<Item>] = try writer.performAndWait { context in
            let objects = items.map { Item($0) }
            for object in objects { context.insert(object) }
            try context.save()
            return objects.map(\.objectID)
        }
        view.mergePendingSaves()   // the import, before the query starts
        var result: [String: Double] = [:]
        round.meter?.begin()
        do {
            let live = try view.liveQuery(FetchRequest<Item>(sortBy: [SortDescriptor(\.score)]), sectionedBy: \.category)
            var iterator = live.makeAsyncIterator()
            guard try await iterator.next(isolation: #isolation)?.count == resultCount else { throw BenchError("W15: the first result is not the whole table") }
            var latencies: [Double] = []
            for _ in 0..<50 {
                let changed = (0..<100).map { _ in (ids[random.int(below: ids.count)], random.unit() * 1_000) }
                try save(writer) { context in for (id, score) in changed { try context.object(with: id).score = score } }
                let start = monotonicNanoseconds()
                view.mergePendingSaves()
                guard let next = try await iterator.next(isolation: #isolation), next.changes != nil else { throw BenchError("W15: no change after a save") }
                latencies.append(seconds(since: start))
            }
            let sorted = latencies.sorted()
            result["hundred.p50"] = Statistics.percentile(sorted: sorted, 0.5)
            result["hundred.p99"] = Statistics.percentile(sorted: sorted, 0.99)
            var shuffles: [Double] = []
            for _ in 0..<3 {
                let scores = ids.map { _ in random.unit() * 1_000 }
                try save(writer) { context in for (id, score) in zip(ids, scores) { try context.object(with: id).score = score } }
                let start = monotonicNanoseconds()
                view.mergePendingSaves()
                guard let next = try await iterator.next(isolation: #isolation), let changes = next.changes, changes.movedItems.count > resultCount / 2 else { throw BenchError("W15: a shuffle moved too few items") }
                shuffles.append(seconds(since: start))
            }
            result["shuffle"] = Statistics.median(shuffles)
        }

        // Fan-out: 1,000 queries of one item each; one save changes every item's quantity.
        var queries: [LiveQuery<Item, NoSection>.Iterator] = []
        for item in items.prefix(fanOut) {
            let serial = item.serial
            var iterator = try view.liveQuery(FetchRequest<Item>(predicate: #Predicate { $0.serial == serial })).makeAsyncIterator()
            _ = try await iterator.next(isolation: #isolation)
            queries.append(iterator)
        }
        try save(writer) { context in for id in ids { try context.object(with: id).quantity += 1 } }
        let start = monotonicNanoseconds()
        view.mergePendingSaves()
        for i in queries.indices {
            guard try await queries[i].next(isolation: #isolation)?.changes?.updatedItems.count == 1 else { throw BenchError("W15: a fan-out query missed its update") }
        }
        result["fanout"] = seconds(since: start)

        // Unrelated saves: a note each, merged with the 1,000 queries registered and without.
        func mergeNotes(_ count: Int) throws -> Double {
            var times: [Double] = []
            for i in 0..<count {
                try save(writer) { context in context.insert(Note(text: "note \(i)")) }
                let start = monotonicNanoseconds()
                view.mergePendingSaves()
                times.append(seconds(since: start))
            }
            return Statistics.median(times)
        }
        let with = try mergeNotes(200)
        queries.removeAll()
        view.processPendingChanges()   // the released queries are dropped at the next event
        try save(writer) { context in context.insert(Note(text: "drop")) }
        view.mergePendingSaves()
        let without = try mergeNotes(200)
        result["unrelated"] = max(0, with - without) / Double(fanOut)
        round.meter?.end()
        try await container.close()
        return result
    }

    private func save(_ context: BackgroundContext, _ body: @escaping @Sendable (ManagedObjectContext) throws -> Void) throws {
        try context.performAndWait { context in
            try body(context)
            try context.save()
        }
    }

    private func raw(_ items: [ItemData], path: String, round: Round, random: inout SplitMix64) throws -> [String: Double] {
        let db = try RawDatabase(path: path)
        try db.createSchema()
        try db.insert(items)
        let query = try db.prepare("SELECT id FROM Item ORDER BY category, score, id")
        func ids() throws -> [Int64] {
            var out: [Int64] = []
            out.reserveCapacity(resultCount)
            query.reset()
            while try query.step() { out.append(query.int64(0)) }
            return out
        }
        let update = try db.prepare("UPDATE Item SET score = ? WHERE id = ?")
        func setScores(_ changes: [(Int64, Double)]) throws {
            try db.execute("BEGIN")
            for (id, score) in changes {
                update.bind(score, at: 1)
                update.bind(id, at: 2)
                try update.run()
            }
            try db.execute("COMMIT")
        }
        var result: [String: Double] = [:]
        round.meter?.begin()
        var current = try ids()
        var latencies: [Double] = []
        for _ in 0..<50 {
            try setScores((0..<100).map { _ in (Int64(random.int(below: resultCount) + 1), random.unit() * 1_000) })
            let start = monotonicNanoseconds()
            let next = try ids()
            let difference = next.difference(from: current).inferringMoves()
            blackHole(difference.count)
            current = next
            latencies.append(seconds(since: start))
        }
        let sorted = latencies.sorted()
        result["hundred.p50"] = Statistics.percentile(sorted: sorted, 0.5)
        result["hundred.p99"] = Statistics.percentile(sorted: sorted, 0.99)
        var shuffles: [Double] = []
        for _ in 0..<3 {
            try setScores((1...resultCount).map { (Int64($0), random.unit() * 1_000) })
            let start = monotonicNanoseconds()
            let next = try ids()
            blackHole(next.difference(from: current).inferringMoves().count)
            current = next
            shuffles.append(seconds(since: start))
        }
        result["shuffle"] = Statistics.median(shuffles)
        try db.execute("UPDATE Item SET quantity = quantity + 1")
        let point = try db.prepare("SELECT id, quantity FROM Item WHERE serial = ?")
        let start = monotonicNanoseconds()
        for item in items.prefix(fanOut) {
            point.reset()
            point.bind(item.serial, at: 1)
            while try point.step() { blackHole(point.int(1)) }
        }
        result["fanout"] = seconds(since: start)
        round.meter?.end()
        return result
    }
}

/// A second entity for W15's unrelated saves: no live query reads it.
@Model final class Note {
    var text: String
    init(text: String) { self.text = text }
}
