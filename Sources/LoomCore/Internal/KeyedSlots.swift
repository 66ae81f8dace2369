/// Values by `Int64` key, where the keys of one dense run are found by their position: an
/// array of slots for the keys `base ..< base + slots.count`, and a dictionary for the keys
/// the run does not reach.
///
/// Why not only a dictionary: a context's registry (``IdentityMap``) files every object by its
/// row's key, and stores hand keys out in order, so a fetch registers a run of neighbouring
/// keys, mostly in order, and its objects later leave in that order. In a hash table each of
/// those is a cache miss at a random bucket once the table outgrows the processor's cache; in
/// the run they are neighbours, and a slot takes 16 bytes where a dictionary takes 24 a bucket
/// at under 75% full.
///
/// The run never spans more than four slots an entry plus ``slack``: a key that would stretch
/// it further goes to the dictionary. (At worst, a quarter full, it takes 64 bytes an entry,
/// what a dictionary of 24-byte buckets takes at its emptiest; rows with three in four of
/// their neighbours deleted still share it.)
///
/// So that an early few keys far from the later many do not keep the many in the dictionary,
/// the run moves to the densest keys (``replan()``) when the dictionary holds more keys than
/// the run and has doubled since the run last moved: a replan sorts every key, so it waits
/// until the keys it could gain outnumber those it would only sort again.
///
/// A value type with no references of its own beyond the array and the dictionary. Confined
/// like the map that holds it.
struct KeyedSlots<Value> {
    /// The key of the first slot.
    private var base: Int64 = 0
    /// The run: the value of key `base + position`, or `nil`. Empty exactly when ``inRun`` is 0:
    /// a run that loses its last value starts again at the next key filed outside it.
    private var slots: [Value?] = []
    /// How many slots hold a value.
    private var inRun = 0
    /// The values of keys outside the run when they were filed. A key the run grew over later
    /// stays here until it is filed again or taken out.
    private var scattered: [RowKey: Value] = [:]
    /// The size of ``scattered`` that moves the run next (see ``replan()``).
    private var replanAt = KeyedSlots.slack

    /// Slots the run may span for each of its entries.
    static var spread: Int { 4 }
    /// Slots the run may span beyond ``spread`` for each entry: a few keys apart still share it.
    static var slack: Int { 64 }

    /// The number of values.
    var count: Int { inRun + scattered.count }
    /// How many of them the run holds (for tests: a dense fetch's keys belong there).
    var runCount: Int { inRun }

    /// Whether `key` is in the run, and where.
    @inline(__always)
    private func position(of key: Int64) -> Int? {
        let (offset, overflow) = key.subtractingReportingOverflow(base)
        guard !overflow, offset >= 0, offset < Int64(slots.count) else { return nil }
        return Int(truncatingIfNeeded: offset)
    }

    /// The value filed for `key`.
    @inline(__always)
    subscript(key: Int64) -> Value? {
        if let position = position(of: key), let value = slots[position] { return value }
        return scattered.isEmpty ? nil : scattered[RowKey(key)]
    }

