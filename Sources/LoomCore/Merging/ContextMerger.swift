/// The merge of saves into one context: each save event's changes applied to the objects the
/// context registered, with the rows the event carries, then one `objectsDidChange`.
///
/// Merging is property-wise object-trump (the context's unsaved edits stay on top); a row the
/// event could not carry is never guessed at (a clean object becomes a fault again). It keeps
/// no state of its own: the context makes one for each call
/// (``ManagedObjectContext/merge(_:)``) and calls it on its own isolation; it is not `Sendable`.
struct ContextMerger {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// The one way saves are merged into the context (automatic merging, a `didSave` payload
    /// merged by hand, a batch request it ran): each event's changes applied with the rows it
    /// carries, in order, then one `objectsDidChange`.
    func merge(_ events: [SaveEvent]) {
        context.processPendingChanges()
        // A pinned context moves to the current data, which holds what it merges.
        context.advanceQueryGeneration()
        var merged = ObjectChanges()
        for event in events {
            if event.refreshesEverything {
                context.liveQueriesMayHaveMissedChanges()
                refreshEverything(into: &merged)
            } else {
                merge(event.changes, rows: event.rows, into: &merged)
            }
            context.lastMergedSaveNumber = max(context.lastMergedSaveNumber, event.number)
        }
        context.checkIdentityMap()
        if !merged.isEmpty {
            // Live queries place the objects the events inserted or updated with the rows they
            // carry (``rowsCarried(of:keys:)``), not with a store read.
            if !context.observation.liveQueries.isEmpty { context.inbox.rowsBeingMerged = Self.rowsCarried(by: events) }
            context.post(.objectsDidChange(merged))
            context.inbox.rowsBeingMerged = [:]
        }
        context.refreshLiveQueriesIfNeeded()
    }

    /// The rows `events` carry, the latest of each object, without those a later event deleted.
    private static func rowsCarried(by events: [SaveEvent]) -> [AnyObjectID: StoreRow] {
        if events.count == 1 { return events[0].rows.rows }
        var rows: [AnyObjectID: StoreRow] = [:]
        for event in events {
            for id in event.changes.deleted { rows[id] = nil }
            rows.merge(event.rows.rows) { $1.version >= $0.version ? $1 : $0 }
        }
        return rows
    }

    /// The rows of `keys` the events being merged carry, and the keys they do not: what a live
    /// query looks up while the merge posts its `objectsDidChange`. Outside a merge, none.
    func rowsCarried(of entity: EntityDescription, keys: [Int64]) -> (rows: [StoreRow], missing: [Int64]) {
        let carried = context.inbox.rowsBeingMerged
        if carried.isEmpty { return ([], keys) }
        var rows: [StoreRow] = [], missing: [Int64] = []
        for key in keys {
            if let row = carried[AnyObjectID(storeIdentifier: context.coordinator.storeIdentifier, entityName: entity.name, primaryKey: key)] { rows.append(row) } else { missing.append(key) }
        }
        return (rows, missing)
    }

