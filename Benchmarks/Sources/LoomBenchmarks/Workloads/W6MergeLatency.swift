import Dispatch
import Foundation
import GRDB
import Loom

/// W6: how long after a background save the main actor shows the new values (merge latency).
///
/// The main actor shows a list of `displayed` (1,000) loaded objects; a background writer
/// changes the score of 1 of them, then of all 1,000, and saves, 100 times each. "save → visible" runs from the start
/// of the background save to the moment the main actor has the new values (the moment the
/// commit ends cannot be told apart reliably from outside Loom: on two cores the merge often
/// lands before the saving thread gets to read the clock). Loom: the view context holds the objects, a background
/// context (retaining its objects) saves, and automatic merging refreshes the view context's
/// objects, which posts `objectsDidChange`. Raw SQLite, by hand: a writer connection on a
/// serial queue commits, then the main actor re-reads the changed rows by key. GRDB: a
/// `ValueObservation` of the displayed rows, delivered on the main actor (it re-fetches the
/// whole list, which is how GRDB apps observe a list); the writer uses `pool.write`.
final class MergeLatency: Workload {
    let id = "W6"
    var title = "Merge latency from a background save to the main actor"
    let contenders: [Contender] = [.raw, .grdb, .loom]
    let metrics = [
        Metric(key: "one.p50", label: "1 object p50"),
        Metric(key: "one.p99", label: "1 object p99"),
        Metric(key: "thousand.p50", label: "1,000 objects p50"),
        Metric(key: "thousand.p99", label: "1,000 objects p99", target: .median(5e-3)),
    ]
    let displayed = 1_000
    private var bench: Bench!
    private var saves = 0

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        saves = 100
        title = "Merge latency: \(saves) background saves of 1 and of 1,000 changed objects, shown on the main actor in a list of \(displayed)"
    }

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        guard contender != .grdbRecord else { return [:] }
        var figures: [String: Double] = [:]
        for (changed, name) in [(1, "one"), (1_000, "thousand")] {
            let sorted = try await measure(contender, round, changed: changed).sorted()
            figures["\(name).p50"] = Statistics.percentile(sorted: sorted, 0.5)
            figures["\(name).p99"] = Statistics.percentile(sorted: sorted, 0.99)
        }
        return figures
    }

    /// The save → merged times of `saves` saves that each change `changed` objects.
    private func measure(_ contender: Contender, _ round: Round, changed: Int) async throws -> [Double] {
        let path = try bench.populatedCopy(for: contender, tag: "W6-\(contender.rawValue)-\(changed)")
        defer { bench.remove(path) }
        let meter = round.meter
        let displayed = self.displayed
        /// The keys save `i` changes, and the score it writes.
        func keys(_ i: Int) -> [Int64] { (0..<changed).map { Int64((i * changed + $0) % displayed + 1) } }
        func score(_ i: Int) -> Double { 10_000 + Double(i) }
        var visible: [Double] = []
        switch contender {
        case .raw:
            let reader = try RawDatabase(path: path)
            let list = try reader.prepare("SELECT \(ItemSQL.columns) FROM Item WHERE id <= ? ORDER BY id")
            list.bind(displayed, at: 1)
            var shown = try list.items()
            let byID = try reader.prepare(ItemSQL.selectByID)
            let writer = try RawWriter(path: path)
            let queue = DispatchQueue(label: "W6 raw writer")
            meter?.begin()
            for i in 0..<saves {
                let changedKeys = keys(i), newScore = score(i)
                let start = monotonicNanoseconds()
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    queue.async {
                        do {
                            try writer.save(changedKeys, score: newScore)
                            continuation.resume()
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                for key in changedKeys {
                    byID.bind(key, at: 1)
                    guard try byID.step() else { throw BenchError("no item \(key)") }
                    shown[Int(key) - 1] = byID.item()
                    byID.reset()
                }
                let end = monotonicNanoseconds()
                guard shown[Int(changedKeys[0]) - 1].score == newScore else { throw BenchError("raw W6 did not see its save") }
                visible.append(Double(Int64(end) - Int64(start)) / 1e9)
            }
            meter?.end()
            blackHole(shown)
        case .grdb:
            let pool = try BenchSettings.openPool(path)
            let waiter = MergeWaiter()
            let limit = displayed
            let observation = ValueObservation.tracking { db in
                try db.items("SELECT \(ItemSQL.columns) FROM Item WHERE id <= ? ORDER BY id", arguments: [limit])
            }
            let list = ObservedList()
            let cancellable = observation.start(in: pool, onError: { error in
                fatalError("GRDB observation failed: \(error)")
            }, onChange: { items in
                list.items = items
                if let (index, score) = list.expected {
                    if items[index].score == score { waiter.fire() }
                } else {
                    waiter.fire()
                }
            })
            _ = await waiter.wait()   // the initial value
            meter?.begin()
            for i in 0..<saves {
                let changedKeys = keys(i), newScore = score(i)
                list.expected = (Int(changedKeys[0]) - 1, newScore)
                waiter.reset()
                let start = monotonicNanoseconds()
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    DispatchQueue.global().async {
                        do {
                            try pool.write { db in
                                let statement = try db.cachedStatement(sql: ItemSQL.updateScore)
                                for key in changedKeys {
                                    statement.setUncheckedArguments([newScore, key])
                                    try statement.execute()
                                }
                            }
                            continuation.resume()
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                let end = await waiter.wait()
                visible.append(Double(Int64(end) - Int64(start)) / 1e9)
            }
            meter?.end()
            cancellable.cancel()
            blackHole(list.items)
            try pool.close()
        case .grdbRecord, .fluent:
            return []
        case .loom:
            let container = try PersistentContainer.bench(at: path)
            let view = container.viewContext
            var request = FetchRequest<Item>(fetchLimit: displayed)
            request.returnsObjectsAsFaults = false
            let shown = try view.fetch(request)
            let ids = shown.map(\.objectID)
            let writer = container.newBackgroundContext(name: "W6 writer")
            try await writer.perform { context in
                context.retainsRegisteredObjects = true
                for id in ids { _ = try context.existingObject(with: id) }
            }
            let waiter = MergeWaiter()
            let token = view.addObserver(for: .objectsDidChange) { event in
                if case .objectsDidChange(let changes) = event, !changes.refreshed.isEmpty { waiter.fire() }
            }
            meter?.begin()
            for i in 0..<saves {
                let changedIDs = keys(i).map { ids[Int($0) - 1] }, newScore = score(i)
                waiter.reset()
                let start = monotonicNanoseconds()
                try await writer.perform { context in
                    for id in changedIDs { try context.object(with: id).score = newScore }
                    try context.save()
                }
                let end = await waiter.wait()
                guard shown[Int(changedIDs[0].primaryKey) - 1].score == newScore else { throw BenchError("the view context did not merge the save") }
                visible.append(Double(Int64(end) - Int64(start)) / 1e9)
            }
            meter?.end()
            view.removeObserver(token)
            blackHole(shown)
            try await container.close()
        }
        return visible
    }
}

/// The list a GRDB observation keeps up to date, and the change the loop waits for.
@MainActor
final class ObservedList {
    var items: [ItemData] = []
    var expected: (index: Int, score: Double)?
}

/// Hands the moment a change became visible on the main actor to the loop waiting for it,
/// whichever comes first.
@MainActor
final class MergeWaiter {
    private var firedAt: UInt64?
    private var continuation: CheckedContinuation<UInt64, Never>?

    /// Forgets a change seen before the one about to be waited for.
    func reset() {
        firedAt = nil
    }

    func fire() {
        let now = monotonicNanoseconds()
        if let continuation {
            self.continuation = nil
            continuation.resume(returning: now)
        } else {
            firedAt = now
        }
    }

    func wait() async -> UInt64 {
        if let firedAt {
            self.firedAt = nil
            return firedAt
        }
        return await withCheckedContinuation { continuation = $0 }
    }
}