    /// Files `value` for `key`.
    ///
    /// - Returns: the value it replaced.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Int64) -> Value? {
        guard let position = position(of: key) ?? extendRun(to: key) else {
            let replaced = scattered.updateValue(value, forKey: RowKey(key))
            if replaced == nil && scattered.count >= replanAt && scattered.count > inRun { replan() }
            return replaced
        }
        if let replaced = slots[position] {
            slots[position] = value
            return replaced
        }
        slots[position] = value
        inRun += 1
        // The run may have grown over a key filed before it reached it.
        return scattered.isEmpty ? nil : scattered.removeValue(forKey: RowKey(key))
    }

    /// Takes `key`'s value out.
    ///
    /// - Returns: the value taken out.
    @discardableResult
    mutating func removeValue(forKey key: Int64) -> Value? {
        if let position = position(of: key), let removed = slots[position] {
            empty(position)
            return removed
        }
        return scattered.isEmpty ? nil : scattered.removeValue(forKey: RowKey(key))
    }

    /// Takes `key`'s value out if `condition` holds for it.
    ///
    /// - Returns: whether a value was taken out.
    mutating func removeValue(forKey key: Int64, where condition: (Value) -> Bool) -> Bool {
        if let position = position(of: key), let value = slots[position] {
            guard condition(value) else { return false }
            empty(position)
            return true
        }
        guard !scattered.isEmpty, let index = scattered.index(forKey: RowKey(key)),
            condition(scattered.values[index])
        else { return false }
        scattered.remove(at: index)
        return true
    }

    /// Makes room for `count` more values, in the run: a fetch registers neighbouring keys.
    mutating func reserveCapacity(forNew count: Int) {
        slots.reserveCapacity(slots.count + count)
    }

    private mutating func empty(_ position: Int) {
        slots[position] = nil
        inRun -= 1
        if inRun == 0 {
            // The run starts again at the next key filed; its memory is kept for it.
            slots.removeAll(keepingCapacity: true)
            base = 0
        }
    }

    /// The position of `key` once the run is grown to reach it, or `nil` when that would
    /// stretch it past ``spread`` slots an entry plus ``slack``.
    private mutating func extendRun(to key: Int64) -> Int? {
        if inRun == 0 {
            slots.append(nil)
            base = key
            return 0
        }
        let limit = Int64(Self.spread * (inRun + 1) + Self.slack)
        let count = Int64(slots.count)
        let (offset, overflow) = key.subtractingReportingOverflow(base)
        guard !overflow else { return nil }
        if offset >= count {
            guard offset < limit else { return nil }
            slots.append(contentsOf: repeatElement(nil, count: Int(offset - count) + 1))
            return Int(offset)
        }
        // Below the run: it moves up by as many slots again as it has, within the limit, so
        // that keys filed in descending order move it once per doubling, not once per key.
        guard offset > -limit else { return nil }
        let below = -offset
        guard below + count <= limit else { return nil }
        var front = below + Swift.min(count, limit - below - count)
        if base.subtractingReportingOverflow(front).overflow { front = below }
        slots.insert(contentsOf: repeatElement(nil, count: Int(front)), at: 0)
        base -= front
        return Int(front - below)
    }

    /// Moves the run to the densest window of all the keys: the one with the most keys among
    /// those that span at most ``spread`` slots a key plus ``slack``. The keys outside it go to
    /// the dictionary. Runs only when the dictionary holds more keys than the run and has
    /// doubled since the last time, so its sorting costs each key filed a bounded amount on
    /// average.
    private mutating func replan() {
        let all = self.sorted { $0.key < $1.key }
        defer { replanAt = Swift.max(Self.slack, 2 * scattered.count) }
        var best = (start: 0, end: 0)
        var start = 0
        for end in all.indices {
            while true {
                let (span, overflow) = all[end].key.subtractingReportingOverflow(all[start].key)
                if !overflow && span < Int64(Self.spread * (end - start + 1) + Self.slack) { break }
                start += 1
            }
            if end - start > best.end - best.start { best = (start, end) }
        }
        guard !all.isEmpty, best.end - best.start + 1 > inRun else { return }
        slots.removeAll(keepingCapacity: true)
        scattered.removeAll(keepingCapacity: true)
        inRun = 0
        base = all[best.start].key
        slots.append(contentsOf: repeatElement(nil, count: Int(all[best.end].key - base) + 1))
        for (index, entry) in all.enumerated() {
            if index >= best.start && index <= best.end {
                slots[Int(entry.key - base)] = entry.value
                inRun += 1
            } else {
                scattered[RowKey(entry.key)] = entry.value
            }
        }
    }

    /// What is wrong with the table, if anything: the run's count, and no key both in the run
    /// and in the dictionary.
    var problems: [String] {
        var problems: [String] = []
        let filled = slots.reduce(0) { $0 + ($1 == nil ? 0 : 1) }
        if filled != inRun { problems.append("the run counts \(inRun) values but holds \(filled)") }
        if inRun == 0 && !slots.isEmpty { problems.append("an empty run spans \(slots.count) slots") }
        for key in scattered.keys where self.position(of: key.value).map({ slots[$0] != nil }) ?? false {
            problems.append("key \(key.value) is filed twice")
        }
        return problems
    }
}

extension KeyedSlots: Sequence {
    /// The run's values in key order, then the dictionary's.
    struct Iterator: IteratorProtocol {
        fileprivate let base: Int64
        fileprivate let slots: [Value?]
        fileprivate var position = 0
        fileprivate var scattered: Dictionary<RowKey, Value>.Iterator

        mutating func next() -> (key: Int64, value: Value)? {
            while position < slots.count {
                defer { position += 1 }
                if let value = slots[position] { return (base + Int64(position), value) }
            }
            return scattered.next().map { ($0.key.value, $0.value) }
        }
    }

    func makeIterator() -> Iterator {
        Iterator(base: base, slots: slots, scattered: scattered.makeIterator())
    }

    var underestimatedCount: Int { count }
}
