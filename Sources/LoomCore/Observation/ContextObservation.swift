/// One context's events and what follows them: the observers and event streams of
/// ``ContextEvent``s, the objects changed since the last `objectsDidChange`, the end of an event
/// scheduled on the main actor, and the context's live queries.
///
/// The context owns one (`ManagedObjectContext.observation`) and calls it on its own isolation
/// only; it is not `Sendable`.
final class ContextObservation {
    private var observers: [(token: ObserverToken, kind: ContextEvent.Kind, handler: (ContextEvent) -> Void)] = []
    private var nextObserverID = 0
    let hub = ContextEventHub()
    /// Objects inserted, changed and deleted since the last `objectsDidChange`.
    var inserted: [ObjectBacking] = []
    var changed: [ObjectBacking] = []
    var deleted: [ObjectBacking] = []
    /// To-many relationships whose members changed since the last `objectsDidChange`.
    var relationshipChanges = RelationshipChangeLog()
    /// Objects found deleted when their fault fired, since the last `objectsDidChange`.
    var inaccessible: [AnyObjectID] = []
    /// The view context, whose event ends with the main actor's turn; `nil` for a context on a
    /// queue, whose `perform` ends the event.
    var mainActorContext: UncheckedContext?
    private var endOfEventScheduled = false
    private(set) var liveQueries: [LiveQueryEngine] = []
    /// Something changed that no event lists: live queries are evaluated again at the end of
    /// the current event.
    private var liveQueriesNeedEverything = false

    // MARK: Observers

    func addObserver(for kind: ContextEvent.Kind, _ handler: @escaping (ContextEvent) -> Void) -> ObserverToken {
        nextObserverID += 1
        observers.append((ObserverToken(id: nextObserverID), kind, handler))
        return ObserverToken(id: nextObserverID)
    }

    func removeObserver(_ token: ObserverToken) {
        observers.removeAll { $0.token == token }
    }

    /// Whether anything observes the context's events (observers, event streams, live queries).
    var hasListeners: Bool { !observers.isEmpty || hub.hasStreams || !liveQueries.isEmpty }

    func post(_ event: ContextEvent) {
        // Live queries first: an observer of the event sees their new results.
        if case .objectsDidChange(let changes) = event { updateLiveQueries(changes) }
        for observer in observers where observer.kind == event.kind { observer.handler(event) }
        hub.yield(event)
    }

    // MARK: The current event

    /// Whether anything happened since the last `objectsDidChange`.
    var isEmpty: Bool {
        inserted.isEmpty && changed.isEmpty && deleted.isEmpty && relationshipChanges.isEmpty && inaccessible.isEmpty
    }

    /// Records that an object changed in the current event, and for the view context makes
    /// sure the event ends with the main actor's current turn.
    func noteChange(_ backing: ObjectBacking, inserted: Bool = false, deleted: Bool = false) {
        if inserted {
            // Listed as inserted, its later changes in this event are part of its insertion:
            // flagged, they do not list it among the changed too.
            backing.changedSinceEvent = true
            self.inserted.append(backing)
        } else if deleted { self.deleted.append(backing) }
        else if !backing.changedSinceEvent {
            backing.changedSinceEvent = true
            changed.append(backing)
        }
        scheduleEndOfEvent()
    }

    /// For the view context: ends the current event at the end of the main actor's turn.
    func scheduleEndOfEvent() {
        // The flag first: every change of every object comes here, and copying the box copies
        // its weak reference (a side-table retain and release).
        guard !endOfEventScheduled, let box = mainActorContext else { return }
        endOfEventScheduled = true
        Task { @MainActor in
            guard let context = box.context else { return }
            context.observation.endOfEventScheduled = false
            context.processPendingChanges()
        }
    }

