extension SaveOperation {
    /// The inserted objects' storage, entity by entity in schema order, each entity's by key
    /// (the order they were inserted in): a store writes each entity's rows with one statement.
    func insertedBackingsInOrder() -> [ObjectBacking] {
        // Most saves insert objects of one entity: then there is nothing to group.
        var backings: [ObjectBacking] = []
        backings.reserveCapacity(context.pending.inserted.count)
        var mixed = false
        for object in context.pending.inserted.values {
            let b = object._loomBacking
            if let first = backings.first, first.entity !== b.entity { mixed = true }
            backings.append(b)
        }
        guard mixed else { return Self.sortedByKey(backings) }
        var groups = groupedByEntity(backings) { $0.entity }
        var ordered: [ObjectBacking] = []
        ordered.reserveCapacity(context.pending.inserted.count)
        var rank: [ObjectIdentifier: Int] = [:]
        for (i, entity) in coordinator.schema.entities.enumerated() { rank[ObjectIdentifier(entity)] = i }
        // Entities outside the schema cannot be inserted; any left go last, by name.
        groups.sort { a, b in
            let ra = rank[ObjectIdentifier(a.entity)] ?? Int.max, rb = rank[ObjectIdentifier(b.entity)] ?? Int.max
            return ra != rb ? ra < rb : a.entity.name < b.entity.name
        }
        for group in groups { ordered += Self.sortedByKey(group.items) }
        return ordered
    }

    /// `backings` in key order. Keys handed out together are dense: then each goes straight to
    /// its place in a table as long as the keys' range (linear), else they are sorted.
    static func sortedByKey(_ backings: [ObjectBacking]) -> [ObjectBacking] {
        guard backings.count > 1 else { return backings }
        var low = Int64.max, high = Int64.min
        for b in backings {
            low = min(low, b.key)
            high = max(high, b.key)
        }
        let (span, overflow) = high.subtractingReportingOverflow(low)
        guard !overflow, span < 4 * Int64(backings.count) else { return backings.sorted { $0.key < $1.key } }
        var table = [ObjectBacking?](repeating: nil, count: Int(span) + 1)
        for b in backings {
            // Two objects with one key cannot both be inserted; sort rather than lose one.
            if table[Int(b.key - low)] != nil { return backings.sorted { $0.key < $1.key } }
            table[Int(b.key - low)] = b
        }
        var sorted: [ObjectBacking] = []
        sorted.reserveCapacity(backings.count)
        for case let b? in table { sorted.append(b) }
        return sorted
    }

    /// After a successful save: every object's state in line with the store. Returns what was
    /// saved, for the `didSave` event.
    ///
    /// `saved` is the change set the store applied, whose inserts are the inserted objects'
    /// values in ``insertedBackingsInOrder()``'s order: they become the committed values as they
    /// are (one array shared, not a copy per object).
    /// With `recording` off (nobody listens), the returned changes stay empty. With `rowsFor`,
    /// it also returns the saved rows of the inserted and updated objects (their values and new
    /// versions), which the save event carries so that other contexts merge without I/O.
    func commitSavedState(saved: StoreChangeSet? = nil, recording: Bool, rowsFor collectingRows: Bool = false) -> (changes: ObjectChanges, rows: [AnyObjectID: StoreRow]) {
        var changes = ObjectChanges()
        var rows: [AnyObjectID: StoreRow] = [:]
        let savedInserts = saved?.inserts ?? []
        var index = 0
        let order = context.changeSetInsertOrder.count == context.pending.inserted.count ? context.changeSetInsertOrder : context.pending.inserted.values.map(\._loomBacking)
        context.changeSetInsertOrder = []
        for b in order {
            b.isInserted = false
            if index < savedInserts.count, savedInserts[index].key == b.key, savedInserts[index].entity === b.entity {
                b.committed = savedInserts[index].values
            } else {
                b.committed = b.values
            }
            index += 1
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
            b.committed = b.values
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
        return (changes, rows)
    }
}
