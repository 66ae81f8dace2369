/// The difference between two sectioned results — the core of live queries (Core Data's
/// `NSFetchedResultsController` changes): which sections and items went, came, moved and
/// changed, such that applying it to the old result gives the new one exactly.
///
/// Sections are identified by their key and keep their relative order (they are sorted by it);
/// items are identified by themselves and appear once in a result.
struct SectionedResult<Key: Hashable, Item: Hashable>: Equatable {
    struct Section: Equatable {
        var key: Key
        var items: [Item]
    }

    var sections: [Section]

    init(_ sections: [Section] = []) { self.sections = sections }

    /// Every item's position.
    func positions() -> [Item: ResultPosition] {
        var positions: [Item: ResultPosition] = [:]
        positions.reserveCapacity(sections.reduce(0) { $0 + $1.items.count })
        for (s, section) in sections.enumerated() {
            for (i, item) in section.items.enumerated() { positions[item] = ResultPosition(section: s, item: i) }
        }
        return positions
    }
}

/// An item's place in a sectioned result: its section's index and its index in the section
/// (a table view's index path).
public struct ResultPosition: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The section's index.
    public var section: Int
    /// The item's index in its section.
    public var item: Int

    public init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }

    public static func < (a: ResultPosition, b: ResultPosition) -> Bool { (a.section, a.item) < (b.section, b.item) }

    public var description: String { "[\(section), \(item)]" }
}

/// What turns one live result into the next, in the order a table or collection view applies
/// it (Core Data's fetched-results-controller changes, exact): deletions at old positions
/// (every deleted item is listed, also those of deleted sections), then insertions at new
/// positions (also those of inserted sections), moves from old to new positions, and updates
/// at new positions. Each list is in ascending order. Applying the deletions, then the
/// insertions and moves, to the previous result gives the new one exactly.
public struct ResultChanges: Equatable, Sendable {
    /// Sections of the previous result that are gone, by their old index.
    public var deletedSections: [Int] = []
    /// Sections of the new result that are new, by their new index.
    public var insertedSections: [Int] = []
    /// Items that left the result, at their old positions.
    public var deletedItems: [ResultPosition] = []
    /// Items that entered the result, at their new positions.
    public var insertedItems: [ResultPosition] = []
    /// Items that changed place (their order, or their section), from old to new positions.
    public var movedItems: [Move] = []
    /// Items in both results whose properties changed, at their new positions.
    public var updatedItems: [Update] = []

    public init() {}

    /// An item's move.
    public struct Move: Equatable, Sendable {
        public var from: ResultPosition
        public var to: ResultPosition
    }

    /// An item whose properties changed, and their names. An unsaved change that puts an
    /// object's values back to its saved ones names every property of the object: the context
    /// compares with the saved values, so it cannot tell which one went back.
    public struct Update: Equatable, Sendable {
        public var at: ResultPosition
        public var properties: Set<String>
    }

    /// Whether nothing changed.
    public var isEmpty: Bool {
        deletedSections.isEmpty && insertedSections.isEmpty && deletedItems.isEmpty && insertedItems.isEmpty && movedItems.isEmpty && updatedItems.isEmpty
    }

    /// Whether items or sections came, went or moved (not only updates).
    public var changesStructure: Bool {
        !(deletedSections.isEmpty && insertedSections.isEmpty && deletedItems.isEmpty && insertedItems.isEmpty && movedItems.isEmpty)
    }
}

enum SectionedDiff {
    /// The change from `old` to `new`, with fewest moves: an item that stays in its section is
    /// moved only if it is not in the longest run of such items whose order is unchanged.
    /// `updated` names, per item, the properties that changed; the items of both results among
    /// them are reported as updated (moved ones too).
    ///
    /// `touched`, when given, holds every item that may have entered, left or moved: the
    /// others are in both results, in the same section and the same order. The change is then
    /// found without indexing every item (a live query knows which objects it judged again).
    ///
    /// - Complexity: O(n log n) in the number of items; with `touched`, O(n) lookups of the
    ///   touched and updated items' numbers (a bit test for a live query's keys) plus
    ///   O(n log n) comparisons of indexes, with no index of every item.
    static func changes<Key: Hashable, Item: Hashable>(
        from old: SectionedResult<Key, Item>, to new: SectionedResult<Key, Item>, updated: [Item: Set<String>] = [:], touched: Set<Item>? = nil
    ) -> ResultChanges {
        if let touched {
            let tracked = HashedItems(touched: touched, updated: updated)
            if let change = changes(from: old, to: new, tracked: tracked, updated: tracked.properties(updated)) { return change }
        }
        return changes(from: old, to: new, updated: updated)
    }