    /// Ends the current event's bookkeeping and returns what it changed in `context`, as
    /// `objectsDidChange` lists it (empty when nobody listens: only the bookkeeping is done).
    func takeChanges(of context: ManagedObjectContext) -> ObjectChanges {
        var changes = ObjectChanges()
        let recording = hasListeners
        for backing in inserted where recording && backing.context === context && backing.isInserted && !backing.isDeleted {
            changes.inserted.insert(context.objectID(of: backing))
        }
        // An object inserted in an earlier event and changed in this one is updated (as in
        // Core Data); having no saved values to compare with, all its properties count.
        let insertedNow = recording ? Set(inserted.map { RowCacheKey(entity: ObjectIdentifier($0.entity), key: $0.key) }) : []
        for backing in changed {
            // Every object listed is this context's own, or was until it left it (deleted
            // elsewhere): the flag goes down either way. Only the changes reported need the
            // check, which costs a weak reference's load, so a side-table retain and release.
            backing.changedSinceEvent = false
            guard recording, backing.context === context else { continue }
            if backing.isInserted {
                guard !backing.isDeleted, !insertedNow.contains(RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)) else { continue }
                let id = context.objectID(of: backing)
                changes.updated.insert(id)
                changes.changedProperties[id] = Set((0..<backing.entity.storedValueCount).map(backing.entity.storedValueName(at:)))
                continue
            }
            let id = context.objectID(of: backing)
            changes.updated.insert(id)
            changes.changedProperties[id] = Set(backing.changedSlots().map { backing.entity.storedValueName(at: $0.0) })
        }
        for entry in relationshipChanges.entries.values where recording {
            let k = RowCacheKey(entity: ObjectIdentifier(entry.entity), key: entry.key)
            if insertedNow.contains(k) || context.pending.deleted[k] != nil || context.pending.insertedDeleted[k] != nil { continue }
            let id = context.objectID(entry.entity, entry.key)
            changes.updated.insert(id)
            changes.changedProperties[id, default: []].formUnion(entry.relationships.map { entry.entity.relationships[$0].name })
        }
        // An object inserted in an earlier event and deleted in this one is deleted; one inserted
        // and deleted within this event never was.
        for backing in deleted where recording {
            if backing.isInserted && insertedNow.contains(RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)) { continue }
            changes.deleted.insert(context.objectID(of: backing))
        }
        if recording { changes.deleted.formUnion(inaccessible) }
        for backing in inserted { backing.changedSinceEvent = false }
        inserted = []
        changed = []
        deleted = []
        relationshipChanges = RelationshipChangeLog()
        inaccessible = []
        return changes
    }

    // MARK: Live queries

    /// Registers a live query's engine, already evaluated once.
    func add(_ engine: LiveQueryEngine) {
        liveQueries.append(engine)
    }

    /// Brings every live query up to date with one event's changes. A query whose consumer is
    /// gone is dropped here.
    func updateLiveQueries(_ changes: ObjectChanges) {
        liveQueries.removeAll { $0.sink == nil }
        let everything = liveQueriesNeedEverything
        liveQueriesNeedEverything = false
        guard !liveQueries.isEmpty else { return }
        let digest = LiveChangeDigest(changes, everything: everything)
        for engine in liveQueries { engine.update(digest) }
    }

    /// Evaluates every live query again if something changed that no event lists (a reset,
    /// history lost, a query generation moved).
    func refreshLiveQueriesIfNeeded() {
        guard liveQueriesNeedEverything else { return }
        updateLiveQueries(ObjectChanges())
    }

    /// Notes that live queries must be evaluated again at the end of the current event.
    func liveQueriesMayHaveMissedChanges() {
        guard !liveQueries.isEmpty else { return }
        liveQueriesNeedEverything = true
        scheduleEndOfEvent()
    }
}

