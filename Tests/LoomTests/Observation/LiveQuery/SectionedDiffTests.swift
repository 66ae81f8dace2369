@testable import LoomCore
import Testing

/// The sectioned diff under live queries: applied to the old result, a change gives the new
/// one exactly, with fewest moves.
@Suite("Sectioned diff")
struct SectionedDiffTests {
    typealias Result = SectionedResult<String, Int>

    static func result(_ sections: [(String, [Int])]) -> Result {
        Result(sections.map { .init(key: $0.0, items: $0.1) })
    }

    func check(_ old: Result, _ new: Result, updated: [Int: Set<String>] = [:]) -> ResultChanges {
        let change = SectionedDiff.changes(from: old, to: new, updated: updated)
        #expect(SectionedDiff.apply(change, to: old, itemsFrom: new) == new, "\(old) → \(new): \(change)")
        return change
    }

    @Test("Equal results make an empty change; updates alone are reported at their new positions")
    func equal() {
        let r = Self.result([("a", [1, 2, 3]), ("b", [4])])
        #expect(check(r, r).isEmpty)
        let change = check(r, r, updated: [2: ["title"], 9: ["title"]])
        #expect(change.updatedItems == [.init(at: ResultPosition(section: 0, item: 1), properties: ["title"])])
        #expect(change.movedItems.isEmpty && change.insertedItems.isEmpty && change.deletedItems.isEmpty)
    }

    @Test("One item moved to the front is one move, not a shift of all the others")
    func fewestMoves() {
        let old = Self.result([("a", Array(1...10))])
        let new = Self.result([("a", [10] + Array(1...9))])
        let change = check(old, new)
        #expect(change.movedItems == [.init(from: ResultPosition(section: 0, item: 9), to: ResultPosition(section: 0, item: 0))])
        #expect(change.insertedItems.isEmpty && change.deletedItems.isEmpty)
    }

    @Test("Items moving between sections, emptied and new sections, deletes and inserts")
    func acrossSections() {
        let old = Self.result([("a", [1, 2]), ("b", [3, 4, 5]), ("c", [6])])
        let new = Self.result([("b", [4, 1]), ("c", [6, 7, 3]), ("d", [2])])
        let change = check(old, new, updated: [6: ["name"], 3: ["section"]])
        #expect(change.deletedSections == [0])
        #expect(change.insertedSections == [2])
        #expect(change.deletedItems == [ResultPosition(section: 1, item: 2)])   // 5
        #expect(change.insertedItems == [ResultPosition(section: 1, item: 1)])  // 7
        #expect(Set(change.movedItems.map(\.to)) == [ResultPosition(section: 0, item: 1), ResultPosition(section: 1, item: 2), ResultPosition(section: 2, item: 0)])
        #expect(change.updatedItems.map(\.at) == [ResultPosition(section: 1, item: 0), ResultPosition(section: 1, item: 2)])
    }

    @Test("Random results, 10,000 pairs: every change applied to the old result gives the new one, and unchanged orders move nothing")
    func random() {
        var generator = SeededGenerator(seed: 7)
        let keys = ["a", "b", "c", "d", "e"]
        func randomResult(_ items: [Int]) -> Result {
            var sections: [String: [Int]] = [:]
            for item in items.shuffled(using: &generator) where Int.random(in: 0..<5, using: &generator) > 0 {
                sections[keys.randomElement(using: &generator)!, default: []].append(item)
            }
            return Result(keys.compactMap { key in sections[key].map { .init(key: key, items: $0) } })
        }
        for _ in 0..<10_000 {
            let universe = Array(0..<Int.random(in: 0...30, using: &generator))
            let old = randomResult(universe), new = randomResult(universe)
            var updated: [Int: Set<String>] = [:]
            for item in universe where Bool.random(using: &generator) { updated[item] = ["value"] }
            let change = check(old, new, updated: updated)
            let moved = Set(change.movedItems.map { new.sections[$0.to.section].items[$0.to.item] })
            // Minimal: every item that stays in its section and is not moved keeps its order.
            let oldPositions = old.positions()
            for section in new.sections {
                let kept = section.items.filter { oldPositions[$0].map { old.sections[$0.section].key == section.key } == true && !moved.contains($0) }
                #expect(kept == kept.sorted { oldPositions[$0]!.item < oldPositions[$1]!.item })
                let stayed = section.items.filter { oldPositions[$0].map { old.sections[$0.section].key == section.key } == true }
                #expect(kept.count == SectionedDiff.longestIncreasingRun(stayed.map { oldPositions[$0]!.item }).filter { $0 }.count)
            }
        }
    }

