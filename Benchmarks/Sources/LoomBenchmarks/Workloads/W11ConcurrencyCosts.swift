import Foundation
import Loom

/// W11 (Loom only): what Loom's concurrency features cost.
///
/// - The run-time concurrency check: every attribute read of 1,000 loaded objects, 20 passes,
///   with `ConcurrencyDebugging` off (the default) and on; and the check itself when off, which
///   is one relaxed atomic load of the flag, timed alone over ten million loads.
/// - Nested contexts against siblings: fetching 1,000 objects (every attribute read) in a
///   background context on the coordinator, and in a child of a private parent context (each
///   fetch goes through the parent on its queue); saving 1,000 new objects from a sibling straight
///   to the store, and from a child through its parent to the store (`saveRecursively()`).
/// - Undo: an attribute set on each of the 1,000 loaded objects, 20 passes, with no undo stack
///   (the default: the edit path only tests for one) and with one (each pass one step, the
///   first set of each object and property recorded), per set.
final class ConcurrencyCosts: SynchronousWorkload {
    let id = "W11"
    let title = "Loom's concurrency costs: the run-time check, and nested contexts against siblings"
    let contenders: [Contender] = [.loom]
    let metrics = [
        Metric(key: "read.off", label: "read, checks off"),
        Metric(key: "read.on", label: "read, checks on"),
        Metric(key: "flag", label: "the check when off"),
        Metric(key: "fetch.sibling", label: "fetch 1,000: sibling"),
        Metric(key: "fetch.child", label: "fetch 1,000: child"),
        Metric(key: "save.sibling", label: "save 1,000: sibling"),
        Metric(key: "save.nested", label: "save 1,000: child→parent"),
        Metric(key: "set.undoOff", label: "set, undo off"),
        Metric(key: "set.undoOn", label: "set, undo on"),
    ]
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
    }

    func measure(_ contender: Contender, _ round: Round) throws -> [String: Double] {
        guard contender == .loom else { return [:] }
        let path = try bench.populatedCopy(for: .loom, tag: "W11")
        defer { bench.remove(path) }
        let container = try PersistentContainer.bench(at: path)
        defer { try? container.closeAndWait() }
        var result: [String: Double] = [:]
        round.meter?.begin()

        // The run-time check.
        let view = container.viewContext
        var request = FetchRequest<Item>(fetchLimit: 1_000)
        request.returnsObjectsAsFaults = false
        let items = try view.fetch(request)
        let passes = 20, reads = Double(items.count * 9 * passes)
        for enabled in [false, true] {
            ConcurrencyDebugging.isEnabled = enabled
            var sum = 0
            let start = monotonicNanoseconds()
            for _ in 0..<passes { for item in items { sum &+= item.checksum } }
            result[enabled ? "read.on" : "read.off"] = seconds(since: start) / reads
            blackHole(sum)
        }
        ConcurrencyDebugging.isEnabled = false

        // Undo off and on: the same sets, then the changes discarded.
        for recording in [false, true] {
            view.undoManager = recording ? UndoStack() : nil
            let start = monotonicNanoseconds()
            for pass in 0..<passes {
                for item in items { item.quantity = pass }
                view.processPendingChanges()
            }
            result[recording ? "set.undoOn" : "set.undoOff"] = seconds(since: start) / Double(items.count * passes)
            view.rollback()
        }
        view.undoManager = nil
        var on = 0
        let loads = 10_000_000
        let flagStart = monotonicNanoseconds()
        for _ in 0..<loads where ConcurrencyDebugging.isEnabled { on += 1 }
        result["flag"] = seconds(since: flagStart) / Double(loads)
        blackHole(on)

        // Nested against siblings. The parent is private: a child of the view context could not
        // be waited for from the main actor, which the child needs to reach.
        let sibling = container.newBackgroundContext(name: "W11 sibling")
        let parent = container.newBackgroundContext(name: "W11 parent")
        let child = parent.newChildContext(name: "W11 child")
        for (context, key) in [(sibling, "fetch.sibling"), (child, "fetch.child")] {
            let start = monotonicNanoseconds()
            let sum = try context.performAndWait { context in
                try context.fetch(request).reduce(0) { $0 &+ $1.checksum }
            }
            result[key] = seconds(since: start)
            blackHole(sum)
        }
        let fresh = Array(bench.dataset.items.prefix(1_000))
        for (context, key) in [(sibling, "save.sibling"), (child, "save.nested")] {
            let start = monotonicNanoseconds()
            try context.performAndWait { context in
                for data in fresh { context.insert(Item(data)) }
                try context.saveRecursively()
            }
            result[key] = seconds(since: start)
        }
        round.meter?.end()
        return result
    }
}
