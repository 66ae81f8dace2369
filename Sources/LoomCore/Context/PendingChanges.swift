/// Everything a context has changed and not saved, as one value: what a save writes, what
/// `rollback()` and `reset()` discard, and what a failed save puts back (``snapshot(in:)`` and
/// ``Snapshot/restore(into:)``). Undo, history and batch operations work on it too.
///
/// The objects it lists are held strongly until saved, rolled back or reset: a context does not
/// keep clean objects alive, but it must keep its changes.
struct PendingChanges {
    /// New objects, by entity and key.
    var inserted: [RowCacheKey: any BackedObject] = [:]
    /// Saved objects with changed values.
    var updated: [RowCacheKey: any BackedObject] = [:]
    /// Saved objects to delete.
    var deleted: [RowCacheKey: any BackedObject] = [:]
    /// Objects inserted and then deleted before a save, kept until the delete rules have run
    /// (and, for a deny rule that still holds objects, until the save reports it).
    var insertedDeleted: [RowCacheKey: any BackedObject] = [:]
    /// The entities with changes, for fetches that must reflect them.
    var changedEntities = ChangedEntities()
    /// Changes to join tables: `true` to add the row, `false` to remove it.
    var links: [LinkKey: Bool] = [:]
    /// To-many relationships whose members changed, by owner.
    var relationships = RelationshipChangeLog()
    /// Objects inserted while no key could be reserved for them: they get their key at the
    /// next save (see `ManagedObjectContext.insert(_:)`).
    var awaitingKeys: [any BackedObject] = []
    /// Relationships set between a registered object and one awaiting its key, set at the next
    /// save once the key is there.
    var relationshipsAwaitingKeys: [(owner: any BackedObject, relationship: Int, objects: [any BackedObject])] = []

    /// Whether there is anything to save.
    var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && links.isEmpty && insertedDeleted.isEmpty && awaitingKeys.isEmpty
    }

    /// Every object with a change of its own (not those only awaiting a key), each once per list.
    var changedObjects: [any BackedObject] {
        Array(inserted.values) + Array(updated.values) + Array(deleted.values)
    }

    /// Notes a change to an object of `entity` (see ``changedEntities``).
    mutating func noteChange(of entity: ObjectIdentifier) {
        changedEntities.insert(entity)
    }

    /// Lists a new object in ``inserted`` and notes its entity's change: one access to a
    /// context's pending changes instead of two, each checked for exclusivity at run time,
    /// on every insert.
    mutating func noteInsertion(of object: any BackedObject, at key: RowCacheKey) {
        inserted[key] = object
        changedEntities.insert(key.entity)
    }

    /// Lists a saved object's first change in ``updated`` and notes its entity's change, in one
    /// access (see ``noteInsertion(of:at:)``).
    mutating func noteUpdate(of object: any BackedObject, at key: RowCacheKey) {
        updated[key] = object
        changedEntities.insert(key.entity)
    }

    /// A set of the few entities a context changed: a short list whose last entry a run of
    /// changes to one entity finds first (a dictionary hashed the entity on every
    /// insert).
    struct ChangedEntities {
        private var entities: [ObjectIdentifier] = []

        mutating func insert(_ entity: ObjectIdentifier) {
            if entities.last == entity || entities.contains(entity) { return }
            entities.append(entity)
        }

        func contains(_ entity: ObjectIdentifier) -> Bool { entities.contains(entity) }
    }

    /// The pending changes and the state of every changed object, to put back if a save fails.
    func snapshot() -> Snapshot { Snapshot(self) }

    /// The state of a context's pending changes and of its changed objects before a save,
    /// restored if the save fails so that the context is exactly as it was.
    struct Snapshot {
        struct ObjectState {
            let backing: ObjectBacking
            let values: [StoredValue]
            let committed: [StoredValue]?
            let version: Int64
            let state: ObjectBacking.State
            let isInserted: Bool, isUpdated: Bool, isDeleted: Bool
            let context: ManagedObjectContext?
        }
        let objects: [ObjectState]
        let changes: PendingChanges

        init(_ changes: PendingChanges) {
            self.changes = changes
            objects = changes.changedObjects.map { object in
                let b = object._loomBacking
                return ObjectState(backing: b, values: b.values, committed: b.committed, version: b.version, state: b.state,
                                   isInserted: b.isInserted, isUpdated: b.isUpdated, isDeleted: b.isDeleted, context: b.context)
            }
        }

        func restore(into context: ManagedObjectContext) {
            for o in objects {
                let b = o.backing
                b.values = o.values
                b.committed = o.committed
                b.version = o.version
                b.state = o.state
                b.isInserted = o.isInserted
                b.isUpdated = o.isUpdated
                b.isDeleted = o.isDeleted
                b.context = o.context
                b.invalidationReason = nil
                if o.isInserted { context.coordinator.keyAllocator.noteUnsaved(b.entity, key: b.key) }
            }
            // Objects that resolution touched but were clean before go back to clean.
            for (key, object) in context.pending.updated where changes.updated[key] == nil && changes.inserted[key] == nil {
                let b = object._loomBacking
                if let committed = b.committed { b.values = committed.map { $0 } }
                b.isUpdated = false
                b.isDeleted = false
            }
            for (key, object) in context.pending.deleted where changes.deleted[key] == nil {
                object._loomBacking.isDeleted = false
            }
            // Every changed object was registered; a failed save's conflict resolution can have
            // taken some out of the registry.
            for list in [changes.inserted, changes.updated, changes.deleted, changes.insertedDeleted] {
                for (key, object) in list where !context.identityMap.contains(key) {
                    context.enroll(object, object._loomBacking, at: key)
                }
            }
            context.pending = changes
        }
    }
}