    private func merge(_ changes: ObjectChanges, rows: EventRows, into merged: inout ObjectChanges) {
        // Nothing registered and nobody listening (a batch request's or an importer's context):
        // `merged` would only be posted to no one, and a batch's union of a million IDs costs
        // as much as its SQL.
        if context.identityMap.isEmpty && !context.hasEventListeners { return }
        if merged.inserted.isEmpty { merged.inserted = changes.inserted } else { merged.inserted.formUnion(changes.inserted) }
        if context.identityMap.isEmpty {
            // Nothing registered here to update or delete (a background importer, a batch
            // request's context): the changes are passed on as they are, with no per-ID work.
            if merged.updated.isEmpty { merged.updated = changes.updated } else { merged.updated.formUnion(changes.updated) }
            if merged.deleted.isEmpty { merged.deleted = changes.deleted } else { merged.deleted.formUnion(changes.deleted) }
            if merged.changedProperties.isEmpty {
                merged.changedProperties = changes.changedProperties
            } else {
                merged.changedProperties.merge(changes.changedProperties) { $0.union($1) }
            }
            return
        }
        for id in changes.deleted {
            merged.deleted.insert(id)
            guard let object = context.registeredObject(for: id) else { continue }
            let backing = object._loomBacking
            let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
            context.identityMap.remove(key)
            context.pending.updated[key] = nil
            context.pending.deleted[key] = nil
            if backing.state == .fault {
                // Never loaded here: it reads as deleted, with no stale values to show.
                backing.becomeInaccessible()
            } else {
                // Keep the last values readable for code still showing the object.
                backing.isDeleted = true
                backing.isUpdated = false
                backing.toMany = [:]
                backing.leaveContextAsDeletedElsewhere()
            }
        }
        for id in changes.updated {
            guard let object = context.registeredObject(for: id) else {
                merged.updated.insert(id)
                if let properties = changes.changedProperties[id] { merged.changedProperties[id] = properties }
                continue
            }
            let backing = object._loomBacking
            merged.refreshed.insert(id)
            merged.updated.insert(id)
            let properties = changes.changedProperties[id]
            if let properties {
                merged.changedProperties[id] = properties
                // To-many lists that gained or lost objects are loaded again when next read.
                for name in properties {
                    if let j = backing.entity.relationshipIndex(named: name), backing.entity.relationships[j].isToMany {
                        backing.toMany[j] = nil
                        context.notifyObservers(ofRelationship: j, of: backing.entity, key: backing.key)
                    }
                }
            }
            if backing.isDeleted && backing.deletePropagated {
                // Deleted here, and related elsewhere since its delete rules ran (a novel added
                // to a deleted author): they run again at the end of the event, on what it is
                // related to now, so the save leaves nothing pointing to it.
                backing.toMany = [:]
                backing.deletePropagated = false
                context.scheduleEndOfEventIfNeeded()
            }
            guard backing.state == .loaded else {
                backing.dropFetchedRow()   // a fault: its next use reads the saved row
                // Observed before it became a fault again: its next use shows what the save changed.
                context.notifyObservers(of: backing, properties: properties)
                continue
            }
            let row: StoreRow
            switch rows.lookup(id, of: ObjectIdentifier(backing.entity)) {
            case .row(let carried):
                row = carried
            case .unchanged:
                continue
            case .unknown:
                // Never keep stale values silently: a clean object becomes a fault again,
                // whose next use reads the store (and reports what fails there); one with
                // unsaved changes keeps them, and its old version makes its next save a
                // conflict that the merge policy resolves.
                if !backing.isUpdated && !backing.isDeleted {
                    refault(backing)
                    context.notifyObservers(of: backing, properties: nil)   // what changed is unknown
                }
                continue
            }
            guard row.version > backing.version else { continue }
            let local = backing.isUpdated ? backing.changedSlots() : []
            let before = backing.values
            backing.load(row)
            for (index, value) in local { backing.values[index] = value }
            context.forgetInverseLists(of: backing, before: before)
            if local.isEmpty && backing.isUpdated {
                backing.isUpdated = false
                context.pending.updated[RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)] = nil
            }
            // Only what differs from what this context showed: an attribute edited here (kept on
            // top) or saved unchanged tells no one.
            context.notifyObservers(of: backing, valuesFrom: before, to: backing.values)
        }
    }

    /// What changed in the store is unknown (its history was deleted before this coordinator
    /// read it): every loaded object without unsaved changes becomes a fault again, so that its
    /// next use reads the store; every loaded to-many list is forgotten. Objects with unsaved
    /// changes keep them, and their versions make a stale save a conflict for the merge policy.
    private func refreshEverything(into merged: inout ObjectChanges) {
        context.forgetLoadedRelationships()
        for object in context.identityMap.objects {
            let backing = object._loomBacking
            if backing.isInserted { continue }
            if backing.state == .loaded, !backing.isUpdated, !backing.isDeleted { refault(backing) }
            context.notifyObservers(of: backing, properties: nil)   // what changed is unknown
            merged.refreshed.insert(context.objectID(of: backing))
        }
    }

    /// Turns a loaded object without unsaved changes back into a fault.
    private func refault(_ backing: ObjectBacking) {
        context.forgetInverseLists(of: backing, before: backing.values, dropAll: true)
        backing.toMany = [:]
        backing.state = .fault
        backing.holdsFetchedRow = false
        backing.values = []
    }
}
