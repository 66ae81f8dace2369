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

    /// An item whose properties changed, and their names.
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
    /// - Complexity: O(n log n) in the number of items.
    static func changes<Key: Hashable, Item: Hashable>(
        from old: SectionedResult<Key, Item>, to new: SectionedResult<Key, Item>, updated: [Item: Set<String>] = [:]
    ) -> ResultChanges {
        var change = ResultChanges()
        var oldSection: [Key: Int] = [:], newSection: [Key: Int] = [:]
        for (s, section) in old.sections.enumerated() { oldSection[section.key] = s }
        for (s, section) in new.sections.enumerated() { newSection[section.key] = s }
        change.deletedSections = old.sections.indices.filter { newSection[old.sections[$0].key] == nil }
        change.insertedSections = new.sections.indices.filter { oldSection[new.sections[$0].key] == nil }

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
            for (k, entry) in stayed.enumerated() where !kept.contains(k) {
                change.movedItems.append(.init(from: ResultPosition(section: sameSectionBefore!, item: entry.oldIndex), to: ResultPosition(section: s, item: entry.newIndex)))
            }
        }
        for (s, section) in old.sections.enumerated() {
            for (i, item) in section.items.enumerated() where newPositions[item] == nil {
                change.deletedItems.append(ResultPosition(section: s, item: i))
            }
        }
        for (item, properties) in updated where !properties.isEmpty {
            guard oldPositions[item] != nil, let position = newPositions[item] else { continue }
            change.updatedItems.append(.init(at: position, properties: properties))
        }
        change.deletedItems.sort()
        change.insertedItems.sort()
        change.movedItems.sort { $0.to < $1.to }
        change.updatedItems.sort { $0.at < $1.at }
        return change
    }

    /// The indices (into `values`) of one longest strictly increasing subsequence.
    static func longestIncreasingRun(_ values: [Int]) -> Set<Int> {
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
        var run: Set<Int> = []
        var i = tails[tails.count - 1]
        while i >= 0 {
            run.insert(i)
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