    @Test("Told which items may have moved (as a live query knows), the change is the same as found by indexing every item; told wrongly, it is still exact")
    func touched() {
        var generator = SeededGenerator(seed: 11)
        let keys = ["a", "b", "c", "d", "e"]
        for _ in 0..<10_000 {
            let universe = Array(0..<Int.random(in: 0...30, using: &generator))
            var sections: [String: [Int]] = [:]
            for item in universe.shuffled(using: &generator) where Int.random(in: 0..<5, using: &generator) > 0 {
                sections[keys.randomElement(using: &generator)!, default: []].append(item)
            }
            let old = Result(keys.compactMap { key in sections[key].map { .init(key: key, items: $0) } })
            // Touched items leave; some come back anywhere (in any section), the others keep
            // their sections and order.
            let touched = Set(universe.filter { _ in Int.random(in: 0..<4, using: &generator) == 0 })
            for key in keys { sections[key]?.removeAll { touched.contains($0) } }
            for item in touched where Bool.random(using: &generator) {
                let key = keys.randomElement(using: &generator)!
                let at = Int.random(in: 0...(sections[key]?.count ?? 0), using: &generator)
                sections[key, default: []].insert(item, at: at)
            }
            let new = Result(keys.compactMap { key in sections[key].flatMap { $0.isEmpty ? nil : .init(key: key, items: $0) } })
            var updated: [Int: Set<String>] = [:]
            for item in universe where Int.random(in: 0..<3, using: &generator) == 0 { updated[item] = ["value"] }
            let told = SectionedDiff.changes(from: old, to: new, updated: updated, touched: touched)
            #expect(told == SectionedDiff.changes(from: old, to: new, updated: updated))
            #expect(SectionedDiff.apply(told, to: old, itemsFrom: new) == new)
            let misled = SectionedDiff.changes(from: new, to: old, updated: updated, touched: [])
            #expect(SectionedDiff.apply(misled, to: new, itemsFrom: old) == old)
        }
    }

    @Test("Live query keys, numbered by a bitmap when dense: told which keys moved, the change is the one found by indexing every item, with dense, spread, sparse, negative and extreme keys")
    func touchedKeys() {
        var generator = SeededGenerator(seed: 13)
        let keys = ["a", "b", "c", "d"]
        let spreads: [(Int64) -> Int64] = [{ $0 + 1 }, { $0 * 100 }, { $0 * 1_000_003 }, { $0 - 20 }, { $0 == 0 ? .min : $0 == 1 ? .max : $0 }]
        for round in 0..<5_000 {
            let spread = spreads[round % spreads.count]
            let universe = (0..<Int64.random(in: 0...40, using: &generator)).map(spread)
            var sections: [String: [Int64]] = [:]
            for item in universe.shuffled(using: &generator) where Int.random(in: 0..<5, using: &generator) > 0 {
                sections[keys.randomElement(using: &generator)!, default: []].append(item)
            }
            let old = SectionedResult<String, Int64>(keys.compactMap { key in sections[key].map { .init(key: key, items: $0) } })
            let touched = Set(universe.filter { _ in Int.random(in: 0..<3, using: &generator) == 0 })
            for key in keys { sections[key]?.removeAll { touched.contains($0) } }
            for item in touched where Int.random(in: 0..<4, using: &generator) > 0 {
                let key = keys.randomElement(using: &generator)!
                let at = Int.random(in: 0...(sections[key]?.count ?? 0), using: &generator)
                sections[key, default: []].insert(item, at: at)
            }
            let new = SectionedResult<String, Int64>(keys.compactMap { key in sections[key].flatMap { $0.isEmpty ? nil : .init(key: key, items: $0) } })
            var updated: [Int64: Set<String>] = [:]
            for item in universe where Int.random(in: 0..<3, using: &generator) == 0 { updated[item] = Bool.random(using: &generator) ? ["value"] : [] }
            let told = SectionedDiff.changes(from: old, to: new, updated: updated, touchedKeys: touched)
            #expect(told == SectionedDiff.changes(from: old, to: new, updated: updated))
            #expect(told == SectionedDiff.changes(from: old, to: new, updated: updated, touched: touched))
            #expect(SectionedDiff.apply(told, to: old, itemsFrom: new) == new)
            let misled = SectionedDiff.changes(from: new, to: old, updated: updated, touchedKeys: [])
            #expect(SectionedDiff.apply(misled, to: new, itemsFrom: old) == old)
        }
    }

