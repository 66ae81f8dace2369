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
    /// The `didSave` payload of a context that saved to the store carries the rows it wrote, so
    /// this reads nothing from the store, as automatic merging does. Other payloads (a child
    /// context's save into its parent, changes built or edited by hand) hold IDs only: the rows of
    /// the objects this context holds are then read again, here, one store query per entity. If
    /// that read fails, a loaded object without unsaved changes becomes a fault again (its next
    /// use reads the store and reports what fails there) rather than keep stale values; one with
    /// unsaved changes keeps them, and its old version makes its next save a conflict for the
    /// merge policy.
    ///
    /// Call it on this context's isolation.
    public func mergeChanges(fromContextDidSave changes: ObjectChanges) {
        ConcurrencyDebugging.check(self, #function)
        let rows: EventRows
        if let saved = changes.savedRows, saved.cover(changes) {
            rows = .all(saved.rows)
        } else {
            // Read before the merge moves a pinned context to the current data: read at the
            // current data, as the merge will be.
            announceRegisteredEntities()
            rows = EventRows.read(changes, for: inbox.mergeInterest, through: coordinator)
        }
        merge([SaveEvent(number: 0, changes: changes, rows: rows, origin: ObjectIdentifier(coordinator), mergesIntoViewContext: true)])
    }

    /// The one way saves are merged here (automatic merging, a `didSave` payload merged by hand,
    /// a batch request this context ran): see ``ContextMerger/merge(_:)``.
    func merge(_ events: [SaveEvent]) { ContextMerger(context: self).merge(events) }

    /// The rows of `keys` the events being merged carry, and the keys they do not: what a live
    /// query looks up while the merge posts its `objectsDidChange`. Outside a merge, none.
    func rowsCarriedByMerge(of entity: EntityDescription, keys: [Int64]) -> (rows: [StoreRow], missing: [Int64]) {
        ContextMerger(context: self).rowsCarried(of: entity, keys: keys)
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

}