/// Telling the observers of `@Model` objects (the Observation framework) about changes that do
/// not go through a property's setter: merges, refreshes, rollbacks, inverse relationships.
///
/// A setter tells its own property's observers itself. It tells only objects that may be
/// observed (``BackedObject/_loomMayBeObserved``): for the others it costs a registry lookup or
/// less. It keeps no state of its own: the context makes one for each call
/// (``ManagedObjectContext/notifyObservers(of:valuesFrom:to:)`` and its siblings) and calls it
/// on its own isolation; it is not `Sendable`.
struct PropertyObservers {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// The registered object of `backing`, if anything may observe it.
    private func observedObject(of backing: ObjectBacking) -> (any BackedObject)? {
        observedObject(of: backing.entity, key: backing.key, backing: backing)
    }

    private func observedObject(of entity: EntityDescription, key: Int64, backing: ObjectBacking? = nil) -> (any BackedObject)? {
        guard let entry = context.identityMap[RowCacheKey(entity: ObjectIdentifier(entity), key: key)],
              backing == nil || entry.backing === backing,
              entry.object._loomMayBeObserved
        else { return nil }
        return entry.object
    }

    /// Tells observers which properties of a loaded object changed when its stored values went
    /// from `before` to `after`: each property whose slot differs, and the inverse to-many
    /// relationship of every object a changed foreign key left or now leads to.
    func notifyObservers(of backing: ObjectBacking, valuesFrom before: [StoredValue], to after: [StoredValue]) {
        guard before.count == after.count else { return }
        let entity = backing.entity
        let object = observedObject(of: backing)
        for slot in before.indices where !before[slot].isIdentical(to: after[slot]) {
            object?._loomPropertyDidChange(at: entity.slotProperties[slot])
            guard slot >= entity.attributes.count else { continue }
            let r = context.coordinator.schema.relationship(entity.slotRelationships[slot - entity.attributes.count], of: entity)
            guard case .foreignKey = r.storage else { continue }
            for case .integer(let owner) in [before[slot], after[slot]] {
                // Only registered objects have observers: no lookup of an unregistered key's entity.
                notifyObservers(ofRelationship: r.inverseIndex, of: context.registeredDestination(of: r, key: owner)?.entity ?? r.destination, key: owner)
            }
        }
    }

    /// Tells the observers of one stored value of an object that it changed.
    func notifyObservers(ofSlot slot: Int, of backing: ObjectBacking) {
        observedObject(of: backing)?._loomPropertyDidChange(at: backing.entity.slotProperties[slot])
    }

    /// ``notifyObservers(ofSlot:of:)`` for a backing whose object is at hand (`object`, the
    /// object `backing` belongs to): no registry lookup.
    func notifyObservers(ofSlot slot: Int, of backing: ObjectBacking, object: any BackedObject) {
        if object._loomMayBeObserved { object._loomPropertyDidChange(at: backing.entity.slotProperties[slot]) }
    }

    /// Tells the observers of relationship `j` of the registered object for `key`, if any, that
    /// it changed.
    func notifyObservers(ofRelationship j: Int, of entity: EntityDescription, key: Int64) {
        observedObject(of: entity, key: key)?._loomPropertyDidChange(at: entity.relationshipProperties[j])
    }

    /// ``notifyObservers(ofRelationship:of:key:)`` for an object at hand (`object`, an object of
    /// `entity`): no registry lookup.
    func notifyObservers(ofRelationship j: Int, of entity: EntityDescription, object: any BackedObject) {
        if object._loomMayBeObserved { object._loomPropertyDidChange(at: entity.relationshipProperties[j]) }
    }

    /// Tells the observers of the named properties of an object that they changed (a save
    /// changed them), or of every property when the names are unknown.
    func notifyObservers(of backing: ObjectBacking, properties names: Set<String>?) {
        guard let object = observedObject(of: backing) else { return }
        let entity = backing.entity
        guard let names else {
            for index in entity.propertyTable.indices { object._loomPropertyDidChange(at: index) }
            return
        }
        for name in names {
            if let a = entity.attributeIndex(named: name) {
                object._loomPropertyDidChange(at: entity.slotProperties[a])
            } else if let j = entity.relationshipIndex(named: name) {
                object._loomPropertyDidChange(at: entity.relationshipProperties[j])
            }
        }
    }
}
