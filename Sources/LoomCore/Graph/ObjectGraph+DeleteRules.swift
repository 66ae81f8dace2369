extension ObjectGraph {
    /// Marks a registered object not deleted yet for deletion (see
    /// ``ManagedObjectContext/delete(_:)``): an object inserted and not saved yet has its rules
    /// applied at once; any other is deleted at the next save, its rules applied when the
    /// context next processes pending changes.
    func delete(_ object: any BackedObject) {
        let backing = object._loomBacking
        let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
        if backing.isInserted {
            if let stack = context.undoStack, stack.isRecording { stack.recordDisappearance(object, values: backing.values) }
            context.pending.inserted[key] = nil
            context.pending.insertedDeleted[key] = object
            backing.isDeleted = true
            context.noteEventChange(backing, deleted: true)
            // Inside a run of delete rules the object is in its waves already; a run of its own
            // would forget the unsaved objects the outer run is still working on.
            if !context.isPropagatingDeletes { propagateDeletes([object]) }
            return
        }
        if backing.state == .fault {
            context.fulfillFault(backing)
            if backing.isInaccessible { return }
        }
        if let stack = context.undoStack, stack.isRecording { stack.recordDisappearance(object, values: backing.values) }
        backing.isDeleted = true
        context.pending.deleted[key] = object
        context.pending.noteChange(of: key.entity)
        context.noteEventChange(backing, deleted: true)
    }

    /// Applies the delete rules of `objects` (by default, every object deleted since the last
    /// time), cascading as far as the rules go; then forgets objects inserted and deleted before
    /// a save.
    func propagateDeletes(_ objects: [any BackedObject]? = nil) {
        var work: [any BackedObject] = []
        if let objects {
            work = objects
        } else {
            for object in context.pending.deleted.values where !object._loomBacking.deletePropagated { work.append(object) }
            for object in context.pending.insertedDeleted.values where !object._loomBacking.deletePropagated { work.append(object) }
        }
        if work.isEmpty && context.pending.insertedDeleted.isEmpty { return }
        let nested = context.isPropagatingDeletes
        context.isPropagatingDeletes = true
        defer { context.isPropagatingDeletes = nested }
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
                for r in context.coordinator.schema.relationships(of: backing.entity) {
                    switch r.description.deleteRule {
                    case .nullify:
                        for other in relatedKeys(of: backing, r) { detachInverse(r, backing, other) }
                    case .cascade:
                        for other in relatedKeys(of: backing, r) {
                            let target = context.object(for: r, key: other)
                            let b = target._loomBacking
                            if b.isDeleted || b.isInaccessible { continue }
                            context.delete(target)
                            if b.isDeleted && !b.isInaccessible { work.append(target) }
                        }
                    case .deny, .noAction:
                        break
                    }
                }
                // A relationship the store could not read (an I/O error) read as empty, so its
                // rules reached none of its objects: they run again next time, and the save
                // meanwhile throws the read's error, instead of saving the deletion without them.
                if context.readFailure != nil { backing.deletePropagated = false }
            }
        }
        // Objects never saved leave no trace, unless a deny rule still holds them back.
        for (key, object) in context.pending.insertedDeleted where deniedRelationship(of: object._loomBacking) == nil {
            let backing = object._loomBacking
            context.pending.insertedDeleted[key] = nil
            context.identityMap.remove(key)
            context.pending.relationships.remove(key)
            context.observation.relationshipChanges.remove(key)
            context.coordinator.keyAllocator.forgetUnsaved(backing.entity, key: backing.key)
            context.pending.links = context.pending.links.filter { link, _ in
                !((backing.entity.isOrInherits(fromEntityNamed: link.table.sourceEntityName) && link.source == backing.key)
                    || (backing.entity.isOrInherits(fromEntityNamed: link.table.targetEntityName) && link.target == backing.key))
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
            for r in context.coordinator.schema.relationships(of: entity) where r.description.isToMany && rule(r.description.deleteRule) {
                let unloaded = owners.filter { $0.toMany[r.index] == nil }
                guard unloaded.count > 1 else { continue }
                let generation = context.coordinator.currentGeneration
                let pairs: [(owner: Int64, row: StoreRow)]
                do { pairs = try context.currentRelated(r, keys: unloaded.map(\.key)) } catch {
                    // Left unloaded (each loads on its own when used); the save reports it.
                    context.recordReadFailure(error)
                    continue
                }
                var byOwner: [Int64: [Int64]] = [:]
                for pair in pairs { byOwner[pair.owner, default: []].append(pair.row.key) }
                for owner in unloaded { owner.toMany[r.index] = memberList(of: owner, r, byOwner[owner.key] ?? []) }
                for (entity, rows) in context.rowsByEntity(pairs.map(\.row), of: r) {
                    let rows = rows.filter { context.registeredBacking(of: entity, key: $0.key) == nil }
                    if context.parent == nil && context.readsLatestData {
                        context.coordinator.cache(rows, of: entity, readAt: generation)
                    } else {
                        for row in rows { _ = context.materialize(row, of: entity, as: .loaded) }
                    }
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
            let (entity, inverse) = destination(of: r, other)
            context.withObject(entity, other) { clearReference($0, at: inverse.storage.foreignKeySlot, to: backing.key) }
            lose(backing.entity, backing.key, r.index, member: other)
        case .joinTable:
            unrelate(r, backing, other)
        }
    }

    /// The first deny relationship of a deleted object that still holds an object not deleted
    /// itself, with how many it holds.
    func deniedRelationship(of backing: ObjectBacking) -> (relationship: String, count: Int)? {
        for r in context.coordinator.schema.relationships(of: backing.entity) where r.description.deleteRule == .deny {
            let remaining = relatedKeys(of: backing, r).filter { key in
                guard let other = context.registeredDestination(of: r, key: key) else { return true }
                return !other.isDeleted
            }
            if !remaining.isEmpty { return (r.description.name, remaining.count) }
        }
        return nil
    }
}
