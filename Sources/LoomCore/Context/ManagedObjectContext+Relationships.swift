/// One row of a join table, as an unsaved change.
struct LinkKey: Hashable {
    let table: JoinTable
    let source: Int64
    let target: Int64
}

/// To-many relationships whose members changed, by owner, for events and merges.
struct RelationshipChangeLog {
    var entries: [RowCacheKey: (entity: EntityDescription, key: Int64, relationships: Set<Int>)] = [:]

    var isEmpty: Bool { entries.isEmpty }

    mutating func note(_ entity: EntityDescription, _ key: Int64, _ relationship: Int) {
        let k = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
        if entries[k] == nil { entries[k] = (entity, key, []) }
        entries[k]!.relationships.insert(relationship)
    }
}

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

    /// The destinations of a to-many relationship for each of `keys`, as this context sees
    /// them: its source's answer corrected by this context's unsaved changes.
    func currentRelated(_ r: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [(owner: Int64, row: StoreRow)] {
        let sourceID = ObjectIdentifier(r.source)
        // Objects inserted here have nothing related in the store or the parent.
        let saved = pending.inserted.isEmpty && pending.insertedDeleted.isEmpty ? keys : keys.filter {
            pending.inserted[RowCacheKey(entity: sourceID, key: $0)] == nil && pending.insertedDeleted[RowCacheKey(entity: sourceID, key: $0)] == nil
        }
        var pairs = saved.isEmpty ? [] : try baseRelated(r, keys: saved)
        // Needed only where this context changed something: not built for every fault.
        var wanted: Set<Int64> { Set(keys) }
        let destinationID = ObjectIdentifier(r.destination)
        switch r.storage {
        case .foreignKey:
            fatalError("a to-one relationship is read from its foreign key")
        case .inverseForeignKey(let slot):
            // Destinations changed here are judged by their foreign key as it is now.
            var changed: [Int64: ObjectBacking] = [:]
            for (k, o) in pending.inserted where k.entity == destinationID { changed[k.key] = o._loomBacking }
            for (k, o) in pending.updated where k.entity == destinationID { changed[k.key] = o._loomBacking }
            for (k, o) in pending.deleted where k.entity == destinationID { changed[k.key] = o._loomBacking }
            for (k, o) in pending.insertedDeleted where k.entity == destinationID { changed[k.key] = o._loomBacking }
            if !changed.isEmpty {
                let wanted = wanted
                pairs.removeAll { changed[$0.row.key] != nil }
                // A deleted object leaves relationships when the delete rules run, at the end of
                // the event, as in Core Data.
                for (key, b) in changed.sorted(by: { $0.key < $1.key }) where !(b.isDeleted && b.deletePropagated) && b.state == .loaded {
                    if case .integer(let owner) = b.values[slot], wanted.contains(owner) {
                        pairs.append((owner, StoreRow(key: key, version: b.version, values: b.values)))
                    }
                }
            }
        case .joinTable(let table, let ownColumn, _):
            let ownIsSource = ownColumn == JoinTable.sourceColumn
            var removed: Set<[Int64]> = []
            var added: [(Int64, Int64)] = []
            let wanted = pending.links.isEmpty ? [] : wanted
            for (link, isAdded) in pending.links where link.table == table {
                let (owner, destination) = ownIsSource ? (link.source, link.target) : (link.target, link.source)
                guard wanted.contains(owner) else { continue }
                if isAdded { added.append((owner, destination)) } else { removed.insert([owner, destination]) }
            }
            if !removed.isEmpty { pairs.removeAll { removed.contains([$0.owner, $0.row.key]) } }
            let present = Set(pairs.map { [$0.owner, $0.row.key] })
            for (owner, destination) in added.sorted(by: { ($0.0, $0.1) < ($1.0, $1.1) }) where !present.contains([owner, destination]) {
                if let row = try currentRow(of: r.destination, key: destination, fresh: false) {
                    pairs.append((owner, row))
                }
            }
            // Destinations deleted here are gone once the delete rules ran.
            pairs.removeAll { pair in
                let k = RowCacheKey(entity: destinationID, key: pair.row.key)
                let deleted = pending.deleted[k] ?? pending.insertedDeleted[k]
                return deleted?._loomBacking.deletePropagated == true
            }
            // A destination changed here is shown with its current values.
            pairs = pairs.map { pair in
                if let b = pending.updated[RowCacheKey(entity: destinationID, key: pair.row.key)]?._loomBacking, b.state == .loaded {
                    return (pair.owner, StoreRow(key: b.key, version: b.version, values: b.values))
                }
                return pair
            }
        }
        return pairs
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

    // MARK: Changing

    /// Sets relationship `j` of a loaded object to `objects` (one or none for a to-one), keeping
    /// every inverse in step.
    func setRelationship(_ j: Int, of backing: ObjectBacking, to objects: [any BackedObject]) {
        let r = coordinator.schema.relationship(j, of: backing.entity)
        forgetDeferredRelationship(j, of: backing)
        var targets: [ObjectBacking] = []
        for object in objects {
            let b = object._loomBacking
            if b.state == .detached {
                do { try insertObject(object) } catch { fatalError(error.message) }
                if b.state == .detached {
                    // No key could be reserved for it: set at the next save, once it has one.
                    deferRelationship(j, of: backing, to: objects)
                    return
                }
            }
            guard b.context === self else {
                fatalError("\(backing.entity.name).\(r.description.name) was given \(English.a(b.entity.name)) from another context (or one no longer in a context); relate objects of the same context, fetching them there by ID.")
            }
            guard b.entity === r.destination else {
                fatalError("\(backing.entity.name).\(r.description.name) leads to \(r.destination.name), not to \(b.entity.name).")
            }
            if b.isDeleted {
                fatalError("\(backing.entity.name).\(r.description.name) was given \(b.objectIDDescription), which is deleted.")
            }
            if !targets.contains(where: { $0 === b }) { targets.append(b) }
        }
        withExtendedLifetime(objects) {
            switch r.description.kind {
            case .toOne:
                if let target = targets.first {
                    relate(r, backing, target.key)
                } else {
                    for old in relatedKeys(of: backing, r) { unrelate(r, backing, old) }
                }
            case .toMany, .orderedToMany:
                let current = members(of: backing, r)
                let wanted = Set(targets.map(\.key))
                for key in current.keys where !wanted.contains(key) { unrelate(r, backing, key) }
                for target in targets where !current.contains(target.key) { relate(r, backing, target.key) }
                if r.description.kind == .orderedToMany {
                    var ordered = MemberList(targets.map(\.key))
                    ordered.keep(current.rows, readAt: current.rowsReadAt)
                    if backing.toMany[r.index] != ordered {
                        backing.toMany[r.index] = ordered
                        noteRelationshipChange(backing.entity, backing.key, r.index)
                    }
                    writeOrder(of: backing, r)
                }
            }
        }
    }

    /// Makes the object with key `other` a destination of `backing`'s relationship `r`, and
    /// `backing` one of the inverse's.
    func relate(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) {
        switch r.storage {
        case .foreignKey(let slot):
            if backing.state == .fault { fulfillFault(backing) }
            let old = backing.values[slot]
            if old == .integer(other) { return }
            if case .integer(let previous) = old { unrelate(r, backing, previous) }
            backing.setStoredValue(.integer(other), at: slot)
            notifyObservers(ofSlot: slot, of: backing)
            inverseGained(r, owner: other, member: backing.key)
        case .inverseForeignKey:
            let inverse = coordinator.schema.relationship(r.inverseIndex, of: r.destination)
            withObject(r.destination, other) { relate(inverse, $0, backing.key) }
        case .joinTable(let table, let ownColumn, _):
            if backing.toMany[r.index]?.contains(other) == true { return }
            let link = ownColumn == JoinTable.sourceColumn
                ? LinkKey(table: table, source: backing.key, target: other)
                : LinkKey(table: table, source: other, target: backing.key)
            recordLink(link, added: true)
            gain(backing.entity, backing.key, r.index, member: other)
            gain(r.destination, other, r.inverseIndex, member: backing.key)
        }
    }

    /// Removes the object with key `other` from `backing`'s relationship `r`, and `backing` from
    /// the inverse.
    func unrelate(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) {
        switch r.storage {
        case .foreignKey(let slot):
            if backing.state == .fault { fulfillFault(backing) }
            guard backing.values[slot] == .integer(other) else { return }
            if !backing.isDeleted {
                backing.setStoredValue(.null, at: slot)
                notifyObservers(ofSlot: slot, of: backing)
            }
            inverseLost(r, owner: other, member: backing.key)
        case .inverseForeignKey:
            let inverse = coordinator.schema.relationship(r.inverseIndex, of: r.destination)
            withObject(r.destination, other) { b in
                if b.state == .fault { fulfillFault(b) }
                guard !b.isInaccessible else { return }
                if b.values[inverse.storage.foreignKeySlot] == .integer(backing.key) { unrelate(inverse, b, backing.key) }
            }
        case .joinTable(let table, let ownColumn, _):
            let link = ownColumn == JoinTable.sourceColumn
                ? LinkKey(table: table, source: backing.key, target: other)
                : LinkKey(table: table, source: other, target: backing.key)
            recordLink(link, added: false)
            lose(backing.entity, backing.key, r.index, member: other)
            lose(r.destination, other, r.inverseIndex, member: backing.key)
        }
    }

    /// The destination `owner` of to-one `r` now has `member` in its inverse.
    private func inverseGained(_ r: ResolvedRelationship, owner: Int64, member: Int64) {
        let inverse = coordinator.schema.relationship(r.inverseIndex, of: r.destination)
        switch inverse.storage {
        case .foreignKey(let slot):
            // One-to-one: the owner's previous partner loses it.
            withObject(r.destination, owner) { o in
                if o.state == .fault { fulfillFault(o) }
                guard !o.isInaccessible, !o.isDeleted else { return }
                let current = o.values[slot]
                if current == .integer(member) { return }
                if case .integer(let previous) = current {
                    withObject(r.source, previous) { clearReference($0, at: r.storage.foreignKeySlot, to: owner) }
                }
                o.setStoredValue(.integer(member), at: slot)
                notifyObservers(ofSlot: slot, of: o)
            }
        default:
            gain(r.destination, owner, r.inverseIndex, member: member)
        }
    }

    /// Sets foreign key `slot` of `object` to NULL if it still refers to `key` (and the object
    /// is neither deleted nor gone).
    private func clearReference(_ object: ObjectBacking, at slot: Int, to key: Int64) {
        if object.state == .fault { fulfillFault(object) }
        if !object.isInaccessible, !object.isDeleted, object.values[slot] == .integer(key) {
            object.setStoredValue(.null, at: slot)
            notifyObservers(ofSlot: slot, of: object)
        }
    }

    /// The destination `owner` of to-one `r` no longer has `member` in its inverse.
    private func inverseLost(_ r: ResolvedRelationship, owner: Int64, member: Int64) {
        let inverse = coordinator.schema.relationship(r.inverseIndex, of: r.destination)
        switch inverse.storage {
        case .foreignKey(let slot):
            withObject(r.destination, owner) { clearReference($0, at: slot, to: member) }
        default:
            lose(r.destination, owner, r.inverseIndex, member: member)
        }
    }

    /// A to-many relationship of an object gained a member: its loaded list follows.
    private func gain(_ entity: EntityDescription, _ owner: Int64, _ j: Int, member: Int64) {
        noteRelationshipChange(entity, owner, j)
        guard let o = registeredBacking(of: entity, key: owner), o.toMany[j] != nil, !o.toMany[j]!.contains(member) else { return }
        o.toMany[j]!.append(member)
        if entity.relationships[j].kind == .orderedToMany { writeOrder(of: o, coordinator.schema.relationship(j, of: entity)) }
    }

    /// A to-many relationship of an object lost a member: its loaded list follows.
    private func lose(_ entity: EntityDescription, _ owner: Int64, _ j: Int, member: Int64) {
        noteRelationshipChange(entity, owner, j)
        guard let o = registeredBacking(of: entity, key: owner), o.toMany[j]?.contains(member) == true else { return }
        o.toMany[j]!.remove(member)
        if entity.relationships[j].kind == .orderedToMany { writeOrder(of: o, coordinator.schema.relationship(j, of: entity)) }
    }

    /// Saves an ordered relationship's loaded order in its owner's order slot.
    func writeOrder(of backing: ObjectBacking, _ r: ResolvedRelationship) {
        guard let list = backing.toMany[r.index], let slot = backing.entity.storedValueIndex(ofRelationship: r.index),
              !backing.isDeleted, !backing.isInaccessible else { return }
        let order = StoredValue.order(list.keys)
        if backing.state == .fault { fulfillFault(backing) }
        if backing.values[slot] != order { backing.setStoredValue(order, at: slot) }
    }

    private func recordLink(_ link: LinkKey, added: Bool) {
        if let noted = pending.links[link], noted != added {
            pending.links[link] = nil   // undoes an unsaved change
        } else {
            pending.links[link] = added
        }
        if let source = coordinator.schema.entity(named: link.table.sourceEntityName) { pending.noteChange(of: ObjectIdentifier(source)) }
        if let target = coordinator.schema.entity(named: link.table.targetEntityName) { pending.noteChange(of: ObjectIdentifier(target)) }
    }

    /// Notes that to-many relationship `j` of an object gained or lost objects, for the save, the
    /// next event and the relationship's observers.
    func noteRelationshipChange(_ entity: EntityDescription, _ key: Int64, _ j: Int) {
        pending.relationships.note(entity, key, j)
        eventRelationshipChanges.note(entity, key, j)
        scheduleEndOfEventIfNeeded()
        notifyObservers(ofRelationship: j, of: entity, key: key)
    }

    /// Forgets every loaded to-many list: they are loaded again, from the store and this
    /// context's unsaved changes, when next read.
    func forgetLoadedRelationships() {
        for entry in identityMap.entries { entry.backing.toMany = [:] }
    }

    /// After an object's stored values were replaced (refresh, merge, a newer row): the loaded
    /// lists of the objects whose foreign keys it changed are loaded again when next read.
    func forgetInverseLists(of backing: ObjectBacking, before: [StoredValue], dropAll: Bool = false) {
        guard !backing.entity.relationships.isEmpty else { return }
        for r in coordinator.schema.relationships(of: backing.entity) {
            guard case .foreignKey(let slot) = r.storage else { continue }
            let old: StoredValue? = before.indices.contains(slot) ? before[slot] : nil
            let new: StoredValue? = backing.values.indices.contains(slot) ? backing.values[slot] : nil
            guard dropAll || old != new else { continue }
            for case let value? in [old, new] {
                if case .integer(let key) = value, let o = registeredBacking(of: r.destination, key: key) {
                    o.toMany[r.inverseIndex] = nil
                }
            }
        }
    }

    // MARK: Delete rules

    /// Applies the delete rules of `objects` (by default, every object deleted since the last
    /// time), cascading as far as the rules go; then forgets objects inserted and deleted before
    /// a save.
    func propagateDeletes(_ objects: [any BackedObject]? = nil) {
        var work: [any BackedObject] = []
        if let objects {
            work = objects
        } else {
            for object in pending.deleted.values where !object._loomBacking.deletePropagated { work.append(object) }
            for object in pending.insertedDeleted.values where !object._loomBacking.deletePropagated { work.append(object) }
        }
        if work.isEmpty && pending.insertedDeleted.isEmpty { return }
        // In waves: each wave's to-many relationships are loaded with one query per
        // relationship, then its rules run; the objects they cascade to make the next wave.
        while !work.isEmpty {
            var seen: Set<ObjectIdentifier> = []
            let wave = work.filter { !$0._loomBacking.deletePropagated && seen.insert(ObjectIdentifier($0._loomBacking)).inserted }
                .sorted { $0._loomBacking.key < $1._loomBacking.key }
            work = []
            loadToManyRelationships(of: wave.map(\._loomBacking)) { $0 != .noAction }
            for object in wave {
                let backing = object._loomBacking
                if backing.deletePropagated { continue }
                backing.deletePropagated = true
                for r in coordinator.schema.relationships(of: backing.entity) {
                    switch r.description.deleteRule {
                    case .nullify:
                        for other in relatedKeys(of: backing, r) { detachInverse(r, backing, other) }
                    case .cascade:
                        for other in relatedKeys(of: backing, r) {
                            let target = self.object(of: r.destination, key: other)
                            let b = target._loomBacking
                            if b.isDeleted || b.isInaccessible { continue }
                            delete(target)
                            if b.isDeleted && !b.isInaccessible { work.append(target) }
                        }
                    case .deny, .noAction:
                        break
                    }
                }
            }
        }
        // Objects never saved leave no trace, unless a deny rule still holds them back.
        for (key, object) in pending.insertedDeleted where deniedRelationship(of: object._loomBacking) == nil {
            let backing = object._loomBacking
            pending.insertedDeleted[key] = nil
            identityMap.remove(key)
            pending.relationships.entries[key] = nil
            eventRelationshipChanges.entries[key] = nil
            coordinator.keyAllocator.forgetUnsaved(backing.entity, key: backing.key)
            pending.links = pending.links.filter { link, _ in
                !((link.table.sourceEntityName == backing.entity.name && link.source == backing.key)
                    || (link.table.targetEntityName == backing.entity.name && link.target == backing.key))
            }
            backing.invalidate(reason: "it was deleted before it was ever saved")
        }
    }

    /// Loads, for many objects at once, the to-many relationships whose delete rule passes
    /// `rule`: one query per relationship (as prefetching does), their rows put in the cache.
    func loadToManyRelationships(of backings: [ObjectBacking], where rule: (DeleteRule) -> Bool) {
        var byEntity: [ObjectIdentifier: (EntityDescription, [ObjectBacking])] = [:]
        for b in backings { byEntity[ObjectIdentifier(b.entity), default: (b.entity, [])].1.append(b) }
        for (entity, owners) in byEntity.values {
            for r in coordinator.schema.relationships(of: entity) where r.description.isToMany && rule(r.description.deleteRule) {
                let unloaded = owners.filter { $0.toMany[r.index] == nil }
                guard unloaded.count > 1 else { continue }
                let generation = coordinator.currentGeneration
                let pairs: [(owner: Int64, row: StoreRow)]
                do { pairs = try currentRelated(r, keys: unloaded.map(\.key)) } catch {
                    // Left unloaded (each loads on its own when used); the save reports it.
                    recordReadFailure(error)
                    continue
                }
                var byOwner: [Int64: [Int64]] = [:]
                for pair in pairs { byOwner[pair.owner, default: []].append(pair.row.key) }
                for owner in unloaded { owner.toMany[r.index] = memberList(of: owner, r, byOwner[owner.key] ?? []) }
                let rows = pairs.map(\.row).filter { registeredBacking(of: r.destination, key: $0.key) == nil }
                if parent == nil && readsLatestData {
                    coordinator.cache(rows, of: r.destination, readAt: generation)
                } else {
                    for row in rows { _ = materialize(row, of: r.destination, as: .loaded) }
                }
            }
        }
    }

    /// Nullify: takes a deleted object out of the inverse of its relationship `r` in `other`.
    private func detachInverse(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) {
        switch r.storage {
        case .foreignKey:
            inverseLost(r, owner: other, member: backing.key)
        case .inverseForeignKey:
            let inverse = coordinator.schema.relationship(r.inverseIndex, of: r.destination)
            withObject(r.destination, other) { clearReference($0, at: inverse.storage.foreignKeySlot, to: backing.key) }
            lose(backing.entity, backing.key, r.index, member: other)
        case .joinTable:
            unrelate(r, backing, other)
        }
    }

    /// The first deny relationship of a deleted object that still holds an object not deleted
    /// itself, with how many it holds.
    func deniedRelationship(of backing: ObjectBacking) -> (relationship: String, count: Int)? {
        for r in coordinator.schema.relationships(of: backing.entity) where r.description.deleteRule == .deny {
            let remaining = relatedKeys(of: backing, r).filter { key in
                guard let other = registeredBacking(of: r.destination, key: key) else { return true }
                return !other.isDeleted
            }
            if !remaining.isEmpty { return (r.description.name, remaining.count) }
        }
        return nil
    }
}

extension RelationshipStorage {
    /// The slot of a to-one's foreign key.
    var foreignKeySlot: Int {
        if case .foreignKey(let slot) = self { return slot }
        fatalError("not a to-one relationship")
    }
}
