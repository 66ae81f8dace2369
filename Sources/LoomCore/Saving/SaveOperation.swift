/// One save of a context's changes to the store, in order: delete rules → validate
/// (``validate()``) → into the parent (a child context, ``saveIntoParent(_:)``), or: build the change
/// set → apply it, resolving conflicts and trying again → commit the context's state to what
/// was saved (``commitSavedState(recording:rowsFor:)``) → publish to
/// other contexts in commit order (``PersistentStoreCoordinator/publish(_:for:)``). A failure
/// before the commit restores the pending changes' snapshot.
///
/// Made and run by ``ManagedObjectContext/save()`` on the context's isolation, for one save;
/// nothing of it outlives the save.
struct SaveOperation {
    /// The context whose pending changes are saved.
    let context: ManagedObjectContext
    /// Where they are written and published.
    let coordinator: PersistentStoreCoordinator
    /// Whether the view context merges the save
    /// (``PersistentContainer/save(mergingIntoViewContext:_:)``).
    let mergesIntoViewContext: Bool

    /// How many times a save is tried, its conflicts resolved in between, before the last tries
    /// run inside the store's write transaction.
    static let optimisticAttempts = 3

    init(_ context: ManagedObjectContext, mergingIntoViewContext: Bool) {
        self.context = context
        self.coordinator = context.coordinator
        self.mergesIntoViewContext = mergingIntoViewContext
    }

    /// Runs the save; a failure before the commit leaves the context as it was.
    func run() throws(LoomError) {
        try context.reportStoreFailures()
        context.processPendingChanges()
        guard !context.pending.isEmpty else { return }
        context.post(.willSave)
        context.processPendingChanges()
        guard !context.pending.isEmpty else { return }

        // Listed once, for validation, the change set and the commit, unless a conflict's
        // resolution changes the pending changes in between.
        let inserted = insertedInOrder()
        try validate(inserted)

        if let parent = context.parent {
            try saveIntoParent(parent, inserted: inserted)
            return
        }

        // Taken before the first conflict is resolved: until then nothing changes the objects
        // or the pending changes, so a save that never conflicts records no object's state.
        var before: PendingChanges.Snapshot?
        var saved: (changes: StoreChangeSet, receipt: CommitReceipt)?
        var resolved = false
        do throws(LoomError) {
            saved = try applyResolvingConflicts(&resolved, before: &before, inserted: inserted)
        } catch {
            context.changeSetInsertOrder = []
            before?.restore(into: context)
            if resolved { context.forgetLoadedRelationships() }
            throw error
        }
        // Conflict resolution may have changed foreign keys behind the loaded lists' back.
        if resolved { context.forgetLoadedRelationships() }

        // What was saved travels to this context's observers and to the other contexts; with
        // no one listening, the IDs and rows are not collected.
        let listened = coordinator.hasInboxes(besides: context.inbox)
        // The `didSave` payload keeps the rows too, for a context that merges it by hand.
        let recording = listened || context.hasEventListeners
        let committed = commitSavedState(recording: recording, rowsFor: recording)
        var changes = committed.changes
        let rows = committed.rows
        guard let saved else { return }
        if recording { changes.savedRows = SavedRows(rows, for: changes) }
        context.lastSaveNumber = saved.receipt.sequence
        // A pinned context moves to the data it just saved.
        context.advanceQueryGeneration()
        if !saved.changes.isEmpty { context.post(.didSave(changes)) }
        // Published whatever happens, in commit order (later saves wait for this one).
        coordinator.publish(
            listened ? SaveEvent(number: saved.receipt.sequence, changes: changes, rows: rows, origin: ObjectIdentifier(context.inbox), mergesIntoViewContext: mergesIntoViewContext) : nil,
            for: saved.receipt)
    }

