extension SaveOperation {
    /// A new object and its storage, as a save lists them.
    typealias InsertedObject = (object: any BackedObject, backing: ObjectBacking)

    /// The inserted objects with their storage, entity by entity in schema order, each entity's
    /// by key (the order they were inserted in): a store writes each entity's rows with one
    /// statement.
    func insertedInOrder() -> [InsertedObject] {
        var rank: [ObjectIdentifier: Int] = [:]
        for (i, entity) in coordinator.schema.entities.enumerated() { rank[ObjectIdentifier(entity)] = i }
        if let ordered = denseInKeyOrder(context.pending.inserted, rank: rank) { return ordered }
        var inserted: [InsertedObject] = []
        inserted.reserveCapacity(context.pending.inserted.count)
        var mixed = false
        for object in context.pending.inserted.values {
            let b = object._loomBacking
            if let first = inserted.first, first.backing.entity !== b.entity { mixed = true }
            inserted.append((object, b))
        }
        guard mixed else { return Self.sortedByKey(inserted) { $0.backing.key } }
        var groups = groupedByEntity(inserted) { $0.backing.entity }
        var ordered: [InsertedObject] = []
        ordered.reserveCapacity(context.pending.inserted.count)
        // Entities outside the schema cannot be inserted; any left go last, by name.
        groups.sort { a, b in
            let ra = rank[ObjectIdentifier(a.entity)] ?? Int.max, rb = rank[ObjectIdentifier(b.entity)] ?? Int.max
            return ra != rb ? ra < rb : a.entity.name < b.entity.name
        }
        for group in groups { ordered += Self.sortedByKey(group.items) { $0.backing.key } }
        return ordered
    }

    /// The common case of ``insertedInOrder()``, in one pass over the objects: new objects whose
    /// keys were handed out together, so that each entity's keys are dense. Each object goes
    /// straight to its place in a table as long as its entity's keys' range (read from the
    /// dictionary's keys: no object touched to find it), and is moved out of it in order.
    /// `rank` is each entity's place in the schema. `nil` for anything else.
    func denseInKeyOrder(_ inserted: [RowCacheKey: any BackedObject], rank: [ObjectIdentifier: Int]) -> [InsertedObject]? {
        guard inserted.count > 1 else { return nil }
        struct Group {
            let entity: ObjectIdentifier
            var low = Int64.max, high = Int64.min, count = 0
            /// Where the group's keys start in the table.
            var base = 0
        }
        var groups: [Group] = []
        var last = -1
        for key in inserted.keys {
            if last < 0 || groups[last].entity != key.entity {
                if let i = groups.firstIndex(where: { $0.entity == key.entity }) {
                    last = i
                } else {
                    groups.append(Group(entity: key.entity))
                    last = groups.count - 1
                }
            }
            groups[last].low = min(groups[last].low, key.key)
            groups[last].high = max(groups[last].high, key.key)
            groups[last].count += 1
        }
        // Entities in schema order; every inserted object's entity is in the schema.
        var ranked: [(rank: Int, group: Group)] = []
        for group in groups {
            guard let rank = rank[group.entity] else { return nil }
            ranked.append((rank, group))
        }
        ranked.sort { $0.rank < $1.rank }
        var size = 0
        for i in ranked.indices {
            let (span, overflow) = ranked[i].group.high.subtractingReportingOverflow(ranked[i].group.low)
            guard !overflow, span < 4 * Int64(ranked[i].group.count) else { return nil }
            ranked[i].group.base = size
            size += Int(span) + 1
        }
        groups = ranked.map(\.group)
        var table = [(any BackedObject)?](repeating: nil, count: size)
        last = 0
        // Keys are distinct in a dictionary: no place is taken twice.
        for (key, object) in inserted {
            if groups[last].entity != key.entity { last = groups.firstIndex { $0.entity == key.entity }! }
            table[groups[last].base + Int(key.key - groups[last].low)] = object
        }
        var ordered: [InsertedObject] = []
        ordered.reserveCapacity(inserted.count)
        for place in table.indices {
            if let object = table[place].take() { ordered.append((object, object._loomBacking)) }
        }
        return ordered
    }

