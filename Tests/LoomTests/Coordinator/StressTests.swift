import Foundation
import Loom
@_spi(LoomTesting) import LoomCore
import Testing

/// Several background contexts saving overlapping objects at once while the view context
/// fetches and merges. Runs under ThreadSanitizer in CI. The time limit only catches a hang:
/// in a debug build, beside the multi-process tests' children on two cores, the three stores'
/// cases together have taken over two minutes.
@Suite("Stress", .timeLimit(.minutes(5)))
struct StressTests {
    static let workers = 4
    static let rounds = 25
    static let tallies = 16

    @Test("Concurrent overlapping saves: nothing lost or duplicated, final store equals the serial model", arguments: StoreKind.allCases)
    func overlappingSaves(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let keys = (0..<Self.tallies).map { "t\($0)" }
        try await container.save { context in for key in keys { context.insert(Tally(key: key)) } }

        // The view context keeps every tally loaded and merges as workers save.
        let viewFetches = try await MainActor.run {
            container.viewContext.retainsRegisteredObjects = true
            return try container.viewContext.fetch(FetchRequest<Tally>()).count
        }
        #expect(viewFetches == Self.tallies)

        // Each worker adds to its own field of a seeded, overlapping subset of tallies per round,
        // and inserts tallies whose keys collide with the other workers'.
        let expected = try await withThrowingTaskGroup(of: [String: Int].self) { group in
            for worker in 0..<Self.workers {
                let context = container.newBackgroundContext(name: "worker \(worker)")
                group.addTask {
                    var generator = SeededGenerator(seed: UInt64(worker + 1))
                    var added: [String: Int] = [:]
                    for round in 0..<Self.rounds {
                        let picks = keys.filter { _ in Bool.random(using: &generator) }
                        let collide = "shared-\(round % 5)"
                        try await context.perform { context in
                            context.mergePolicy = .mergeByPropertyObjectTrump
                            let wanted = picks
                            let tallies = try context.fetch(FetchRequest<Tally>(predicate: #Predicate { wanted.contains($0.key) }))
                            for tally in tallies { tally.add(1, toField: worker) }
                            if try context.count(for: FetchRequest<Tally>(predicate: #Predicate { $0.key == collide })) == 0 {
                                context.insert(Tally(key: collide))
                            }
                            try context.save()
                        }
                        for key in picks { added[key, default: 0] += 1 }
                    }
                    return added.mapValues { $0 * 1 }.reduce(into: [String: Int]()) { $0["\(worker)|\($1.key)"] = $1.value }
                }
            }
            // Meanwhile, the main actor keeps fetching.
            group.addTask {
                for _ in 0..<50 {
                    try await MainActor.run {
                        let count = try container.viewContext.count(for: FetchRequest<Tally>(predicate: #Predicate { $0.key.starts(with: "t") }))
                        #expect(count == Self.tallies)
                    }
                    try await Task.sleep(for: .milliseconds(1))
                }
                return [:]
            }
            var all: [String: Int] = [:]
            for try await part in group { all.merge(part) { $0 + $1 } }
            return all
        }

        // The serial model: each tally's field w is the number of rounds worker w picked it.
        let stored = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Tally>(sortBy: [SortDescriptor(\.key)])).map { ($0.key, $0.fields) }
        }
        #expect(stored.count == Self.tallies + 5, "no tally lost, no shared key duplicated")
        #expect(Set(stored.map(\.0)).count == stored.count)
        for (key, fields) in stored where key.hasPrefix("t") {
            for worker in 0..<Self.workers {
                #expect(fields[worker] == expected["\(worker)|\(key)", default: 0], "tally \(key), field \(worker)")
            }
        }

        // After merging everything, the view context's objects equal the store.
        let view = try await MainActor.run {
            container.viewContext.mergePendingSaves()
            return try container.viewContext.fetch(FetchRequest<Tally>(sortBy: [SortDescriptor(\.key)])).map { ($0.key, $0.fields) }
        }
        #expect(view.map(\.0) == stored.map(\.0))
        #expect(view.map(\.1) == stored.map(\.1))
    }

    @Test("Conflicting saves with the error policy fail cleanly and succeed when retried", arguments: StoreKind.allCases)
    func errorPolicyRetries(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        try await container.save { context in context.insert(Tally(key: "hot")) }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<Self.workers {
                let context = container.newBackgroundContext(name: "retrying \(worker)")
                group.addTask {
                    var conflicts = 0
                    for _ in 0..<Self.rounds {
                        while true {
                            let failed = try await context.perform { context -> Bool in
                                let tally = try #require(try context.fetch(FetchRequest<Tally>()).first)
                                tally.add(1, toField: 0)
                                do {
                                    try context.save()
                                    return false
                                } catch let error as LoomError where error.code == .versionConflict {
                                    #expect(error.conflicts.count == 1)
                                    context.rollback()
                                    context.reset()
                                    return true
                                }
                            }
                            if !failed { break }
                            conflicts += 1
                        }
                    }
                    return conflicts
                }
            }
            for try await _ in group {}
        }
        let total = try await container.performBackgroundTask { try $0.fetch(FetchRequest<Tally>()).first?.a }
        #expect(total == Self.workers * Self.rounds)
    }
}

/// SplitMix64: deterministic randomness for tests.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