    /// ``changes(from:to:updated:touched:)`` for a live query's results, whose items are primary
    /// keys: the touched and updated keys are numbered by a bit test and a population count,
    /// not by hashing.
    static func changes<Key: Hashable>(
        from old: SectionedResult<Key, Int64>, to new: SectionedResult<Key, Int64>, updated: [Int64: Set<String>], touchedKeys touched: Set<Int64>?
    ) -> ResultChanges {
        if let touched {
            let tracked = KeyIndex(touched: touched, updated: updated)
            if let change = changes(from: old, to: new, tracked: tracked, updated: tracked.properties(updated)) { return change }
        }
        return changes(from: old, to: new, updated: updated)
    }

    /// The change found by indexing every item.
    private static func changes<Key: Hashable, Item: Hashable>(
        from old: SectionedResult<Key, Item>, to new: SectionedResult<Key, Item>, updated: [Item: Set<String>]
    ) -> ResultChanges {
        var change = ResultChanges()
        let (oldSection, _) = change.compareSections(old, new)

        let oldPositions = old.positions()
        var newPositions: [Item: ResultPosition] = [:]
        newPositions.reserveCapacity(oldPositions.count)
        for (s, section) in new.sections.enumerated() {
            // Items that stay in this section, in their new order, by their old index: those
            // outside the longest increasing run moved.
            var stayed: [(item: Item, oldIndex: Int, newIndex: Int)] = []
            let sameSectionBefore = oldSection[section.key]
            for (i, item) in section.items.enumerated() {
                let position = ResultPosition(section: s, item: i)
                newPositions[item] = position
                guard let before = oldPositions[item] else {
                    change.insertedItems.append(position)
                    continue
                }
                if before.section == sameSectionBefore {
                    stayed.append((item, before.item, i))
                } else {
                    change.movedItems.append(.init(from: before, to: position))
                }
            }
            let kept = longestIncreasingRun(stayed.map(\.oldIndex))
            for (k, entry) in stayed.enumerated() where !kept[k] {
                change.movedItems.append(.init(from: ResultPosition(section: sameSectionBefore!, item: entry.oldIndex), to: ResultPosition(section: s, item: entry.newIndex)))
            }
        }
        for (s, section) in old.sections.enumerated() {
            for (i, item) in section.items.enumerated() where newPositions[item] == nil {
                change.deletedItems.append(ResultPosition(section: s, item: i))
            }
        }
        change.finish(updated: updated, old: oldPositions, new: newPositions)
        return change
    }

