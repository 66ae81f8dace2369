/// Puts one step's records back, newest first, through the context's own edit paths, so that
/// what it changes is recorded as the step that plays it forward again (the redo of an undo,
/// the undo of a redo).
///
/// Each record sets something to the state it names and skips what is no longer there (an
/// object merged away, deleted without undo): playing never traps on what merges or
/// ``ManagedObjectContext/withoutUndo(_:)`` did since. Foreign keys and join rows are put back
/// with the loaded to-many lists of both sides; ordered lists take their order from their
/// owner's order slot as put back, once every record has played.
///
/// It keeps no state beyond one playback; the context makes one per step, on its isolation.
struct UndoPlayback {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// An owner's to-many list touched by the playback.
    private struct ListReference: Hashable {
        let entity: ObjectIdentifier
        let key: Int64
        let relationship: Int
    }

    func play(_ records: [UndoRecord]) {
        var touched: [ListReference: EntityDescription] = [:]
        var valued: [ObjectIdentifier: any BackedObject] = [:]
        var appeared: [any BackedObject] = []
        // The order each ordered list gets back, as its owner's order slot was put back: kept
        // apart, since deleting the objects that appeared rewrites the slots of loaded lists.
        var orders: [ListReference: [Int64]] = [:]
        for record in records.reversed() {
            switch record {
            case .value(let object, let slot, let old):
                if putBack(old, at: slot, of: object, touching: &touched, orders: &orders) { valued[ObjectIdentifier(object._loomBacking)] = object }
            case .link(let entity, let j, let owner, let other, let existed):
                setLink(j, of: entity, owner: owner, other: other, present: existed, touching: &touched)
            case .appeared(let object):
                appeared.append(object)
            case .disappeared(let object, let values):
                bringBack(object, values: values)
            }
        }
        // Objects that appeared in the step go last: a property is recorded once, at its first
        // change, so one set to an object that appeared later in the step is put back only
        // above; deleted first, such an object would take it along by its delete rules.
        for object in appeared {
            let b = object._loomBacking
            guard b.context === context, b.state != .invalidated, !b.isDeleted, !b.isInaccessible else { continue }
            context.graph.delete(object)
        }
        reorder(touched, orders)
        // What came back or went is not all in the event's lists (a deletion undone in place):
        // live queries look at everything once.
        context.liveQueriesMayHaveMissedChanges()
        // An object whose values are its saved ones again has nothing left to save.
        for object in valued.values {
            let b = object._loomBacking
            guard b.isUpdated, !b.isDeleted, !b.isInserted, b.state == .loaded, let committed = b.committed,
                  committed.count == b.values.count, zip(committed, b.values).allSatisfy({ $0.isIdentical(to: $1) }) else { continue }
            b.isUpdated = false
            context.pending.updated[RowCacheKey(entity: ObjectIdentifier(b.entity), key: b.key)] = nil
        }
    }

    /// Sets a stored value back; a foreign key's inverse lists follow. Returns whether it did.
    private func putBack(_ old: StoredValue, at slot: Int, of object: any BackedObject, touching touched: inout [ListReference: EntityDescription],
                         orders: inout [ListReference: [Int64]]) -> Bool {
        let b = object._loomBacking
        guard b.context === context, b.state != .invalidated, !b.isDeleted, !b.isInaccessible else { return false }
        if b.state == .fault {
            context.fulfillFault(b)
            guard b.state == .loaded, !b.isInaccessible else { return false }
        }
        guard slot < b.values.count else { return false }
        let current = b.values[slot]
        if current.isIdentical(to: old) { return true }
        if slot >= b.entity.attributes.count {
            let j = b.entity.slotRelationships[slot - b.entity.attributes.count]
            let r = context.coordinator.schema.relationship(j, of: b.entity)
            switch r.description.kind {
            case .toOne:
                // The inverse lists of the object it led to and of the one it leads to again
                // (a one-to-one's other side is a foreign key recorded on its own).
                if r.destination.relationships[r.inverseIndex].isToMany {
                    if case .integer(let key) = current { adjust(context.destinationEntity(of: r, key: key), key, r.inverseIndex, member: b.key, present: false, touching: &touched) }
                    if case .integer(let key) = old { adjust(context.destinationEntity(of: r, key: key), key, r.inverseIndex, member: b.key, present: true, touching: &touched) }
                }
            case .orderedToMany:
                let reference = ListReference(entity: ObjectIdentifier(b.entity), key: b.key, relationship: j)
                touched[reference] = b.entity
                orders[reference] = old.orderKeys
            case .toMany:
                break
            }
        }
        b.setStoredValue(old, at: slot)
        context.notifyObservers(ofSlot: slot, of: b)
        return true
    }

