/// The relationships of one context's objects as a graph: setting one side of a relationship
/// keeps its inverse in step, and deleting an object applies its relationships' delete rules
/// (see ObjectGraph+DeleteRules.swift).
///
/// The graph keeps no state of its own: what it changes is the context's unsaved changes
/// (``PendingChanges/links``, ``PendingChanges/relationships``) and its objects' values and
/// loaded member lists. The context makes one for each call (``ManagedObjectContext/graph``)
/// and calls it on its own isolation; it is not `Sendable`.
struct ObjectGraph {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// Sets relationship `j` of a loaded object to `objects` (one or none for a to-one), keeping
    /// every inverse in step. `object`, when the caller has it, is the object `backing` belongs
    /// to: its observers are then told without a registry lookup.
    func setRelationship(_ j: Int, of backing: ObjectBacking, object: (any BackedObject)? = nil, to objects: [any BackedObject]) {
        let r = context.coordinator.schema.relationship(j, of: backing.entity)
        context.forgetDeferredRelationship(j, of: backing)
        // Each destination's backing, with its object (for its observers), once.
        var targets: [(backing: ObjectBacking, object: any BackedObject)] = []
        for object in objects {
            let b = object._loomBacking
            if b.state == .detached {
                do { try context.insertObject(object) } catch { fatalError(error.message) }
                if b.state == .detached {
                    // No key could be reserved for it: set at the next save, once it has one.
                    context.deferRelationship(j, of: backing, to: objects)
                    return
                }
            }
            guard b.context === context else {
                fatalError("\(backing.entity.name).\(r.description.name) was given \(English.a(b.entity.name)) from another context (or one no longer in a context); relate objects of the same context, fetching them there by ID.")
            }
            guard b.entity === r.destination || (r.leadsToSubentities && b.entity.isKind(of: r.destination)) else {
                fatalError("\(backing.entity.name).\(r.description.name) leads to \(r.destination.name), not to \(b.entity.name).")
            }
            if b.isDeleted {
                // Deleted in this event, its rules not applied yet: they take it out of this
                // relationship anyway (a list read before the rules ran still holds it).
                if !b.deletePropagated { continue }
                fatalError("\(backing.entity.name).\(r.description.name) was given \(b.objectIDDescription), which is deleted.")
            }
            if !targets.contains(where: { $0.backing === b }) { targets.append((b, object)) }
        }
        withExtendedLifetime(objects) {
            switch r.description.kind {
            case .toOne:
                if let target = targets.first {
                    relate(r, backing, object: object, to: target.backing, targetObject: target.object)
                } else {
                    for old in relatedKeys(of: backing, r) { unrelate(r, backing, old) }
                }
            case .toMany, .orderedToMany:
                let current = members(of: backing, r)
                if !current.keys.isEmpty {
                    let wanted = Set(targets.map(\.backing.key))
                    for key in current.keys where !wanted.contains(key) { unrelate(r, backing, key) }
                }
                if case .inverseForeignKey = r.storage {
                    relateMembers(r, of: backing, object: object, targets.lazy.filter { !current.contains($0.backing.key) })
                } else {
                    for target in targets where !current.contains(target.backing.key) { relate(r, backing, target.backing.key) }
                }
                if r.description.kind == .orderedToMany {
                    var ordered = MemberList(targets.map(\.backing.key))
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
            guard pointForeignKey(r, at: slot, of: backing, object: nil, to: other) else { return }
            inverseGained(r, owner: other, member: backing.key)
        case .inverseForeignKey:
            let (entity, inverse) = destination(of: r, other)
            context.withObject(entity, other) { relate(inverse, $0, backing.key) }
        case .joinTable(let table, let ownColumn, _):
            if backing.toMany[r.index]?.contains(other) == true { return }
            let link = LinkKey(table, ownColumn: ownColumn, own: backing.key, other: other)
            setLink(r, link, owner: backing.entity, ownerKey: backing.key, other: other, present: true)
        }
    }

    /// Makes each of `members` a destination of `owner`'s to-many relationship `r`, which their
    /// foreign keys record: what ``relate(_:_:_:)`` does for each, with the objects at hand
    /// instead of looked up by key (three registry lookups a member, and two of the schema).
    /// The members are objects of this context, not deleted, and not in `owner`'s list yet.
    private func relateMembers(_ r: ResolvedRelationship, of owner: ObjectBacking, object ownerObject: (any BackedObject)?, _ members: some Sequence<(backing: ObjectBacking, object: any BackedObject)>) {
        let schema = context.coordinator.schema
        // The members' foreign key, as the destination has it (a sub-entity's has a slot of its own).
        let slotInDestination = schema.relationship(r.inverseIndex, of: r.destination).storage.foreignKeySlot
        var gained = false
        for (member, object) in members {
            let slot = member.entity === r.destination ? slotInDestination : schema.relationship(r.inverseIndex, of: member.entity).storage.foreignKeySlot
            guard pointForeignKey(schema.relationship(r.inverseIndex, of: member.entity), at: slot, of: member, object: object, to: owner.key) else { continue }
            // The owner's side, as `inverseGained` and `gain` do it for a key.
            gained = true
            appendMember(member.key, to: owner, r.index)
        }
        if gained { noteRelationshipChange(owner.entity, owner.key, r.index, object: ownerObject) }
    }

    /// ``relate(_:_:_:)`` for a to-one whose destination, `target` (of object `targetObject`),
    /// is at hand: no registry lookup for it, nor for the owner's observers when `object` (the
    /// object `backing` belongs to) is given.
    private func relate(_ r: ResolvedRelationship, _ backing: ObjectBacking, object: (any BackedObject)?, to target: ObjectBacking, targetObject: any BackedObject) {
        guard case .foreignKey(let slot) = r.storage else { return relate(r, backing, target.key) }
        guard pointForeignKey(r, at: slot, of: backing, object: object, to: target.key) else { return }
        let inverse = context.coordinator.schema.relationship(r.inverseIndex, of: target.entity)
        guard case .foreignKey = inverse.storage else {
            // A to-many: the target's list gains `backing`, as `inverseGained` and `gain` do it.
            noteRelationshipChange(target.entity, target.key, r.inverseIndex, object: targetObject)
            appendMember(backing.key, to: target, r.inverseIndex)
            return
        }
        inverseGained(r, owner: target.key, member: backing.key)
    }

    /// Points to-one `r`'s foreign key (stored value `slot`) of `backing` at `key`: its fault
    /// fired first, the previous destination let go (its inverse included), the observers told,
    /// through `object` (the object `backing` belongs to) when the caller has it. Whether it
    /// changed: the caller then keeps the new destination's side. `r` is only needed, and only
    /// resolved, when there was a previous destination.
    private func pointForeignKey(_ r: @autoclosure () -> ResolvedRelationship, at slot: Int, of backing: ObjectBacking, object: (any BackedObject)?, to key: Int64) -> Bool {
        if backing.state == .fault { context.fulfillFault(backing) }
        let old = backing.values[slot]
        if old == .integer(key) { return false }
        if case .integer(let previous) = old { unrelate(r(), backing, previous) }
        backing.setStoredValue(.integer(key), at: slot)
        if let object {
            context.notifyObservers(ofSlot: slot, of: backing, object: object)
        } else {
            context.notifyObservers(ofSlot: slot, of: backing)
        }
        return true
    }

    /// Removes the object with key `other` from `backing`'s relationship `r`, and `backing` from
    /// the inverse.
    func unrelate(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) {
        switch r.storage {
        case .foreignKey(let slot):
            if backing.state == .fault { context.fulfillFault(backing) }
            guard backing.values[slot] == .integer(other) else { return }
            if !backing.isDeleted {
                backing.setStoredValue(.null, at: slot)
                context.notifyObservers(ofSlot: slot, of: backing)
            }
            inverseLost(r, owner: other, member: backing.key)
        case .inverseForeignKey:
            let (entity, inverse) = destination(of: r, other)
            context.withObject(entity, other) { b in
                if b.state == .fault { context.fulfillFault(b) }
                guard !b.isInaccessible else { return }
                if b.values[inverse.storage.foreignKeySlot] == .integer(backing.key) { unrelate(inverse, b, backing.key) }
            }
        case .joinTable(let table, let ownColumn, _):
            let link = LinkKey(table, ownColumn: ownColumn, own: backing.key, other: other)
            setLink(r, link, owner: backing.entity, ownerKey: backing.key, other: other, present: false)
        }
    }

    /// The entity of the object with key `other` that `r` leads to, and the inverse as that
    /// entity has it (the same position; a sub-entity's foreign key has a slot of its own).
    func destination(of r: ResolvedRelationship, _ other: Int64) -> (EntityDescription, ResolvedRelationship) {
        let entity = context.destinationEntity(of: r, key: other)
        return (entity, context.coordinator.schema.relationship(r.inverseIndex, of: entity))
    }

    /// Adds (or removes) the join row `link` of relationship `r` between `ownerKey` and `other`,
    /// with the loaded lists of both sides; recorded for undo.
    func setLink(_ r: ResolvedRelationship, _ link: LinkKey, owner: EntityDescription, ownerKey: Int64, other: Int64, present: Bool, writingOrder: Bool = true) {
        if let stack = context.undoStack, stack.isRecording {
            stack.recordLink(link, owner: owner, relationship: r.index, ownerKey: ownerKey, otherKey: other, existed: !present)
        }
        recordLink(link, added: present)
        adjustMembers(owner, ownerKey, r.index, member: other, present: present, writingOrder: writingOrder)
        adjustMembers(context.destinationEntity(of: r, key: other), other, r.inverseIndex, member: ownerKey, present: present, writingOrder: writingOrder)
    }

    /// Adds or removes a member of a to-many relationship's loaded list (see ``gain`` and
    /// ``lose(_:_:_:member:)``); `writingOrder: false` leaves an ordered one's order slot as it is.
    func adjustMembers(_ entity: EntityDescription, _ owner: Int64, _ j: Int, member: Int64, present: Bool, writingOrder: Bool) {
        if present { gain(entity, owner, j, member: member, writingOrder: writingOrder) } else { lose(entity, owner, j, member: member, writingOrder: writingOrder) }
    }

    /// The destination `owner` of to-one `r` now has `member` in its inverse.
    private func inverseGained(_ r: ResolvedRelationship, owner: Int64, member: Int64) {
        let (entity, inverse) = destination(of: r, owner)
        switch inverse.storage {
        case .foreignKey(let slot):
            // One-to-one: the owner's previous partner loses it.
            context.withObject(entity, owner) { o in
                if o.state == .fault { context.fulfillFault(o) }
                guard !o.isInaccessible, !o.isDeleted else { return }
                let current = o.values[slot]
                if current == .integer(member) { return }
                if case .integer(let previous) = current {
                    let (partner, own) = destination(of: inverse, previous)
                    context.withObject(partner, previous) { clearReference($0, at: own.storage.foreignKeySlot, to: owner) }
                }
                o.setStoredValue(.integer(member), at: slot)
                context.notifyObservers(ofSlot: slot, of: o)
            }
        default:
            gain(entity, owner, r.inverseIndex, member: member)
        }
    }

    /// Sets foreign key `slot` of `object` to NULL if it still refers to `key` (and the object
    /// is neither deleted nor gone).
    func clearReference(_ object: ObjectBacking, at slot: Int, to key: Int64) {
        if object.state == .fault { context.fulfillFault(object) }
        if !object.isInaccessible, !object.isDeleted, object.values[slot] == .integer(key) {
            object.setStoredValue(.null, at: slot)
            context.notifyObservers(ofSlot: slot, of: object)
        }
    }

    /// The destination `owner` of to-one `r` no longer has `member` in its inverse.
    func inverseLost(_ r: ResolvedRelationship, owner: Int64, member: Int64) {
        let (entity, inverse) = destination(of: r, owner)
        switch inverse.storage {
        case .foreignKey(let slot):
            context.withObject(entity, owner) { clearReference($0, at: slot, to: member) }
        default:
            lose(entity, owner, r.inverseIndex, member: member)
        }
    }

    /// A to-many relationship of an object gained a member: its loaded list follows.
    private func gain(_ entity: EntityDescription, _ owner: Int64, _ j: Int, member: Int64, writingOrder: Bool = true) {
        noteRelationshipChange(entity, owner, j)
        guard let o = context.registeredBacking(of: entity, key: owner) else { return }
        appendMember(member, to: o, j, writingOrder: writingOrder)
    }

    /// Adds `member` to to-many relationship `j`'s loaded list of `owner`, if it is loaded and
    /// lacks it, and saves an ordered one's order (unless `writingOrder` is off).
    private func appendMember(_ member: Int64, to owner: ObjectBacking, _ j: Int, writingOrder: Bool = true) {
        guard owner.toMany[j] != nil, !owner.toMany[j]!.contains(member) else { return }
        owner.toMany[j]!.append(member)
        if writingOrder, owner.entity.relationships[j].kind == .orderedToMany { writeOrder(of: owner, context.coordinator.schema.relationship(j, of: owner.entity)) }
    }

    /// A to-many relationship of an object lost a member: its loaded list follows.
    func lose(_ entity: EntityDescription, _ owner: Int64, _ j: Int, member: Int64, writingOrder: Bool = true) {
        noteRelationshipChange(entity, owner, j)
        if entity.relationships[j].kind == .orderedToMany, let stack = context.undoStack, stack.isRecording {
            recordOrderOfUnloadedList(entity, owner, j, in: stack)
        }
        guard let o = context.registeredBacking(of: entity, key: owner), o.toMany[j]?.contains(member) == true else { return }
        o.toMany[j]!.remove(member)
        if writingOrder, entity.relationships[j].kind == .orderedToMany { writeOrder(of: o, context.coordinator.schema.relationship(j, of: entity)) }
    }

    /// For undo: the order slot of an ordered list that is not loaded, as it is before a member
    /// leaves it. A loaded list's order is written (and so recorded) as it changes; an unloaded
    /// one's is not, and without it undo could put the member back only at the end.
    private func recordOrderOfUnloadedList(_ entity: EntityDescription, _ owner: Int64, _ j: Int, in stack: UndoStack) {
        guard let slot = entity.storedValueIndex(ofRelationship: j) else { return }
        context.withObject(entity, owner) { o in
            guard o.toMany[j] == nil, !o.isDeleted else { return }
            if o.state == .fault { context.fulfillFault(o) }
            guard o.state == .loaded, !o.isInaccessible, slot < o.values.count else { return }
            context.recordUndoValue(of: o, slot: slot, old: o.values[slot], in: stack)
        }
    }

    /// Saves an ordered relationship's loaded order in its owner's order slot.
    func writeOrder(of backing: ObjectBacking, _ r: ResolvedRelationship) {
        guard let list = backing.toMany[r.index], let slot = backing.entity.storedValueIndex(ofRelationship: r.index),
              !backing.isDeleted, !backing.isInaccessible else { return }
        let order = StoredValue.order(list.keys)
        if backing.state == .fault { context.fulfillFault(backing) }
        if backing.values[slot] != order { backing.setStoredValue(order, at: slot) }
    }

    private func recordLink(_ link: LinkKey, added: Bool) {
        if let noted = context.pending.links[link], noted != added {
            context.pending.links[link] = nil   // undoes an unsaved change
        } else {
            context.pending.links[link] = added
        }
        if let source = context.coordinator.schema.entity(named: link.table.sourceEntityName) { context.pending.noteChange(of: ObjectIdentifier(source)) }
        if let target = context.coordinator.schema.entity(named: link.table.targetEntityName) { context.pending.noteChange(of: ObjectIdentifier(target)) }
    }

    /// Notes that to-many relationship `j` of an object gained or lost objects, for the save, the
    /// next event and the relationship's observers.
    /// `object`, when the caller has it, is the object with that key: its observers are then
    /// told without a registry lookup.
    func noteRelationshipChange(_ entity: EntityDescription, _ key: Int64, _ j: Int, object: (any BackedObject)? = nil) {
        context.pending.relationships.note(entity, key, j)
        context.observation.relationshipChanges.note(entity, key, j)
        context.scheduleEndOfEventIfNeeded()
        if let object {
            context.notifyObservers(ofRelationship: j, of: entity, object: object)
        } else {
            context.notifyObservers(ofRelationship: j, of: entity, key: key)
        }
    }

    /// Forgets every loaded to-many list: they are loaded again, from the store and this
    /// context's unsaved changes, when next read.
    func forgetLoadedRelationships() {
        for entry in context.identityMap.entries { entry.backing.toMany = [:] }
    }

    /// After an object's stored values were replaced (refresh, merge, a newer row): the loaded
    /// lists of the objects whose foreign keys it changed are loaded again when next read.
    func forgetInverseLists(of backing: ObjectBacking, before: [StoredValue], dropAll: Bool = false) {
        guard !backing.entity.relationships.isEmpty else { return }
        for r in context.coordinator.schema.relationships(of: backing.entity) {
            guard case .foreignKey(let slot) = r.storage else { continue }
            let old: StoredValue? = before.indices.contains(slot) ? before[slot] : nil
            let new: StoredValue? = backing.values.indices.contains(slot) ? backing.values[slot] : nil
            guard dropAll || old != new else { continue }
            for case let value? in [old, new] {
                if case .integer(let key) = value, let o = context.registeredDestination(of: r, key: key) {
                    o.toMany[r.inverseIndex] = nil
                }
            }
        }
    }
}

/// One row of a join table, as an unsaved change.
struct LinkKey: Hashable {
    let table: JoinTable
    let source: Int64
    let target: Int64
}

extension LinkKey {
    /// The row linking `own`, whose key the table keeps in `ownColumn`, with `other`.
    init(_ table: JoinTable, ownColumn: String, own: Int64, other: Int64) {
        let ownIsSource = ownColumn == JoinTable.sourceColumn
        self.init(table: table, source: ownIsSource ? own : other, target: ownIsSource ? other : own)
    }
}

/// To-many relationships whose members changed, by owner, for events and merges.
struct RelationshipChangeLog {
    private(set) var entries: [RowCacheKey: (entity: EntityDescription, key: Int64, relationships: Set<Int>)] = [:]
    /// The last change noted. Setting a to-many relationship notes its owner's once per member,
    /// so a run of notes repeats it: found without a lookup in ``entries`` (and in the set of
    /// the owner's relationships). Cleared when its entry is removed.
    private var last: (key: RowCacheKey, relationship: Int)?

    var isEmpty: Bool { entries.isEmpty }

    mutating func note(_ entity: EntityDescription, _ key: Int64, _ relationship: Int) {
        let k = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
        if let last, last.key == k, last.relationship == relationship { return }
        entries[k, default: (entity, key, [])].relationships.insert(relationship)
        last = (k, relationship)
    }

    /// Forgets the changes to the relationships of the object at `key`.
    mutating func remove(_ key: RowCacheKey) {
        entries[key] = nil
        if last?.key == key { last = nil }
    }
}

extension RelationshipStorage {
    /// The slot of a to-one's foreign key.
    var foreignKeySlot: Int {
        if case .foreignKey(let slot) = self { return slot }
        fatalError("not a to-one relationship")
    }
}