    /// The change when only touched items may have entered, left or moved; nil if the results
    /// break that promise (then the caller indexes every item). Tracked items are the touched
    /// and the updated ones; `updated` holds the changed properties by tracked index.
    ///
    /// Every list comes out in ascending order as it is made (the deleted items excepted,
    /// sorted at the end): items are visited section by section in the new order, and a
    /// section's moves are the merge of those from other sections and those outside its
    /// longest increasing run, both ascending.
    private static func changes<Key: Hashable, Item: Hashable, Tracked: TrackedItems>(
        from old: SectionedResult<Key, Item>, to new: SectionedResult<Key, Item>, tracked: Tracked, updated: [Set<String>?]
    ) -> ResultChanges? where Tracked.Item == Item {
        var change = ResultChanges()
        let (oldSection, newSection) = change.compareSections(old, new)
        // Where the tracked items were, and are, by tracked index; section -1: not there.
        let nowhere = ResultPosition(section: -1, item: 0)
        var oldTracked = [ResultPosition](repeating: nowhere, count: tracked.count)
        var newTracked = oldTracked
        var wasTouched = [Bool](repeating: false, count: tracked.count)
        // Per old section, the indexes of its touched items, ascending.
        var oldTouched = [[Int]](repeating: [], count: old.sections.count)
        for (s, section) in old.sections.enumerated() {
            for (i, item) in section.items.enumerated() {
                guard let found = tracked.index(of: item) else { continue }
                let t = found.index
                oldTracked[t] = ResultPosition(section: s, item: i)
                if found.touched {
                    wasTouched[t] = true
                    oldTouched[s].append(i)
                }
            }
        }
        var stayed: [(oldIndex: Int, newIndex: Int)] = []
        var movedIn: [ResultChanges.Move] = []
        for (s, section) in new.sections.enumerated() {
            let before = oldSection[section.key]
            let oldItems = before.map { old.sections[$0].items } ?? []
            let skipped = before.map { oldTouched[$0] } ?? []
            var cursor = 0, next = 0   // next: the first of `skipped` not passed yet
            // Items that stay in this section, by old and new index: those outside the longest
            // increasing run moved. Items from other sections, ascending by new index.
            stayed.removeAll(keepingCapacity: true)
            movedIn.removeAll(keepingCapacity: true)
            for (i, item) in section.items.enumerated() {
                let position = ResultPosition(section: s, item: i)
                let found = tracked.index(of: item)
                if let t = found?.index {
                    newTracked[t] = position
                    if oldTracked[t].section >= 0, let properties = updated[t] {
                        change.updatedItems.append(.init(at: position, properties: properties))
                    }
                }
                if let found, found.touched {
                    let was = oldTracked[found.index]
                    guard was.section >= 0 else {
                        change.insertedItems.append(position)
                        continue
                    }
                    if was.section == before { stayed.append((was.item, i)) } else { movedIn.append(.init(from: was, to: position)) }
                } else {
                    // An untouched item is the next untouched one of the same section before.
                    while next < skipped.count && skipped[next] == cursor { cursor += 1; next += 1 }
                    guard cursor < oldItems.count, oldItems[cursor] == item else { return nil }
                    stayed.append((cursor, i))
                    cursor += 1
                }
            }
            while next < skipped.count && skipped[next] == cursor { cursor += 1; next += 1 }
            guard cursor == oldItems.count else { return nil }
            let kept = longestIncreasingRun(stayed.map(\.oldIndex))
            var m = 0
            for (k, entry) in stayed.enumerated() where !kept[k] {
                while m < movedIn.count && movedIn[m].to.item < entry.newIndex {
                    change.movedItems.append(movedIn[m])
                    m += 1
                }
                change.movedItems.append(.init(from: ResultPosition(section: before!, item: entry.oldIndex), to: ResultPosition(section: s, item: entry.newIndex)))
            }
            change.movedItems.append(contentsOf: movedIn[m...])
        }
        for (s, section) in old.sections.enumerated() where newSection[section.key] == nil {
            // A section that went held only touched items.
            guard oldTouched[s].count == section.items.count else { return nil }
        }
        for t in 0..<tracked.count where oldTracked[t].section >= 0 && newTracked[t].section < 0 {
            guard wasTouched[t] else { return nil }   // an untouched item cannot leave
            change.deletedItems.append(oldTracked[t])
        }
        change.deletedItems.sort()
        return change
    }

