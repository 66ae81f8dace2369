extension ManagedObjectContext {
    /// Writes every unsaved change to the store in one transaction.
    ///
    /// First the delete rules of deleted objects run (``processPendingChanges()``). Then the
    /// changes are validated: every required attribute and to-one relationship has a value of
    /// its type, no deleted object still holds objects in a relationship whose rule is
    /// ``DeleteRule/deny``, and no uniqueness constraint is broken among the objects being saved. The store
    /// then checks uniqueness against saved rows and that no saved row changed underneath
    /// (optimistic locking); what it finds is resolved by ``mergePolicy``. If the save fails,
    /// nothing is written, the error says what and where (with every conflict in
    /// ``LoomError/conflicts``), and the context is left exactly as it was, still usable: fix
    /// the cause and save again.
    ///
    /// Posts `willSave`, then `didSave` with the saved changes; other contexts of the
    /// coordinator that merge automatically receive the save on their own isolation.
    ///
    /// - Throws: ``LoomError`` with code ``LoomError/Code/missingRequiredValue``,
    ///   ``LoomError/Code/typeMismatch``, ``LoomError/Code/deleteDenied``,
    ///   ``LoomError/Code/uniquenessViolation``, ``LoomError/Code/versionConflict`` or
    ///   ``LoomError/Code/storeFailure``.
    public func save() throws(LoomError) {
        try save(mergingIntoViewContext: true)
    }

    /// Runs one save (``SaveOperation``) on the context's isolation.
    func save(mergingIntoViewContext: Bool) throws(LoomError) {
        ConcurrencyDebugging.check(self, "save()")
        try SaveOperation(self, mergingIntoViewContext: mergingIntoViewContext).run()
    }

    func objectID(_ entity: EntityDescription, _ key: Int64) -> AnyObjectID {
        AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: entity.name, primaryKey: key)
    }

    /// The inserted objects' storage, entity by entity in schema order, each entity's by key
    /// (the order they were inserted in): a store writes each entity's rows with one statement.
    func insertedBackingsInOrder() -> [ObjectBacking] {
        // Most saves insert objects of one entity: then there is nothing to group.
        var backings: [ObjectBacking] = []
        backings.reserveCapacity(pending.inserted.count)
        var mixed = false
        for object in pending.inserted.values {
            let b = object._loomBacking
            if let first = backings.first, first.entity !== b.entity { mixed = true }
            backings.append(b)
        }
        guard mixed else { return Self.sortedByKey(backings) }
        var groups = groupedByEntity(backings) { $0.entity }
        var ordered: [ObjectBacking] = []
        ordered.reserveCapacity(pending.inserted.count)
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
        let order = changeSetInsertOrder.count == pending.inserted.count ? changeSetInsertOrder : pending.inserted.values.map(\._loomBacking)
        changeSetInsertOrder = []
        for b in order {
            b.isInserted = false
            if index < savedInserts.count, savedInserts[index].key == b.key, savedInserts[index].entity === b.entity {
                b.committed = savedInserts[index].values
            } else {
                b.committed = b.values
            }
            index += 1
            b.version = 1
            if recording { changes.inserted.insert(objectID(of: b)) }
            if collectingRows, let committed = b.committed { rows[objectID(of: b)] = StoreRow(key: b.key, version: 1, values: committed) }
        }
        // Objects that changed the same properties share one set of their names (a save of
        // 10,000 new scores makes one set, not 10,000): less to allocate and free, and merges
        // and live queries that compare the sets find them identical at once.
        var lastNames: (entity: ObjectIdentifier, slots: [Int], names: Set<String>)?
        for (key, object) in pending.updated where pending.deleted[key] == nil {
            let b = object._loomBacking
            let changed = b.changedSlots()
            b.isUpdated = false
            if changed.isEmpty { continue }
            b.committed = b.values
            b.version += 1
            if collectingRows { rows[objectID(of: b)] = StoreRow(key: b.key, version: b.version, values: b.values) }
            guard recording else { continue }
            let id = objectID(of: b)
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
        for (key, object) in pending.deleted {
            identityMap.remove(key)
            if recording { changes.deleted.insert(objectID(of: object._loomBacking)) }
            object._loomBacking.invalidate(reason: "it was deleted and the deletion saved")
        }
        // Owners whose to-many relationships gained or lost objects (stored on the other side).
        for (key, entry) in pending.relationships.entries where recording && pending.inserted[key] == nil && pending.deleted[key] == nil {
            let id = objectID(entry.entity, entry.key)
            changes.updated.insert(id)
            changes.changedProperties[id, default: []].formUnion(entry.relationships.map { entry.entity.relationships[$0].name })
        }
        pending = PendingChanges()
        checkIdentityMap()
        return (changes, rows)
    }

    func objectID(of backing: ObjectBacking) -> AnyObjectID {
        AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: backing.entity.name, primaryKey: backing.key)
    }
}