    @Test("A key index numbers the touched and updated keys 0..<count, tells the touched ones, and knows no other key")
    func keyIndex() {
        var generator = SeededGenerator(seed: 17)
        let cases: [Set<Int64>] = [
            [], [7], Set((1...10_000).filter { $0 % 97 == 0 }), [1, 1 << 40, -5], [.min, .max, 0], Set((0..<200).map { _ in Int64.random(in: -300...300, using: &generator) }),
            Set(1...10_000),
        ]
        for keys in cases {
            let touched = Set(keys.filter { _ in Bool.random(using: &generator) })
            var updated: [Int64: Set<String>] = [:]
            for key in keys where !touched.contains(key) { updated[key] = ["value"] }
            for key in touched where Bool.random(using: &generator) { updated[key] = Bool.random(using: &generator) ? ["value"] : [] }
            updated[123_456_789] = []   // no property changed: not tracked
            let index = KeyIndex(touched: touched, updated: updated)
            #expect(index.count == keys.count)
            var numbers: Set<Int> = []
            for key in keys {
                guard let found = index.index(of: key) else {
                    Issue.record("\(key) of \(keys.count) keys has no number")
                    continue
                }
                #expect(found.touched == touched.contains(key))
                numbers.insert(found.index)
            }
            #expect(numbers == Set(0..<keys.count))
            for probe: Int64 in [0, 1, -1, 96, 98, 10_001, .min, .max, 1 << 40, 123_456_789] where !keys.contains(probe) {
                #expect(index.index(of: probe) == nil, "\(probe) in \(keys.count) keys")
            }
        }
    }

    @Test("A key set answers like a Set: dense, sparse, negative and extreme keys")
    func keySet() {
        var generator = SeededGenerator(seed: 5)
        let cases: [Set<Int64>] = [
            [], [7], Set((1...10_000).filter { $0 % 97 == 0 }), [1, 1 << 40, -5], [.min, .max, 0], Set((0..<200).map { _ in Int64.random(in: -300...300, using: &generator) }),
        ]
        for keys in cases {
            let set = KeySet(keys)
            for probe in Array(keys) + [0, 1, -1, 96, 97, 98, 10_001, .min, .max, 1 << 40] {
                #expect(set.contains(probe) == keys.contains(probe), "\(probe) in \(keys.count) keys")
            }
        }
    }

    @Test("A change that does not fit the old result is refused, not applied")
    func misfit() {
        let old = Self.result([("a", [1, 2])]), new = Self.result([("a", [2])])
        var change = SectionedDiff.changes(from: old, to: new)
        change.deletedItems = [ResultPosition(section: 0, item: 5)]
        #expect(SectionedDiff.apply(change, to: old, itemsFrom: new) == nil)
    }
}