    /// Marks, by index into `values`, one longest strictly increasing subsequence.
    static func longestIncreasingRun(_ values: [Int]) -> [Bool] {
        guard !values.isEmpty else { return [] }
        var tails: [Int] = []          // index into values of the smallest tail of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (i, value) in values.enumerated() {
            var low = 0, high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if values[tails[middle]] < value { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[i] = tails[low - 1] }
            if low == tails.count { tails.append(i) } else { tails[low] = i }
        }
        var run = [Bool](repeating: false, count: values.count)
        var i = tails[tails.count - 1]
        while i >= 0 {
            run[i] = true
            i = previous[i]
        }
        return run
    }

    /// Applies `change` to `old` as a table view would: removes deleted and moved-away items,
    /// then deleted sections (which must be empty by then), inserts the new sections (empty),
    /// then the inserted and moved-in items in ascending order, taking their identity and
    /// section keys from `new`. Returns nil when the change does not fit `old` (a position out
    /// of range, a deleted section not empty). How the tests prove a change exact: applied to
    /// the old result, it gives the new one.
    static func apply<Key: Hashable, Item: Hashable>(
        _ change: ResultChanges, to old: SectionedResult<Key, Item>, itemsFrom new: SectionedResult<Key, Item>
    ) -> SectionedResult<Key, Item>? {
        var sections = old.sections
        var removed: [Int: [Int]] = [:]
        for position in change.deletedItems + change.movedItems.map(\.from) {
            guard sections.indices.contains(position.section), sections[position.section].items.indices.contains(position.item) else { return nil }
            removed[position.section, default: []].append(position.item)
        }
        for (s, indices) in removed {
            guard Set(indices).count == indices.count else { return nil }
            for i in indices.sorted(by: >) { sections[s].items.remove(at: i) }
        }
        for s in change.deletedSections.sorted(by: >) {
            guard sections.indices.contains(s), sections[s].items.isEmpty else { return nil }
            sections.remove(at: s)
        }
        for s in change.insertedSections.sorted() {
            guard new.sections.indices.contains(s), s <= sections.count else { return nil }
            sections.insert(.init(key: new.sections[s].key, items: []), at: s)
        }
        guard sections.count == new.sections.count else { return nil }
        for position in (change.insertedItems + change.movedItems.map(\.to)).sorted() {
            let s = position.section
            guard new.sections.indices.contains(s), new.sections[s].items.indices.contains(position.item), position.item <= sections[s].items.count else { return nil }
            sections[s].items.insert(new.sections[s].items[position.item], at: position.item)
        }
        for update in change.updatedItems {
            guard sections.indices.contains(update.at.section), sections[update.at.section].items.indices.contains(update.at.item) else { return nil }
        }
        return SectionedResult(sections)
    }
}

extension ResultChanges {
    /// Sets the deleted and inserted sections; returns each result's section indexes by key.
    fileprivate mutating func compareSections<Key: Hashable, Item: Hashable>(
        _ old: SectionedResult<Key, Item>, _ new: SectionedResult<Key, Item>
    ) -> (old: [Key: Int], new: [Key: Int]) {
        var oldSection: [Key: Int] = [:], newSection: [Key: Int] = [:]
        for (s, section) in old.sections.enumerated() { oldSection[section.key] = s }
        for (s, section) in new.sections.enumerated() { newSection[section.key] = s }
        deletedSections = old.sections.indices.filter { newSection[old.sections[$0].key] == nil }
        insertedSections = new.sections.indices.filter { oldSection[new.sections[$0].key] == nil }
        return (oldSection, newSection)
    }

    /// Adds the updated items found in both results (at their new positions) and puts every
    /// list in ascending order.
    fileprivate mutating func finish<Item: Hashable>(updated: [Item: Set<String>], old: [Item: ResultPosition], new: [Item: ResultPosition]) {
        for (item, properties) in updated where !properties.isEmpty {
            guard old[item] != nil, let position = new[item] else { continue }
            updatedItems.append(.init(at: position, properties: properties))
        }
        deletedItems.sort()
        insertedItems.sort()
        movedItems.sort { $0.to < $1.to }
        updatedItems.sort { $0.at < $1.at }
    }
}

/// A set of primary keys that answers membership without hashing: a bitmap over their range
/// when it is dense enough (a live query's changed keys among its results'), else a `Set`.
struct KeySet {
    private var bits: [UInt64] = []
    private var low: Int64 = 0
    private var fallback: Set<Int64>?

    init(_ keys: Set<Int64>) {
        guard let min = keys.min(), let max = keys.max() else { return }
        let (span, overflow) = max.subtractingReportingOverflow(min)
        guard !overflow, span / 64 <= Int64(keys.count) * 8 + 4_096 else {
            fallback = keys
            return
        }
        low = min
        bits = [UInt64](repeating: 0, count: Int(span / 64) + 1)
        for key in keys {
            let offset = key - min
            bits[Int(offset >> 6)] |= 1 << UInt64(offset & 63)
        }
    }

    func contains(_ key: Int64) -> Bool {
        if let fallback { return fallback.contains(key) }
        let (offset, overflow) = key.subtractingReportingOverflow(low)
        guard !overflow, offset >= 0, offset >> 6 < Int64(bits.count) else { return false }
        return bits[Int(offset >> 6)] & (1 << UInt64(offset & 63)) != 0
    }
}

