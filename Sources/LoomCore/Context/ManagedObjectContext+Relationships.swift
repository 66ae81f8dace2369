extension ManagedObjectContext {
    // MARK: Reading

    /// The registered object for a key, or a new fault for it. No I/O.
    func object(of entity: EntityDescription, key: Int64) -> any BackedObject {
        if let registered = identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key)) { return registered }
        return register(ObjectBacking(entity: entity, key: key, context: self))
    }

    /// The registered object for a key, if any.
    func registeredBacking(of entity: EntityDescription, key: Int64) -> ObjectBacking? {
        identityMap.backing(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key))
    }

    /// Runs `body` with the backing of an object, registering a fault when needed, and keeps the
    /// object alive meanwhile (the registry does not keep clean objects alive).
    func withObject<T>(_ entity: EntityDescription, _ key: Int64, _ body: (ObjectBacking) -> T) -> T {
        let object = self.object(of: entity, key: key)
        return withExtendedLifetime(object) { body(object._loomBacking) }
    }

    /// The object a to-one relationship of a loaded object leads to.
    func destinationObject(of backing: ObjectBacking, relationship j: Int) -> (any BackedObject)? {
        let r = coordinator.schema.relationship(j, of: backing.entity)
        guard case .foreignKey(let slot) = r.storage, case .integer(let key) = backing.values[slot] else { return nil }
        return object(of: r.destination, key: key)
    }

    /// The objects a to-many relationship of a loaded object holds, in order.
    func destinationObjects(of backing: ObjectBacking, relationship j: Int) -> [any BackedObject] {
        let r = coordinator.schema.relationship(j, of: backing.entity)
        if r.description.kind == .toOne {
            return destinationObject(of: backing, relationship: j).map { [$0] } ?? []
        }
        let list = members(of: backing, r)
        if list.rows.isEmpty { return list.keys.map { object(of: r.destination, key: $0) } }
        // Members not registered become faults holding the row their query read.
        let form = faultMaterialization(readAt: list.rowsReadAt)
        return list.keys.map { key in
            if let row = list.row(for: key) { return materialize(row, of: r.destination, as: form) }
            return object(of: r.destination, key: key)
        }
    }

    /// The keys a relationship of an object holds now: the foreign key of a to-one, the loaded
    /// (or newly loaded) members of a to-many.
    func relatedKeys(of backing: ObjectBacking, _ r: ResolvedRelationship) -> [Int64] {
        switch r.storage {
        case .foreignKey(let slot):
            if backing.state == .fault { fulfillFault(backing) }
            if case .integer(let key) = backing.values[slot] { return [key] }
            return []
        default:
            return members(of: backing, r).keys
        }
    }

    /// A to-many relationship's members, loaded with one query the first time.
    func members(of backing: ObjectBacking, _ r: ResolvedRelationship) -> MemberList {
        if let cached = backing.toMany[r.index] { return cached }
        let holdsRows = membersHoldRows
        // Read before the query: the rows it returns are at least this recent.
        let generation = coordinator.currentGeneration
        let pairs: [(owner: Int64, row: StoreRow)]
        do {
            pairs = try currentRelated(r, keys: [backing.key])
        } catch {
            // The store failed: the unsaved members only, not kept, so that the next use reads
            // again; the next save reports the error (see `pendingStoreError`).
            recordReadFailure(error)
            return memberList(of: backing, r, [])
        }
        var list = memberList(of: backing, r, pairs.map(\.row.key))
        if holdsRows {
            list.keep(savedRows(pairs.map(\.row), of: r.destination), readAt: generation)
        } else {
            cacheMemberRows(pairs.map(\.row), of: r.destination, readAt: generation)
        }
        backing.toMany[r.index] = list
        return list
    }

    /// Whether loaded to-many relationships keep their members' rows (``MemberList/rows``)
    /// rather than putting them in the shared row cache: as fetched faults keep theirs.
    var membersHoldRows: Bool { parent == nil && faultsHoldFetchedRows }

    /// The rows of objects without unsaved changes here (the others are registered and hold
    /// their own values), sorted by key.
    func savedRows(_ rows: [StoreRow], of entity: EntityDescription) -> [StoreRow] {
        let id = ObjectIdentifier(entity)
        let hasChanges = !(pending.inserted.isEmpty && pending.updated.isEmpty && pending.deleted.isEmpty && pending.insertedDeleted.isEmpty)
        var saved = !hasChanges ? rows : rows.filter { row in
            let k = RowCacheKey(entity: id, key: row.key)
            return pending.inserted[k] == nil && pending.updated[k] == nil && pending.deleted[k] == nil && pending.insertedDeleted[k] == nil
        }
        if !saved.isEmpty, !zip(saved, saved.dropFirst()).allSatisfy({ $0.key < $1.key }) { saved.sort { $0.key < $1.key } }
        return saved
    }

    /// Puts loaded members' rows where their faults will look: the shared row cache, or, in a
    /// child context or one pinned to a query generation, straight into its objects (their
    /// faults would ask the parent again; the cache holds the latest rows).
    /// `generation`: the coordinator's, read before the rows were.
    func cacheMemberRows(_ rows: [StoreRow], of entity: EntityDescription, readAt generation: UInt64) {
        if parent == nil && readsLatestData {
            coordinator.cache(rows.filter { registeredBacking(of: entity, key: $0.key) == nil }, of: entity, readAt: generation)
        } else {
            for row in rows { _ = materialize(row, of: entity, as: .loaded) }
        }
    }

    /// Members in the relationship's order: an ordered relationship follows the order saved
    /// on its owner, with members it does not list (added from the other side) at the end by
    /// key; an unordered one is ordered by key.
    func memberList(of backing: ObjectBacking, _ r: ResolvedRelationship, _ keys: [Int64]) -> MemberList {
        let sorted = zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) ? keys : keys.sorted()
        guard r.description.kind == .orderedToMany, let slot = backing.entity.storedValueIndex(ofRelationship: r.index) else {
            return MemberList(sorted)
        }
        if backing.state == .fault { fulfillFault(backing) }
        let present = Set(keys)
        let order = (backing.values.indices.contains(slot) ? backing.values[slot] : .null).orderKeys.filter(present.contains)
        let listed = Set(order)
        return MemberList(order + sorted.filter { !listed.contains($0) })
    }

    /// The corrector of reads by this context's unsaved changes.
    var pendingChangeEvaluator: PendingChangeEvaluator { PendingChangeEvaluator(context: self) }

    /// Whether this context has unsaved changes that can change the answer to `query`.
    func hasPendingChanges(affecting query: StoreQuery) -> Bool { pendingChangeEvaluator.affects(query) }

    /// The destinations of a to-many relationship for each of `keys`, as this context sees
    /// them: its source's answer corrected by this context's unsaved changes.
    func currentRelated(_ r: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [(owner: Int64, row: StoreRow)] {
        try pendingChangeEvaluator.currentRelated(r, keys: keys)
    }
    /// The destinations of a to-many relationship as this context's source sees them: the store
    /// for a root context, the parent (with its unsaved changes) for a child.
    func baseRelated(_ r: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [(owner: Int64, row: StoreRow)] {
        guard let parent else { return try coordinator.fetchRelated(r, keys: keys, pinned: pinnedSnapshot()).map { ($0.owner, $0.row) } }
        let result = try parent.run { (context) throws(LoomError) -> [RelatedRow] in
            try context.currentRelated(r, keys: keys).map { RelatedRow(owner: $0.owner, row: $0.row) }
        }
        return result.map { ($0.owner, $0.row) }
    }

    // MARK: Changing (see Graph/)

    /// The graph of this context's objects: inverses and delete rules.
    var graph: ObjectGraph { ObjectGraph(context: self) }

    /// Sets relationship `j` of a loaded object, keeping every inverse in step.
    func setRelationship(_ j: Int, of backing: ObjectBacking, to objects: [any BackedObject]) {
        graph.setRelationship(j, of: backing, to: objects)
    }

    /// Relates the object with key `other` to `backing` through `r`, and its inverse.
    func relate(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) { graph.relate(r, backing, other) }

    /// Takes the object with key `other` out of `backing`'s relationship `r`, and its inverse.
    func unrelate(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) { graph.unrelate(r, backing, other) }

    /// Forgets every loaded to-many list (see ``ObjectGraph/forgetLoadedRelationships()``).
    func forgetLoadedRelationships() { graph.forgetLoadedRelationships() }

    /// See ``ObjectGraph/forgetInverseLists(of:before:dropAll:)``.
    func forgetInverseLists(of backing: ObjectBacking, before: [StoredValue], dropAll: Bool = false) {
        graph.forgetInverseLists(of: backing, before: before, dropAll: dropAll)
    }

    /// Applies the delete rules of `objects`, by default of every object deleted since the last
    /// time (see ``ObjectGraph/propagateDeletes(_:)``).
    func propagateDeletes(_ objects: [any BackedObject]? = nil) { graph.propagateDeletes(objects) }

    /// See ``ObjectGraph/loadToManyRelationships(of:where:)``.
    func loadToManyRelationships(of backings: [ObjectBacking], where rule: (DeleteRule) -> Bool) {
        graph.loadToManyRelationships(of: backings, where: rule)
    }

    /// The first deny relationship of a deleted object that still holds an undeleted object.
    func deniedRelationship(of backing: ObjectBacking) -> (relationship: String, count: Int)? {
        graph.deniedRelationship(of: backing)
    }
}
