extension ManagedObjectContext {
    /// Merges every save of other contexts that is waiting for this one, in the order the store
    /// committed them, then posts one `objectsDidChange` for all of them. Automatic merging calls
    /// this on the context's isolation. Loom's tests, tool and benchmark call it to merge at a
    /// moment of their choosing (`@_spi(LoomTesting) import LoomCore`); an app leaves it to
    /// automatic merging.
    /// Local unsaved edits stay on top (see ``mergeChanges(fromContextDidSave:)``).
    ///
    /// Reads nothing from the store: every save arrives with the rows this context needs (a
    /// context's save with the rows it wrote; another coordinator's commit and a batch request
    /// with the rows read or built once, off every context, for the entities contexts hold).
    /// A row that could not be read (or of an entity this context had not registered objects of
    /// when it was read) is not guessed at: a loaded object without unsaved changes becomes a
    /// fault again, and its next use reads the store and reports what fails there; one with
    /// unsaved changes keeps them, and its old version makes its next save a conflict for the
    /// merge policy.
    ///
    /// - Complexity: O(objects registered here that the saves changed), plus the IDs' count.
    @_spi(LoomTesting) public func mergePendingSaves() {
        ConcurrencyDebugging.check(self, #function)
        let events = inbox.take()
        guard !events.isEmpty else { return }
        merge(events)
    }

    /// Merges the changes another context saved (the payload of its `didSave` event) into this
    /// one: registered objects that were updated get the saved values (unsaved changes made here
    /// stay on top), registered faults are refreshed too, deleted objects leave this context.
    /// Posts `objectsDidChange` with what it merged.
    ///
    /// Merging is property-wise object-trump, as in Core Data, whatever ``mergePolicy`` says:
    /// where this context and the save changed the same attribute, this context's unsaved edit
    /// wins; the object takes the saved row's version, so its next save writes the edit without a
    /// conflict. ``mergePolicy`` only governs saves.
    ///
    /// The payload holds IDs, not rows, so the rows of the objects this context holds are read
    /// again, here, one store query per entity (automatic merging gets them with the save and
    /// reads nothing). If that read fails, a loaded object without unsaved changes becomes a
    /// fault again (its next use reads the store and reports what fails there) rather than keep
    /// stale values; one with unsaved changes keeps them, and its old version makes its next save
    /// a conflict for the merge policy.
    ///
    /// Call it on this context's isolation.
    public func mergeChanges(fromContextDidSave changes: ObjectChanges) {
        ConcurrencyDebugging.check(self, #function)
        // Read before the merge moves a pinned context to the current data: read at the
        // current data, as the merge will be.
        announceRegisteredEntities()
        let rows = EventRows.read(changes, for: inbox.mergeInterest, through: coordinator)
        merge([SaveEvent(number: 0, changes: changes, rows: rows, origin: ObjectIdentifier(coordinator), mergesIntoViewContext: true)])
    }

    /// The one way saves are merged here (automatic merging, a `didSave` payload merged by hand,
    /// a batch request this context ran): each event's changes applied with the rows it carries,
    /// in order, then one `objectsDidChange`.
    func merge(_ events: [SaveEvent]) {
        processPendingChanges()
        // A pinned context moves to the current data, which holds what it merges.
        advanceQueryGeneration()
        var merged = ObjectChanges()
        for event in events {
            if event.refreshesEverything {
                liveQueriesMayHaveMissedChanges()
                refreshEverything(into: &merged)
            } else {
                merge(event.changes, rows: event.rows, into: &merged)
            }
            lastMergedSaveNumber = max(lastMergedSaveNumber, event.number)
        }
        checkIdentityMap()
        if !merged.isEmpty {
            // Live queries place the objects the events inserted or updated with the rows they
            // carry (``rowsCarriedByMerge(of:keys:)``), not with a store read.
            if !observation.liveQueries.isEmpty { inbox.rowsBeingMerged = Self.rowsCarried(by: events) }
            post(.objectsDidChange(merged))
            inbox.rowsBeingMerged = [:]
        }
        refreshLiveQueriesIfNeeded()
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
    func rowsCarriedByMerge(of entity: EntityDescription, keys: [Int64]) -> (rows: [StoreRow], missing: [Int64]) {
        let carried = inbox.rowsBeingMerged
        if carried.isEmpty { return ([], keys) }
        var rows: [StoreRow] = [], missing: [Int64] = []
        for key in keys {
            if let row = carried[AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: entity.name, primaryKey: key)] { rows.append(row) } else { missing.append(key) }
        }
        return (rows, missing)
    }

    /// Tells the coordinator the entities this context registers objects of, when new ones
    /// came (see ``MergeInbox/noteRegistered(_:)``): saves then carry their rows. One
    /// comparison when none did.
    @inline(__always)
    func announceRegisteredEntities() {
        if identityMap.entityCount != inbox.announcedEntityCount {
            inbox.noteRegistered(identityMap.registeredEntities)
            inbox.announcedEntityCount = identityMap.entityCount
        }
    }

    private func merge(_ changes: ObjectChanges, rows: EventRows, into merged: inout ObjectChanges) {
        // Nothing registered and nobody listening (a batch request's or an importer's context):
        // `merged` would only be posted to no one, and a batch's union of a million IDs costs
        // as much as its SQL.
        if identityMap.isEmpty && !hasEventListeners { return }
        if merged.inserted.isEmpty { merged.inserted = changes.inserted } else { merged.inserted.formUnion(changes.inserted) }
        if identityMap.isEmpty {
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
            guard let object = registeredObject(for: id) else { continue }
            let backing = object._loomBacking
            let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
            identityMap.remove(key)
            pending.updated[key] = nil
            pending.deleted[key] = nil
            if backing.state == .fault {
                // Never loaded here: it reads as deleted, with no stale values to show.
                backing.becomeInaccessible()
            } else {
                // Keep the last values readable for code still showing the object.
                backing.isDeleted = true
                backing.isUpdated = false
                backing.toMany = [:]
                backing.context = nil
            }
        }
        for id in changes.updated {
            guard let object = registeredObject(for: id) else {
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
                        notifyObservers(ofRelationship: j, of: backing.entity, key: backing.key)
                    }
                }
            }
            if backing.isDeleted && backing.deletePropagated {
                // Deleted here, and related elsewhere since its delete rules ran (a novel added
                // to a deleted author): they run again at the end of the event, on what it is
                // related to now, so the save leaves nothing pointing to it.
                backing.toMany = [:]
                backing.deletePropagated = false
                scheduleEndOfEventIfNeeded()
            }
            guard backing.state == .loaded else {
                backing.dropFetchedRow()   // a fault: its next use reads the saved row
                // Observed before it became a fault again: its next use shows what the save changed.
                notifyObservers(of: backing, properties: properties)
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
                    notifyObservers(of: backing, properties: nil)   // what changed is unknown
                }
                continue
            }
            guard row.version > backing.version else { continue }
            let local = backing.isUpdated ? backing.changedSlots() : []
            let before = backing.values
            backing.load(row)
            for (index, value) in local { backing.values[index] = value }
            forgetInverseLists(of: backing, before: before)
            if local.isEmpty && backing.isUpdated {
                backing.isUpdated = false
                pending.updated[RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)] = nil
            }
            // Only what differs from what this context showed: an attribute edited here (kept on
            // top) or saved unchanged tells no one.
            notifyObservers(of: backing, valuesFrom: before, to: backing.values)
        }
    }

    /// What changed in the store is unknown (its history was deleted before this coordinator
    /// read it): every loaded object without unsaved changes becomes a fault again, so that its
    /// next use reads the store; every loaded to-many list is forgotten. Objects with unsaved
    /// changes keep them, and their versions make a stale save a conflict for the merge policy.
    private func refreshEverything(into merged: inout ObjectChanges) {
        forgetLoadedRelationships()
        for object in identityMap.objects {
            let backing = object._loomBacking
            if backing.isInserted { continue }
            if backing.state == .loaded, !backing.isUpdated, !backing.isDeleted { refault(backing) }
            notifyObservers(of: backing, properties: nil)   // what changed is unknown
            merged.refreshed.insert(objectID(of: backing))
        }
    }

    /// Turns a loaded object without unsaved changes back into a fault.
    private func refault(_ backing: ObjectBacking) {
        forgetInverseLists(of: backing, before: backing.values, dropAll: true)
        backing.toMany = [:]
        backing.state = .fault
        backing.holdsFetchedRow = false
        backing.values = []
    }
}