/// The items a change is computed for when only some may have moved (see
/// ``SectionedDiff/changes(from:to:updated:touched:)``): the touched ones and the updated
/// ones, each numbered in `0..<count`.
protocol TrackedItems {
    associatedtype Item: Hashable
    var count: Int { get }
    /// The item's number, and whether it is touched; nil for an item not tracked.
    func index(of item: Item) -> (index: Int, touched: Bool)?
}

extension TrackedItems {
    /// The changed properties by number (nil: none changed), from `updated`, by item.
    func properties(_ updated: [Item: Set<String>]) -> [Set<String>?] {
        var properties = [Set<String>?](repeating: nil, count: count)
        for (item, changed) in updated where !changed.isEmpty {
            if let t = index(of: item)?.index { properties[t] = changed }
        }
        return properties
    }
}

/// Tracked items of any hashable type, numbered through a dictionary.
struct HashedItems<Item: Hashable>: TrackedItems {
    private var numbers: [Item: (index: Int, touched: Bool)] = [:]

    init(touched: Set<Item>, updated: [Item: Set<String>]) {
        numbers.reserveCapacity(touched.count + updated.count)
        for item in touched {
            let number = numbers.count
            numbers[item] = (number, true)
        }
        for (item, properties) in updated where !properties.isEmpty && numbers[item] == nil {
            let number = numbers.count
            numbers[item] = (number, false)
        }
    }

    var count: Int { numbers.count }

    func index(of item: Item) -> (index: Int, touched: Bool)? { numbers[item] }
}

/// Tracked primary keys, numbered in key order without hashing when they are dense enough (a
/// live query's changed keys among its results'): a bitmap over their range, with the number
/// of keys before each word; else through a dictionary.
struct KeyIndex: TrackedItems {
    private var low: Int64 = 0
    private var tracked: [UInt64] = []
    private var touched: [UInt64] = []
    /// How many tracked keys come before each word of `tracked`.
    private var before: [Int32] = []
    private var fallback: HashedItems<Int64>?
    private(set) var count = 0

    init(touched touchedKeys: Set<Int64>, updated: [Int64: Set<String>]) {
        var min = Int64.max, max = Int64.min, keys = 0
        for key in touchedKeys {
            if key < min { min = key }
            if key > max { max = key }
        }
        keys += touchedKeys.count
        for (key, properties) in updated where !properties.isEmpty {
            if key < min { min = key }
            if key > max { max = key }
            keys += 1
        }
        guard keys > 0 else { return }
        let (span, overflow) = max.subtractingReportingOverflow(min)
        // At most about four words a key (beyond a floor): else hashing costs less memory.
        guard !overflow, span / 64 <= Int64(keys) * 4 + 1_024 else {
            fallback = HashedItems(touched: touchedKeys, updated: updated)
            count = fallback!.count
            return
        }
        low = min
        let words = Int(span / 64) + 1
        tracked = [UInt64](repeating: 0, count: words)
        for key in touchedKeys {
            let offset = key &- min
            tracked[Int(offset >> 6)] |= 1 << UInt64(offset & 63)
        }
        touched = tracked
        for (key, properties) in updated where !properties.isEmpty {
            let offset = key &- min
            tracked[Int(offset >> 6)] |= 1 << UInt64(offset & 63)
        }
        before = [Int32](repeating: 0, count: words)
        var total = 0
        for w in 0..<words {
            before[w] = Int32(total)
            total += tracked[w].nonzeroBitCount
        }
        count = total
    }

    func index(of key: Int64) -> (index: Int, touched: Bool)? {
        if let fallback { return fallback.index(of: key) }
        let (offset, overflow) = key.subtractingReportingOverflow(low)
        guard !overflow, offset >= 0, offset >> 6 < Int64(tracked.count) else { return nil }
        let w = Int(offset >> 6), bit = UInt64(1) << UInt64(offset & 63)
        let word = tracked[w]
        guard word & bit != 0 else { return nil }
        return (Int(before[w]) + (word & (bit &- 1)).nonzeroBitCount, touched[w] & bit != 0)
    }
}
