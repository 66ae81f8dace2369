/// Brings a context's objects back to saved or current data: ``rollback()`` discards the
/// unsaved changes, ``reset()`` forgets every object, ``refresh(_:mergeChanges:)``,
/// ``refreshAllObjects()`` and ``existingObject(with:of:)`` read the objects' rows again.
///
/// It keeps no state of its own: what it changes is the context's registry, its unsaved
/// changes and its objects. The context makes one for each call
/// (``ManagedObjectContext/refresher``) and calls it on its own isolation; it is not `Sendable`.
struct ObjectRefresher {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// See ``ManagedObjectContext/rollback()``.
    func rollback() {
        context.processPendingChanges()
        context.changeToDeletedObject = nil
        var changes = ObjectChanges()
        if context.hasEventListeners {
            for object in context.pending.inserted.values { changes.deleted.insert(context.objectID(of: object._loomBacking)) }
            for object in context.pending.deleted.values { changes.inserted.insert(context.objectID(of: object._loomBacking)) }
            for object in context.pending.updated.values {
                let backing = object._loomBacking
                let id = context.objectID(of: backing)
                changes.updated.insert(id)
                changes.changedProperties[id] = Set(backing.changedSlots().map { backing.entity.storedValueName(at: $0.0) })
            }
            // Relationships changed here change back too: live queries look at everything.
            if !context.pending.relationships.isEmpty || !context.pending.links.isEmpty { context.liveQueriesMayHaveMissedChanges() }
        }
        for (key, object) in Array(context.pending.inserted) + Array(context.pending.insertedDeleted) {
            let backing = object._loomBacking
            context.identityMap.remove(key)
            context.coordinator.keyAllocator.forgetUnsaved(backing.entity, key: backing.key)
            backing.invalidate(reason: "its insertion was rolled back")
        }
        // Observers are told once the context is consistent again.
        var restored: [(backing: ObjectBacking, before: [StoredValue])] = []
        let changedLists = context.pending.relationships.entries.values
        for object in context.pending.updated.values {
            let backing = object._loomBacking
            restored.append((backing, backing.values))
            if let committed = backing.committed { backing.values = committed.map { $0 } }
            backing.isUpdated = false
        }
        for object in context.pending.deleted.values {
            let backing = object._loomBacking
            restored.append((backing, backing.values))
            if let committed = backing.committed { backing.values = committed.map { $0 } }
            backing.isDeleted = false
            backing.isUpdated = false
            backing.deletePropagated = false
        }
        // Held until observers are told: the registry does not keep clean objects alive.
        let held = Array(context.pending.updated.values) + Array(context.pending.deleted.values)
        context.pending = PendingChanges()
        context.observation.relationshipChanges = RelationshipChangeLog()
        context.forgetObjectsAwaitingKeys()
        context.forgetLoadedRelationships()
        context.checkIdentityMap()
        for (backing, before) in restored { context.notifyObservers(of: backing, valuesFrom: before, to: backing.values) }
        for entry in changedLists {
            for j in entry.relationships { context.notifyObservers(ofRelationship: j, of: entry.entity, key: entry.key) }
        }
        withExtendedLifetime(held) {}
        if !changes.isEmpty { context.post(.objectsDidChange(changes)) }
        context.refreshLiveQueriesIfNeeded()
    }

    /// See ``ManagedObjectContext/reset()``.
    func reset() {
        for (key, object) in Array(context.pending.inserted) + Array(context.pending.insertedDeleted) {
            context.coordinator.keyAllocator.forgetUnsaved(object._loomBacking.entity, key: key.key)
        }
        for entry in context.identityMap.entries {
            entry.backing.invalidate(reason: "its context '\(context.name ?? "unnamed")' was reset")
        }
        let released = context.identityMap.removeAll()
        withExtendedLifetime(released) {}   // released here, once the map is empty
        context.fetchedRowsGeneration = nil
        context.pending = PendingChanges()
        context.observation.relationshipChanges = RelationshipChangeLog()
        context.observation.inaccessible = []
        context.forgetObjectsAwaitingKeys()
        context.readFailure = nil
        context.changeToDeletedObject = nil
        context.advanceQueryGeneration()
        context.checkIdentityMap()
        context.liveQueriesMayHaveMissedChanges()
        context.refreshLiveQueriesIfNeeded()
    }

