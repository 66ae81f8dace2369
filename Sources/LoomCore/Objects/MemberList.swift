/// The keys of a loaded to-many relationship: in order for an ordered one, by key otherwise.
struct MemberList: Equatable {
    private(set) var keys: [Int64] = []
    /// The keys as a set, for lists too long to search: most lists are short, and building a
    /// set for each was a third of a small to-many fault's own cost.
    private var set: Set<Int64>?
    private static let searchLimit = 16
    /// The saved members' rows as the query that loaded the list read them, sorted by key: a
    /// member's new fault takes its row, so that using it needs no lookup (the query's change
    /// generation, ``rowsReadAt``, still catches rows a later save replaced). Empty when the
    /// rows went to the shared row cache instead (see `faultsHoldFetchedRows`).
    private(set) var rows: [StoreRow] = []
    /// The coordinator's change generation before the query that read ``rows``: their faults'
    /// age (see ``ObjectBacking/heldRowAge``).
    private(set) var rowsReadAt: UInt64 = 0

    /// Keeps the saved members' rows, read by a query that began at `generation`.
    mutating func keep(_ rows: [StoreRow], readAt generation: UInt64) {
        self.rows = rows
        rowsReadAt = generation
    }

    init(_ keys: [Int64] = []) {
        if zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) {
            // Increasing, so distinct (a loaded list, sorted by key): shared as it is, instead
            // of appended key by key into a growing array, for every to-many fault.
            self.keys = keys
            if keys.count > Self.searchLimit { set = Set(keys) }
        } else if keys.count <= Self.searchLimit {
            for key in keys where !self.keys.contains(key) { self.keys.append(key) }
        } else {
            var set = Set<Int64>(minimumCapacity: keys.count)
            for key in keys where set.insert(key).inserted { self.keys.append(key) }
            self.set = set
        }
    }

    static func == (lhs: MemberList, rhs: MemberList) -> Bool { lhs.keys == rhs.keys }

    /// The row read for a member, if any.
    func row(for key: Int64) -> StoreRow? {
        var low = 0, high = rows.count
        while low < high {
            let middle = (low + high) / 2
            if rows[middle].key < key { low = middle + 1 } else { high = middle }
        }
        return low < rows.count && rows[low].key == key ? rows[low] : nil
    }

    func contains(_ key: Int64) -> Bool { set?.contains(key) ?? keys.contains(key) }

    mutating func append(_ key: Int64) {
        guard !contains(key) else { return }
        keys.append(key)
        if set != nil {
            set?.insert(key)
        } else if keys.count > Self.searchLimit {
            set = Set(keys)
        }
    }

    mutating func remove(_ key: Int64) {
        guard contains(key) else { return }
        set?.remove(key)
        keys.removeAll { $0 == key }
    }

    var count: Int { keys.count }
}