    /// Adds or removes a join row, with the loaded lists of both sides.
    private func setLink(_ j: Int, of entity: EntityDescription, owner: Int64, other: Int64, present: Bool, touching touched: inout [ListReference: EntityDescription]) {
        let r = context.coordinator.schema.relationship(j, of: entity)
        guard case .joinTable(let table, let ownColumn, _) = r.storage else { return }
        let link = LinkKey(table, ownColumn: ownColumn, own: owner, other: other)
        // What the row's state is now: a loaded list says; else this context's unsaved change;
        // else the store's row (a step that added and removed it leaves no unsaved change).
        let now: Bool
        if let list = context.registeredBacking(of: entity, key: owner)?.toMany[j] {
            now = list.contains(other)
        } else if let list = context.registeredDestination(of: r, key: other)?.toMany[r.inverseIndex] {
            now = list.contains(owner)
        } else if let noted = context.pending.links[link] {
            now = noted
        } else {
            now = context.withObject(entity, owner) { context.graph.members(of: $0, r).contains(other) }
        }
        guard now != present else { return }
        context.graph.setLink(r, link, owner: entity, ownerKey: owner, other: other, present: present, writingOrder: false)
        for (e, key, k) in [(entity, owner, j), (context.destinationEntity(of: r, key: other), other, r.inverseIndex)] where e.relationships[k].kind == .orderedToMany {
            touched[ListReference(entity: ObjectIdentifier(e), key: key, relationship: k)] = e
        }
    }

    /// Adds or removes a member of an owner's loaded to-many list (its order is set once every
    /// record has played).
    private func adjust(_ entity: EntityDescription, _ owner: Int64, _ j: Int, member: Int64, present: Bool, touching touched: inout [ListReference: EntityDescription]) {
        context.graph.adjustMembers(entity, owner, j, member: member, present: present, writingOrder: false)
        if entity.relationships[j].kind == .orderedToMany {
            touched[ListReference(entity: ObjectIdentifier(entity), key: owner, relationship: j)] = entity
        }
    }

    /// Brings a deleted object back: undeleted in place while its deletion is unsaved, or
    /// inserted again (same key, the values it had) once it was saved or forgotten.
    private func bringBack(_ object: any BackedObject, values: [StoredValue]) {
        let b = object._loomBacking
        let key = RowCacheKey(entity: ObjectIdentifier(b.entity), key: b.key)
        if b.context === context, b.isDeleted, b.state != .invalidated, !b.isInaccessible {
            if context.pending.deleted[key] != nil {
                context.pending.deleted[key] = nil
            } else if context.pending.insertedDeleted[key] != nil {
                context.pending.insertedDeleted[key] = nil
                context.pending.inserted[key] = object
            } else {
                return
            }
            b.isDeleted = false
            b.deletePropagated = false
            context.pending.noteChange(of: key.entity)
            context.noteEventChange(b, inserted: b.isInserted)
        } else if b.state == .invalidated {
            if let registered = context.identityMap.object(for: key), registered !== object {
                // A fault made for the ID after the deletion was saved: the object comes back
                // in its place.
                registered._loomBacking.invalidate(reason: "its deletion was undone, which brought back the object it stood for")
            }
            b.values = values
            b.committed = nil
            b.version = 0
            b.invalidationReason = nil
            b.context = context
            b.storeIdentity = context.coordinator.identity
            b.state = .loaded
            b.isInserted = true
            b.isUpdated = false
            b.isDeleted = false
            b.isInaccessible = false
            b.deletePropagated = false
            b.holdsFetchedRow = false
            b.changedSinceEvent = false
            context.enroll(object, b, at: key)
            context.pending.noteInsertion(of: object, at: key)
            context.coordinator.keyAllocator.noteUnsaved(b.entity, key: b.key)
            context.noteEventChange(b, inserted: true)
        } else {
            return
        }
        // Its delete rules took it out of loaded lists without a record (a deleted object keeps
        // its foreign keys): its own lists and those its foreign keys lead to load again.
        b.toMany = [:]
        context.forgetInverseLists(of: b, before: b.values, dropAll: true)
        context.notifyObservers(of: b, properties: nil)
        if let stack = context.undoStack, stack.isRecording { stack.recordAppearance(object) }
    }

    /// Orders every touched ordered list by its owner's order slot as put back, its other
    /// members after them by key (as a list loaded now would be), and saves that order.
    private func reorder(_ touched: [ListReference: EntityDescription], _ orders: [ListReference: [Int64]]) {
        for (reference, entity) in touched {
            guard let owner = context.registeredBacking(of: entity, key: reference.key), owner.state == .loaded,
                  !owner.isDeleted, let list = owner.toMany[reference.relationship],
                  let slot = entity.storedValueIndex(ofRelationship: reference.relationship) else { continue }
            var listed: Set<Int64> = []
            var keys: [Int64] = []
            for key in orders[reference] ?? owner.values[slot].orderKeys where list.contains(key) && listed.insert(key).inserted { keys.append(key) }
            keys += list.keys.filter { !listed.contains($0) }.sorted()
            var ordered = MemberList(keys)
            ordered.keep(list.rows, readAt: list.rowsReadAt)
            if ordered != list { owner.toMany[reference.relationship] = ordered }
            context.graph.writeOrder(of: owner, context.coordinator.schema.relationship(reference.relationship, of: entity))
        }
    }
}
