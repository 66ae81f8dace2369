extension ManagedObjectContext {
    /// Calls `handler` for every event of `kind`, synchronously on this context's isolation.
    ///
    /// ```swift
    /// let token = context.addObserver(for: .didSave) { event in
    ///     if case .didSave(let changes) = event { print(changes.inserted.count) }
    /// }
    /// ```
    @discardableResult
    public func addObserver(for kind: ContextEvent.Kind, _ handler: @escaping (ContextEvent) -> Void) -> ObserverToken {
        nextObserverID += 1
        observers.append((ObserverToken(id: nextObserverID), kind, handler))
        return ObserverToken(id: nextObserverID)
    }

    /// Stops calling an observer.
    public func removeObserver(_ token: ObserverToken) {
        observers.removeAll { $0.token == token }
    }

    /// Every event this context posts from now on, as an `AsyncSequence`. The stream ends when
    /// the context is deallocated.
    ///
    /// ```swift
    /// Task { @MainActor in
    ///     for await event in container.viewContext.events() { refreshUI(event) }
    /// }
    /// ```
    public func events() -> AsyncStream<ContextEvent> {
        eventHub.stream()
    }

    /// Whether anything observes this context's events (observers or event streams).
    var hasEventListeners: Bool { !observers.isEmpty || eventHub.hasStreams || !liveQueries.isEmpty }

    func post(_ event: ContextEvent) {
        // Live queries first: an observer of the event sees their new results.
        if case .objectsDidChange(let changes) = event { updateLiveQueries(changes) }
        for observer in observers where observer.kind == event.kind { observer.handler(event) }
        eventHub.yield(event)
    }

    /// Ends the current "event": applies the delete rules of the objects deleted since the last
    /// one, then posts `objectsDidChange` for everything inserted, changed or deleted. Runs by
    /// itself at the end of every `perform`, before every save, after merges, and for the view
    /// context at the end of the main actor's turn.
    public func processPendingChanges() {
        ConcurrencyDebugging.check(self, #function)
        moveOffReleasedGeneration()
        if let released = releasedGeneration {
            releasedGeneration = nil
            post(.queryGenerationReleased(released))
        }
        propagateDeletes()
        guard !eventInserted.isEmpty || !eventChanged.isEmpty || !eventDeleted.isEmpty
            || !eventRelationshipChanges.isEmpty || !eventInaccessible.isEmpty else {
            refreshLiveQueriesIfNeeded()
            return
        }
        var changes = ObjectChanges()
        // With nobody listening, only the bookkeeping below is done.
        let recording = hasEventListeners
        for backing in eventInserted where recording && backing.context === self && backing.isInserted && !backing.isDeleted {
            changes.inserted.insert(objectID(of: backing))
        }
        // An object inserted in an earlier event and changed in this one is updated (as in
        // Core Data); having no saved values to compare with, all its properties count.
        let insertedNow = recording ? Set(eventInserted.map { RowCacheKey(entity: ObjectIdentifier($0.entity), key: $0.key) }) : []
        for backing in eventChanged where backing.context === self {
            backing.changedSinceEvent = false
            guard recording else { continue }
            if backing.isInserted {
                guard !backing.isDeleted, !insertedNow.contains(RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)) else { continue }
                let id = objectID(of: backing)
                changes.updated.insert(id)
                changes.changedProperties[id] = Set((0..<backing.entity.storedValueCount).map(backing.entity.storedValueName(at:)))
                continue
            }
            let id = objectID(of: backing)
            changes.updated.insert(id)
            changes.changedProperties[id] = Set(backing.changedSlots().map { backing.entity.storedValueName(at: $0.0) })
        }
        for entry in eventRelationshipChanges.entries.values where recording {
            let k = RowCacheKey(entity: ObjectIdentifier(entry.entity), key: entry.key)
            if insertedNow.contains(k) || pending.deleted[k] != nil || pending.insertedDeleted[k] != nil { continue }
            let id = objectID(entry.entity, entry.key)
            changes.updated.insert(id)
            changes.changedProperties[id, default: []].formUnion(entry.relationships.map { entry.entity.relationships[$0].name })
        }
        // An object inserted in an earlier event and deleted in this one is deleted; one inserted
        // and deleted within this event never was.
        for backing in eventDeleted where recording {
            if backing.isInserted && insertedNow.contains(RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)) { continue }
            changes.deleted.insert(objectID(of: backing))
        }
        if recording { changes.deleted.formUnion(eventInaccessible) }
        for backing in eventInserted { backing.changedSinceEvent = false }
        eventInserted = []
        eventChanged = []
        eventDeleted = []
        eventRelationshipChanges = RelationshipChangeLog()
        eventInaccessible = []
        if !changes.isEmpty { post(.objectsDidChange(changes)) } else { refreshLiveQueriesIfNeeded() }
    }

    /// Records that an object changed in the current event, and for the view context makes
    /// sure the event ends with the main actor's current turn.
    func noteEventChange(_ backing: ObjectBacking, inserted: Bool = false, deleted: Bool = false) {
        if inserted { eventInserted.append(backing) }
        else if deleted { eventDeleted.append(backing) }
        else if !backing.changedSinceEvent {
            backing.changedSinceEvent = true
            eventChanged.append(backing)
        }
        scheduleEndOfEventIfNeeded()
    }

    func scheduleEndOfEventIfNeeded() {
        guard case .mainActor = isolation, !endOfEventScheduled else { return }
        endOfEventScheduled = true
        let box = UncheckedContext(self)
        Task { @MainActor in
            guard let context = box.context else { return }
            context.endOfEventScheduled = false
            context.processPendingChanges()
        }
    }
}

/// Carries a context to its own isolation.
///
/// `@unchecked Sendable`: the box is only opened on the context's own isolation (the main actor
/// for the view context, the context's queue otherwise); every use below does so.
struct UncheckedContext: @unchecked Sendable {
    weak var context: ManagedObjectContext?
    init(_ context: ManagedObjectContext) { self.context = context }
}
