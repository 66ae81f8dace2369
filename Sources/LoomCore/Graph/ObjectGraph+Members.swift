extension ObjectGraph {
    // MARK: Reading relationships

    /// The objects a to-many relationship of a loaded object holds, in order.
    func destinationObjects(of backing: ObjectBacking, relationship j: Int) -> [any BackedObject] {
        let r = context.coordinator.schema.relationship(j, of: backing.entity)
        if r.description.kind == .toOne {
            return context.destinationObject(of: backing, relationship: j).map { [$0] } ?? []
        }
        let list = members(of: backing, r)
        if list.rows.isEmpty { return context.objects(for: r, keys: list.keys) }
        // Members not registered become faults holding the row their query read.
        let form = context.faultMaterialization(readAt: list.rowsReadAt)
        return list.keys.map { key in
            if let row = list.row(for: key) { return context.materialize(row, of: r.destination, as: form) }
            return context.object(of: r.destination, key: key)
        }
    }

    /// The keys a relationship of an object holds now: the foreign key of a to-one, the loaded
    /// (or newly loaded) members of a to-many.
    func relatedKeys(of backing: ObjectBacking, _ r: ResolvedRelationship) -> [Int64] {
        switch r.storage {
        case .foreignKey(let slot):
            if backing.state == .fault { context.fulfillFault(backing) }
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
        let generation = context.coordinator.currentGeneration
        let pairs: [(owner: Int64, row: StoreRow)]
        do {
            pairs = try context.currentRelated(r, keys: [backing.key])
        } catch {
            // The store failed: the unsaved members only, not kept, so that the next use reads
            // again; the next save reports the error (see `pendingStoreError`).
            context.recordReadFailure(error)
            return memberList(of: backing, r, [])
        }
        var list = memberList(of: backing, r, pairs.map(\.row.key))
        if r.leadsToSubentities {
            // Rows of several entities: each to its objects' place (a list keeps one entity's).
            for (entity, rows) in context.rowsByEntity(pairs.map(\.row), of: r) {
                cacheMemberRows(savedRows(rows, of: entity), of: entity, readAt: generation)
            }
        } else if holdsRows {
            list.keep(savedRows(pairs.map(\.row), of: r.destination), readAt: generation)
        } else {
            cacheMemberRows(pairs.map(\.row), of: r.destination, readAt: generation)
        }
        backing.toMany[r.index] = list
        return list
    }

    /// Whether loaded to-many relationships keep their members' rows (``MemberList/rows``)
    /// rather than putting them in the shared row cache: as fetched faults keep theirs.
    var membersHoldRows: Bool { context.parent == nil && context.faultsHoldFetchedRows }

    /// The rows of objects without unsaved changes here (the others are registered and hold
    /// their own values), sorted by key.
    func savedRows(_ rows: [StoreRow], of entity: EntityDescription) -> [StoreRow] {
        let id = ObjectIdentifier(entity)
        let hasChanges = !(context.pending.inserted.isEmpty && context.pending.updated.isEmpty && context.pending.deleted.isEmpty && context.pending.insertedDeleted.isEmpty)
        var saved = !hasChanges ? rows : rows.filter { row in
            let k = RowCacheKey(entity: id, key: row.key)
            return context.pending.inserted[k] == nil && context.pending.updated[k] == nil && context.pending.deleted[k] == nil && context.pending.insertedDeleted[k] == nil
        }
        if !saved.isEmpty, !zip(saved, saved.dropFirst()).allSatisfy({ $0.key < $1.key }) { saved.sort { $0.key < $1.key } }
        return saved
    }

    /// Puts loaded members' rows where their faults will look: the shared row cache, or, in a
    /// child context or one pinned to a query generation, straight into its objects (their
    /// faults would ask the parent again; the cache holds the latest rows).
    /// `generation`: the coordinator's, read before the rows were.
    func cacheMemberRows(_ rows: [StoreRow], of entity: EntityDescription, readAt generation: UInt64) {
        if context.parent == nil && context.readsLatestData {
            context.coordinator.cache(rows.filter { context.registeredBacking(of: entity, key: $0.key) == nil }, of: entity, readAt: generation)
        } else {
            for row in rows { _ = context.materialize(row, of: entity, as: .loaded) }
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
        if backing.state == .fault { context.fulfillFault(backing) }
        let present = Set(keys)
        let order = (backing.values.indices.contains(slot) ? backing.values[slot] : .null).orderKeys.filter(present.contains)
        let listed = Set(order)
        return MemberList(order + sorted.filter { !listed.contains($0) })
    }
}