    /// Writes the context's changes, resolving what the store refuses by the merge policy and
    /// trying again. Returns what was applied and its receipt; `nil` when nothing was left to
    /// write. `resolved` tells whether conflicts were resolved (objects may have changed);
    /// `before` is the context's state as it was, taken before the first resolution.
    /// `inserted` is ``insertedInOrder()`` as the save began: the first try's change set lists
    /// it, later ones list the objects again.
    ///
    /// Optimistic first: resolution (a custom resolver is the user's code) runs with no lock
    /// held, and the next try finds out whether the store changed again meanwhile. If other
    /// saves keep winning that race, the last tries run inside the store's write transaction,
    /// where nothing else can commit between resolving and writing, so a busy store cannot
    /// starve a save.
    private func applyResolvingConflicts(_ resolved: inout Bool, before: inout PendingChanges.Snapshot?, inserted: [InsertedObject]) throws(LoomError) -> (changes: StoreChangeSet, receipt: CommitReceipt)? {
        var listed: [InsertedObject]? = inserted
        func attempt(_ resolved: inout Bool, _ before: inout PendingChanges.Snapshot?) throws(LoomError) -> (StoreChangeSet, CommitReceipt)?? {
            let changes = makeChangeSet(inserted: listed.take() ?? insertedInOrder())
            if changes.isEmpty { return .some(nil) }
            do throws(LoomError) {
                return (changes, try coordinator.save(changes))
            } catch where error.code == .versionConflict || error.code == .uniquenessViolation {
                resolved = true
                if before == nil { before = context.pending.snapshot() }
                let conflicts = try mergeConflicts(for: error)
                guard !conflicts.isEmpty else { throw error }
                try resolve(conflicts, failing: error)
                return nil
            }
        }
        for _ in 0..<Self.optimisticAttempts {
            if let outcome = try attempt(&resolved, &before) { return outcome }
        }
        var resolvedInside = false
        let outcome: (value: StoreChangeSet?, receipt: CommitReceipt)
        do {
            outcome = try coordinator.write(.save) { () throws(LoomError) -> StoreChangeSet? in
                for _ in 0..<2 {
                    if let outcome = try attempt(&resolvedInside, &before) { return outcome?.0 }
                }
                throw LoomError(.versionConflict, "The save still conflicted after its conflicts were resolved inside the store's write transaction; the merge policy's resolution does not converge.")
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store's write transaction failed.", underlying: error)
        }
        resolved = resolved || resolvedInside
        // A transaction that wrote nothing still committed: its receipt is published all the same.
        return (outcome.value ?? StoreChangeSet(), outcome.receipt)
    }

    /// The store change set for the context's current unsaved changes, whose new objects are
    /// `inserted` (``insertedInOrder()``).
    private func makeChangeSet(inserted: [InsertedObject]) -> StoreChangeSet {
        let pending = context.pending
        var changes = StoreChangeSet()
        changes.author = context.transactionAuthor
        changes.contextName = context.name
        changes.inserts.reserveCapacity(pending.inserted.count)
        context.changeSetInsertOrder = inserted
        for (_, b) in inserted {
            changes.inserts.append(.init(entity: b.entity, key: b.key, values: b.values))
        }
        for (key, object) in pending.updated.sorted(by: { $0.key.key < $1.key.key }) where pending.deleted[key] == nil {
            let b = object._loomBacking
            let changed = b.changedSlots()
            if changed.isEmpty { continue }
            changes.updates.append(.init(entity: b.entity, key: b.key, expectedVersion: b.version, changes: changed.map { (index: $0.0, value: $0.1) }))
        }
        for object in pending.deleted.values.sorted(by: { $0._loomBacking.key < $1._loomBacking.key }) {
            let b = object._loomBacking
            var tombstone: [(index: Int, value: StoredValue)] = []
            if !b.entity.preservedOnDeletion.isEmpty {
                // The saved values (an edit made before the deletion was never saved).
                let saved = b.committed ?? b.values
                if saved.count == b.entity.storedValueCount { tombstone = b.entity.preservedOnDeletion.map { ($0, saved[$0]) } }
            }
            changes.deletes.append(.init(entity: b.entity, key: b.key, expectedVersion: b.version, tombstone: tombstone))
        }
        for (key, entry) in pending.relationships.entries where pending.inserted[key] == nil && pending.deleted[key] == nil {
            changes.relationshipOwners.append((entry.entity, entry.key, entry.relationships.map { entry.entity.relationships[$0].name }))
        }
        for (link, added) in pending.links.sorted(by: { ($0.key.table.name, $0.key.source, $0.key.target) < ($1.key.table.name, $1.key.source, $1.key.target) }) {
            let change = StoreChangeSet.LinkChange(table: link.table, source: link.source, target: link.target)
            if added {
                // A row for an object deleted in this save would outlive it.
                if isDeletedHere(link.table.sourceEntityName, link.source) || isDeletedHere(link.table.targetEntityName, link.target) { continue }
                changes.linkInserts.append(change)
            } else {
                changes.linkDeletes.append(change)
            }
        }
        return changes
    }

    private func isDeletedHere(_ entityName: String, _ key: Int64) -> Bool {
        guard let entity = coordinator.schema.entity(named: entityName) else { return false }
        return context.pending.deleted[RowCacheKey(entity: ObjectIdentifier(entity), key: key)] != nil
    }
}