    /// See ``ManagedObjectContext/refresh(_:mergeChanges:)``; `backing` is registered in the
    /// context.
    func refresh(_ backing: ObjectBacking, mergeChanges: Bool) throws(LoomError) {
        if backing.isInserted { return }
        let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
        let changes: [(Int, StoredValue)] = mergeChanges && backing.state == .loaded ? backing.changedSlots() : []
        let row = try context.rowSource.baseRow(of: backing.entity, key: backing.key, fresh: true)
        // Deleted elsewhere with changes to merge: they stay, for the save to report the conflict.
        if row == nil, mergeChanges, backing.isUpdated || backing.isDeleted { return }
        let before = backing.values
        let wasLoaded = backing.state == .loaded
        let loadedLists = backing.toMany.keys
        backing.toMany = [:]
        defer {
            // A fault showed nothing; a loaded to-many list may read differently when loaded again.
            if wasLoaded {
                context.notifyObservers(of: backing, valuesFrom: before, to: backing.state == .loaded ? backing.values : row?.values ?? backing.placeholderValues)
                for j in loadedLists { context.notifyObservers(ofRelationship: j, of: backing.entity, key: backing.key) }
            }
        }
        if mergeChanges, let row {
            backing.load(row)
            for (i, v) in changes { backing.values[i] = v }
            if changes.isEmpty, !backing.isDeleted { context.pending.updated[key] = nil; backing.isUpdated = false }
            context.forgetInverseLists(of: backing, before: before)
        } else {
            // A fault of a row that is gone finds it gone when next used.
            context.forgetInverseLists(of: backing, before: before, dropAll: true)
            backing.state = .fault
            backing.holdsFetchedRow = false
            backing.values = []
            backing.isUpdated = false
            backing.isDeleted = false
            context.pending.updated[key] = nil
            context.pending.deleted[key] = nil
            backing.committed = row?.values
            if let row { backing.version = row.version }
        }
    }

    /// See ``ManagedObjectContext/existingObject(with:)-(AnyObjectID)``; `entity` is the ID's.
    func existingObject(with id: AnyObjectID, of entity: EntityDescription) throws(LoomError) -> any BackedObject {
        let key = RowCacheKey(entity: ObjectIdentifier(entity), key: id.primaryKey)
        if let registered = context.identityMap.object(for: key) {
            let backing = registered._loomBacking
            // An object with unsaved changes is returned as this context has it; any other is
            // brought up to date with the store.
            if backing.isInserted || backing.isUpdated || backing.isDeleted { return registered }
            guard let row = try context.rowSource.baseRow(of: entity, key: id.primaryKey, fresh: true) else {
                throw notFound(id)
            }
            if backing.state == .fault {
                backing.load(row)
            } else if row.version != backing.version {
                let before = backing.values
                backing.load(row)
                context.forgetInverseLists(of: backing, before: before)
                context.notifyObservers(of: backing, valuesFrom: before, to: backing.values)
            }
            return registered
        }
        guard let row = try context.rowSource.baseRow(of: entity, key: id.primaryKey, fresh: true) else {
            throw notFound(id)
        }
        let backing = ObjectBacking(entity: entity, key: id.primaryKey, context: context)
        backing.load(row)
        return context.register(backing)
    }

    private func notFound(_ id: AnyObjectID) -> LoomError {
        let coordinator = context.coordinator
        if let entity = coordinator.schema.entity(named: id.entityName), coordinator.keyAllocator.isUnsaved(entity, key: id.primaryKey) {
            return LoomError(.objectNotSavedYet, "\(id) belongs to an object inserted in another context and not saved yet; an unsaved object's ID resolves only in its own context. Save that context first.", entity: id.entityName, objectID: id)
        }
        return LoomError(.objectNotFound, "No \(id.entityName) with key \(id.primaryKey) exists in the store (it was deleted, or never saved).", entity: id.entityName, objectID: id)
    }

    /// See ``ManagedObjectContext/refreshAllObjects()``.
    func refreshAllObjects() throws(LoomError) {
        context.forgetLoadedRelationships()
        var changes = ObjectChanges()
        // Objects not registered here may have changed too.
        context.liveQueriesMayHaveMissedChanges()
        // Held strongly for the loop: refreshing can release an object it has not reached yet.
        for object in context.identityMap.objects {
            let backing = object._loomBacking
            if backing.isInserted { continue }
            if backing.state == .loaded {
                try refresh(backing, mergeChanges: true)
            }
            changes.refreshed.insert(context.objectID(of: backing))
        }
        if !changes.isEmpty { context.post(.objectsDidChange(changes)) }
        context.refreshLiveQueriesIfNeeded()
    }
}