    /// `items` in the order of their keys (`key`, distinct in a valid list). Keys handed out
    /// together are dense: then each item's position goes straight to its place in a table as
    /// long as the keys' range, and the items are copied out once in that order (linear), else
    /// they are sorted.
    static func sortedByKey<Item>(_ items: [Item], key: (Item) -> Int64) -> [Item] {
        guard items.count > 1 else { return items }
        var low = Int64.max, high = Int64.min
        for item in items {
            let k = key(item)
            low = min(low, k)
            high = max(high, k)
        }
        let (span, overflow) = high.subtractingReportingOverflow(low)
        guard !overflow, span < 4 * Int64(items.count) else { return items.sorted { key($0) < key($1) } }
        var positions = [Int](repeating: -1, count: Int(span) + 1)
        for (position, item) in items.enumerated() {
            let slot = Int(key(item) - low)
            // Two objects with one key cannot both be inserted; sort rather than lose one.
            if positions[slot] >= 0 { return items.sorted { key($0) < key($1) } }
            positions[slot] = position
        }
        var sorted: [Item] = []
        sorted.reserveCapacity(items.count)
        for position in positions where position >= 0 { sorted.append(items[position]) }
        return sorted
    }

    /// After a successful save: every object's state in line with the store. Returns what was
    /// saved, for the `didSave` event.
    ///
    /// Every saved object's current values become its committed values as they are, held once
    /// (``ObjectBacking/commitCurrentValues()``): the change set the store applied was made
    /// from them just before it was written, and nothing changes them in between.
    /// With `recording` off (nobody listens), the returned changes stay empty. With `rowsFor`,
    /// it also returns the saved rows of the inserted and updated objects (their values and new
    /// versions), which the save event carries so that other contexts merge without I/O.
    func commitSavedState(recording: Bool, rowsFor collectingRows: Bool = false) -> (changes: ObjectChanges, rows: [AnyObjectID: StoreRow]) {
        var changes = ObjectChanges()
        var rows: [AnyObjectID: StoreRow] = [:]
        let order = context.changeSetInsertOrder.count == context.pending.inserted.count ? context.changeSetInsertOrder : insertedInOrder()
        context.changeSetInsertOrder = []
        for (_, b) in order {
            b.isInserted = false
            b.commitCurrentValues()
            b.version = 1
            if recording { changes.inserted.insert(context.objectID(of: b)) }
            if collectingRows, let committed = b.committed { rows[context.objectID(of: b)] = StoreRow(key: b.key, version: 1, values: committed) }
        }
        // Objects that changed the same properties share one set of their names (a save of
        // 10,000 new scores makes one set, not 10,000): less to allocate and free, and merges
        // and live queries that compare the sets find them identical at once.
        var lastNames: (entity: ObjectIdentifier, slots: [Int], names: Set<String>)?
        for (key, object) in context.pending.updated where context.pending.deleted[key] == nil {
            let b = object._loomBacking
            let changed = b.changedSlots()
            b.isUpdated = false
            if changed.isEmpty { continue }
            b.commitCurrentValues()
            b.version += 1
            if collectingRows { rows[context.objectID(of: b)] = StoreRow(key: b.key, version: b.version, values: b.values) }
            guard recording else { continue }
            let id = context.objectID(of: b)
            changes.updated.insert(id)
            let slots = changed.map(\.0)
            let names: Set<String>
            if let last = lastNames, last.entity == ObjectIdentifier(b.entity), last.slots == slots {
                names = last.names
            } else {
                names = Set(slots.map { b.entity.storedValueName(at: $0) })
                lastNames = (ObjectIdentifier(b.entity), slots, names)
            }
            if let earlier = changes.changedProperties.updateValue(names, forKey: id) { changes.changedProperties[id] = earlier.union(names) }
        }
        for (key, object) in context.pending.deleted {
            context.identityMap.remove(key)
            if recording { changes.deleted.insert(context.objectID(of: object._loomBacking)) }
            object._loomBacking.invalidate(reason: "it was deleted and the deletion saved")
        }
        // Owners whose to-many relationships gained or lost objects (stored on the other side).
        for (key, entry) in context.pending.relationships.entries where recording && context.pending.inserted[key] == nil && context.pending.deleted[key] == nil {
            let id = context.objectID(entry.entity, entry.key)
            changes.updated.insert(id)
            changes.changedProperties[id, default: []].formUnion(entry.relationships.map { entry.entity.relationships[$0].name })
        }
        context.pending = PendingChanges()
        context.checkIdentityMap()
        // The new objects that only the pending changes held are freed when the last list of
        // them goes (`order`, or the save's own), not with the dictionary: in key order, the
        // order they were made in, so that the teardown walks memory forwards and hands malloc
        // its chunks in order, rather than jumping through the heap in the dictionary's hash
        // order.
        withExtendedLifetime(order) {}
        return (changes, rows)
    }
}
