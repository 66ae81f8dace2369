import Foundation

/// A scratchpad of managed objects: fetch them, change them, then save all changes at once.
///
/// A context belongs to one isolation domain and so do its objects: the view context to the
/// main actor (``PersistentContainer/viewContext``), every other context to its own serial
/// queue (``BackgroundContext``). The type is not `Sendable`, so Swift 6 rejects code that
/// moves a context or its objects to another domain; pass ``AnyObjectID``s or ``ObjectID``s
/// instead. With ``ConcurrencyDebugging`` on, misuse that escapes the compiler traps.
///
/// ```swift
/// let book = Book(context: context)
/// book.title = "Threads"
/// try context.save()
/// let long = try context.fetch(FetchRequest<Book>(predicate: #Predicate { $0.pages > 300 }))
/// ```
public final class ManagedObjectContext {
    /// The coordinator this context reads from and saves to.
    public let coordinator: PersistentStoreCoordinator
    /// A name for messages and debugging (Core Data's `name`); also recorded in the store's
    /// history with every save.
    public var name: String?
    /// Who this context's saves are by, recorded in the store's history with every save
    /// (Core Data's `transactionAuthor`), so that a consumer can skip its own changes:
    /// ``HistoryDescriptor/authors``. Set and read on the context's isolation.
    public var transactionAuthor: String?
    let isolation: ContextIsolation

    /// Every object registered in this context, by entity and key. Clean objects are not kept
    /// alive by it, so that they go away when the app lets go of them, as in Core Data: an
    /// object's entry leaves with the object (see ``ObjectSlot``).
    ///
    /// `@exclusivity(unchecked)`: every object made or destroyed reaches it two or three times,
    /// and the run-time exclusivity check would run on each. Safe because no
    /// method of ``IdentityMap`` releases an object or calls out while it changes the map (an
    /// object dropped from it is returned, to be released by the caller), so an object's
    /// `deinit`, which takes its entry out, never runs inside another access to it.
    @exclusivity(unchecked) var identityMap = IdentityMap()

    /// The entity of the last object ID this context resolved (``resolvedEntity(of:)``): IDs of one
    /// entity in a row are the rule, and comparing the name with the last one's spares a lookup
    /// by name (a string hash on every ID lookup). `@exclusivity(unchecked)` like
    /// ``identityMap``: read and assigned only there, on the context's isolation.
    @exclusivity(unchecked) private var lastResolvedEntity: EntityDescription?

    /// Whether the context keeps every registered object alive, rather than only those with
    /// unsaved changes (Core Data's `retainsRegisteredObjects`, off by default). Turn it on to
    /// keep a working set in memory across fetches; ``reset()`` releases them.
    public var retainsRegisteredObjects: Bool {
        get { identityMap.retainsAll }
        set {
            let released = identityMap.setRetainsAll(newValue)
            withExtendedLifetime(released) {}   // released here, once the map is consistent
        }
    }

    /// Everything changed and not saved yet, its objects held strongly until saved, rolled back
    /// or reset.
    var pending = PendingChanges()

    // Relationships (see ManagedObjectContext+Relationships.swift).
    /// The inserted objects in the order the last change set listed them (see `SaveOperation.makeChangeSet`).
    /// Emptied when the save ends, so that it keeps no object alive.
    var changeSetInsertOrder: [SaveOperation.InsertedObject] = []
    /// The coordinator's change generation before the first fetch whose faults hold their rows
    /// (the oldest such rows are that old), from which each fault's ``ObjectBacking/heldRowAge``
    /// counts; `nil` when no fault holds one.
    var fetchedRowsGeneration: UInt64?
    /// The query generation reads go to (nil: the latest data); see ``setQueryGenerationFrom(_:)``.
    var queryGeneration: QueryGenerationToken?
    /// A generation released by its limit, whose event the end of the event posts.
    var releasedGeneration: QueryGenerationToken?
    /// Whether the graph is applying delete rules now (see `ObjectGraph.propagateDeletes`):
    /// an unsaved object a rule deletes then joins that run's waves instead of starting one.
    var isPropagatingDeletes = false

    /// What happens when a fault fires and its row no longer exists (another context or
    /// process deleted it): with `true` (the default, Core Data's `shouldDeleteInaccessibleFaults`)
    /// the object becomes *deleted*: ``BackedObject/isDeleted`` is true, it leaves the context,
    /// optional attributes read `nil`, others their default value or their type's zero value
    /// (`0`, `""`, `false`, empty data), relationships read empty — never stale values — and
    /// the next `objectsDidChange` lists it as deleted. With `false`, the access traps with a
    /// message naming the object (useful while debugging).
    ///
    /// To get an error instead, load the object first with ``fulfillFault(of:)``, or use
    /// `existingObject(with:)`.
    public var deletesInaccessibleFaults = true

    // Store failures met where no error can be thrown (see ManagedObjectContext+StoreFailures.swift).
    /// Why the objects awaiting keys have none.
    var keyFailure: LoomError?
    /// The first read failure not reported yet (a fault, a to-many, a batch).
    var readFailure: LoomError?
    /// A change made to an object of this context after another context or process deleted
    /// its row: the next save throws it rather than save the rest of the change (a transfer's
    /// debit without its credit); a rollback forgets it with the change.
    var changeToDeletedObject: LoomError?

    /// Events, their observers and live queries (see Observation/ContextObservation.swift).
    let observation = ContextObservation()

    // Merging (see ManagedObjectContext+Merging.swift).
    let inbox: MergeInbox
    /// The number of the last save of another context merged into this one.
    public internal(set) var lastMergedSaveNumber: UInt64 = 0
    /// The number the coordinator gave this context's last save.
    public internal(set) var lastSaveNumber: UInt64 = 0

    /// How conflicts found at save are resolved; ``MergePolicy/error`` (the default) fails the
    /// save and reports them. It governs saves only: merging another context's save keeps this
    /// context's unsaved edits on top whatever the policy (see ``mergeChanges(fromContextDidSave:)``).
    public var mergePolicy: MergePolicy = .error

    /// How old (in seconds) a cached row may be when it fills a fault; older rows are read again
    /// from the store. Negative (the default) means any age. Like Core Data's, it only applies
    /// to faults: objects already loaded are not refreshed by it.
    ///
    /// `@exclusivity(unchecked)`: every object a fetch or a to-many fault makes reads it, and a
    /// run-time exclusivity check cost more than the read; it is only ever read or assigned.
    @exclusivity(unchecked) public var stalenessInterval: Double = -1

    /// Whether saves of other contexts on the same coordinator are merged into this one
    /// automatically, on this context's isolation. On by default for the view context, off for
    /// other contexts.
    public var automaticallyMergesChanges: Bool {
        get { inbox.isEnabled }
        set { inbox.isEnabled = newValue }
    }

    /// The parent of a child context; `nil` for a context that saves to the store.
    let parent: ParentLink?

    /// The context's undo stack (SwiftData's and Core Data's `undoManager`): `nil`, the default,
    /// records nothing and costs nothing; assign an ``UndoStack`` to make changes undoable with
    /// ``undo()`` and ``redo()``. A stack serves one context (assigning one that serves another
    /// traps); setting another stack, or `nil`, drops the steps of the one before.
    ///
    /// Set and read it on the context's isolation.
    public var undoManager: UndoStack? {
        get { undoStack }
        set {
            guard newValue !== undoStack else { return }
            ConcurrencyDebugging.check(self, "undoManager")
            if let stack = newValue, let other = stack.context, other !== self {
                fatalError("This UndoStack already serves context '\(other.name ?? "unnamed")'; give context '\(name ?? "unnamed")' a stack of its own.")
            }
            if let old = undoStack {
                old.context = nil
                old.removeAllActions()
            }
            newValue?.context = self
            undoStack = newValue
        }
    }
    /// The stack behind ``undoManager``. `@exclusivity(unchecked)`: every stored value set reads
    /// it, and a run-time exclusivity check would cost more than the read; it is only read and
    /// assigned, on the context's isolation.
    @exclusivity(unchecked) var undoStack: UndoStack?

    init(coordinator: PersistentStoreCoordinator, isolation: ContextIsolation, name: String?, mergesAutomatically: Bool = false, isViewContext: Bool = false, parent: ParentLink? = nil) {
        ConcurrencyDebugging.readEnvironment()
        self.coordinator = coordinator
        self.parent = parent
        self.isolation = isolation
        self.name = name
        self.inbox = MergeInbox(isolation: isolation, isViewContext: isViewContext, enabled: mergesAutomatically)
        inbox.context = UncheckedContext(self)
        coordinator.register(inbox)
        if case .mainActor = isolation { observation.mainActorContext = UncheckedContext(self) }
    }

    deinit {
        coordinator.unregister(inbox)
        for (key, object) in Array(pending.inserted) + Array(pending.insertedDeleted) {
            coordinator.keyAllocator.forgetUnsaved(object._loomBacking.entity, key: key.key)
        }
        observation.hub.finish()
    }

    // MARK: Change tracking

    /// Whether any object was inserted, changed or deleted since the last save.
    public var hasChanges: Bool {
        ConcurrencyDebugging.check(self, #function)
        return !pending.isEmpty
    }

    /// The inserted objects not saved yet (not those inserted and then deleted).
    public var inserted: [any BackedObject] {
        ConcurrencyDebugging.check(self, #function)
        return pending.inserted.values.sorted { $0._loomBacking.key < $1._loomBacking.key }
    }

    /// The saved objects with unsaved changes.
    public var updated: [any BackedObject] {
        ConcurrencyDebugging.check(self, #function)
        return pending.updated.values.sorted { $0._loomBacking.key < $1._loomBacking.key }
    }

    /// The saved objects deleted and not saved yet.
    public var deleted: [any BackedObject] {
        ConcurrencyDebugging.check(self, #function)
        return pending.deleted.values.sorted { $0._loomBacking.key < $1._loomBacking.key }
    }

    /// The objects registered in this context that are still alive.
    public var registeredObjects: [any BackedObject] {
        ConcurrencyDebugging.check(self, #function)
        return identityMap.objects
    }

    /// Records the first change of a registered object since it was saved or fetched. `owner`
    /// is the backing's object when the caller has it (a generated setter). The first change of
    /// every loaded object comes here, so the identity map is searched only for callers that
    /// have nothing but the backing (graph upkeep, merges, a child's save).
    func objectDidChange(_ backing: ObjectBacking, owner: (any BackedObject)? = nil) {
        let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
        assert(owner.map { $0._loomBacking === backing } ?? true, "a change recorded for another object's backing")
        guard let object = owner ?? identityMap.object(for: key) else { return }
        pending.noteUpdate(of: object, at: key)
    }

    // MARK: Inserting and deleting

    /// Inserts a new object into this context, giving it its permanent ID.
    ///
    /// The object must be new: created with its initializer and never inserted. Inserting an
    /// object already in this context does nothing.
    ///
    /// Never waits for the store in the usual case: keys are reserved ahead, in blocks, off the
    /// caller's isolation. When none is left and the store cannot reserve more right now (it
    /// failed, or its container was closed), the insert does not fail: the object is kept by
    /// the context *awaiting its key*. Until then it is like a new object not inserted yet: its
    /// values can be read and set, relationships set on it are kept, but it has no ID
    /// (``BackedObject/anyObjectID`` traps) and is not listed in ``inserted``. The next
    /// ``save()`` reserves its key first and throws the store's error if that still fails
    /// (``LoomError/Code/closed`` after a close), changing nothing; ``pendingStoreError`` tells
    /// sooner. ``rollback()`` and ``reset()`` forget such objects.
    ///
    /// An object of an abstract entity (`@Model(abstract: true)`) is not inserted: it stays
    /// detached, and the next ``save()`` throws ``LoomError/Code/abstractEntity`` (also shown by
    /// ``pendingStoreError``), changing nothing else.
    ///
    /// Call it on this context's isolation. Traps (a programmer error) for an object of another
    /// context or of an entity this model lacks.
    public func insert<Model: PersistentModel>(_ object: Model) {
        do {
            try insertObject(object)
        } catch where error.code == .abstractEntity {
            recordReadFailure(error)
        } catch {
            fatalError(error.message)
        }
    }

    /// Inserts an object (see ``insert(_:)``). A key that cannot be reserved leaves the object
    /// awaiting it, unless `reportingKeyFailure`, which throws the store's error instead.
    func insertObject(_ object: any BackedObject, reportingKeyFailure: Bool = false) throws(LoomError) {
        ConcurrencyDebugging.check(self, "insert(_:)")
        let backing = object._loomBacking
        if backing.context === self, backing.state != .invalidated { return }
        guard backing.state == .detached else {
            throw LoomError(.wrongContext, "This \(backing.entity.name) already belongs to another context; insert a new object, or pass its ID and fetch it there.", entity: backing.entity.name)
        }
        let entity = backing.entity
        if !coordinator.schema.contains(entity) {
            _ = try coordinator.schema.requireEntity(named: entity.name)   // throws for an unknown name
            throw LoomError(.unknownEntity, "\(entity.name) is not this store's \(entity.name) entity (built from another model).", entity: entity.name)
        }
        if entity.isAbstract {
            let kinds = coordinator.schema.concreteEntities(of: entity).map(\.name)
            throw LoomError(.abstractEntity, "\(entity.name) is abstract: it has no objects of its own; insert an object of one of its sub-entities (\(kinds.isEmpty ? "it has none" : kinds.joined(separator: ", "))).", entity: entity.name)
        }
        let key: Int64
        do {
            key = try coordinator.keyAllocator.allocateKey(for: entity)
        } catch {
            if reportingKeyFailure { throw error }
            awaitKey(object, error)
            return
        }
        backing.applyDefaultsIfNeeded()
        backing.key = key
        backing.context = self
        backing.storeIdentity = coordinator.identity
        backing.state = .loaded
        backing.isInserted = true
        // Nothing refers to a new key yet: its lists start loaded and empty, and follow every
        // later change, as a saved object's loaded lists do. Unloaded, each list's first read
        // would search this context's unsaved changes for members, a scan of every pending
        // object per new owner, which made an import of parents and their children quadratic.
        backing.startEmptyLists()
        let registryKey = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
        enroll(object, backing, at: registryKey)
        pending.noteInsertion(of: object, at: registryKey)
        noteEventChange(backing, inserted: true)
        if let stack = undoStack, stack.isRecording { stack.recordAppearance(object) }
        // Relationships set before the insertion, and the new objects they lead to.
        guard !backing.detachedRelated.isEmpty else { return }
        let detached = backing.detachedRelated
        backing.detachedRelated = [:]
        for (j, related) in detached.sorted(by: { $0.key < $1.key }) {
            for other in related where other._loomBacking.state == .detached { try insertObject(other, reportingKeyFailure: reportingKeyFailure) }
            setRelationship(j, of: backing, to: related)
        }
    }

    /// Marks an object for deletion at the next save.
    ///
    /// The delete rules of its relationships run when the context next processes pending
    /// changes (at the end of the current `perform` or main-actor turn, or at the start of a
    /// save). Deleting an object inserted and not saved yet applies its rules at once and forgets
    /// it, leaving no trace (unless a deny rule holds it back: then the next save reports it).
    /// Deleting an object already deleted, or one found deleted elsewhere, does nothing.
    public func delete(_ object: any BackedObject) {
        ConcurrencyDebugging.check(self, #function)
        let backing = object._loomBacking
        if backing.isInaccessible || (backing.context == nil && backing.isDeleted) { return }
        guard backing.context === self else {
            fatalError("delete(_:) was given \(English.a(backing.entity.name)) that is not registered in context '\(name ?? "unnamed")'.")
        }
        if backing.isDeleted { return }
        graph.delete(object)
    }

    // MARK: Resolving IDs

    /// The object with this ID if it is registered in this context, else `nil`. Never does I/O.
    public func registeredObject<Model: PersistentModel>(for id: ObjectID<Model>) -> Model? {
        registeredObject(for: id.erased) as? Model
    }

    /// The object with this ID if it is registered in this context, else `nil`. Never does I/O.
    public func registeredObject(for id: AnyObjectID) -> (any BackedObject)? {
        ConcurrencyDebugging.check(self, #function)
        guard id.storeIdentifier == coordinator.storeIdentifier, let entity = coordinator.schema.entity(named: id.entityName) else { return nil }
        return identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(entity), key: id.primaryKey))
    }

    /// The object with this ID: the registered one, or a new fault. Never returns `nil` and does
    /// no I/O; a fault whose row does not exist traps when it fires. Use `existingObject(with:)`
    /// when the object may not exist.
    ///
    /// Throws for an ID of another store or an entity this model lacks.
    public func object<Model: PersistentModel>(with id: ObjectID<Model>) throws(LoomError) -> Model {
        let object = try self.object(with: id.erased)
        guard let model = object as? Model else {
            throw LoomError(.typeMismatch, "\(id) is not \(English.a(Model.self)).", entity: id.erased.entityName, objectID: id.erased)
        }
        return model
    }

    /// The object with this ID, untyped; see ``object(with:)-(ObjectID<Model>)``.
    public func object(with id: AnyObjectID) throws(LoomError) -> any BackedObject {
        ConcurrencyDebugging.check(self, #function)
        let entity = try resolvedEntity(of: id)
        return self.object(of: entity, key: id.primaryKey)
    }

    /// The entity of an object ID of this context's store; throws for another store's ID or an
    /// entity the model lacks (``PersistentStoreCoordinator/checkOwnership(of:)``).
    private func resolvedEntity(of id: AnyObjectID) throws(LoomError) -> EntityDescription {
        if let last = lastResolvedEntity, last.name == id.entityName, id.storeIdentifier == coordinator.storeIdentifier {
            return last
        }
        let entity = try coordinator.checkOwnership(of: id)
        lastResolvedEntity = entity
        return entity
    }

    /// The object with this ID, with its values loaded; throws if no such object exists.
    ///
    /// The row is always read from the store (not from a possibly stale cache): a registered
    /// object without unsaved changes is brought up to date with it; one with unsaved changes is
    /// returned as this context has it. Throws ``LoomError/Code/objectNotFound`` when
    /// the row does not exist, ``LoomError/Code/objectNotSavedYet`` for an object inserted in
    /// another context and not saved yet.
    public func existingObject<Model: PersistentModel>(with id: ObjectID<Model>) throws(LoomError) -> Model {
        let object = try existingObject(with: id.erased)
        guard let model = object as? Model else {
            throw LoomError(.typeMismatch, "\(id) is not \(English.a(Model.self)).", entity: id.erased.entityName, objectID: id.erased)
        }
        return model
    }

    /// The object with this ID, untyped; see ``existingObject(with:)-(ObjectID<Model>)``.
    public func existingObject(with id: AnyObjectID) throws(LoomError) -> any BackedObject {
        ConcurrencyDebugging.check(self, #function)
        return try refresher.existingObject(with: id, of: try resolvedEntity(of: id))
    }

    /// Creates the right Swift object around a backing and registers it.
    func register(_ backing: ObjectBacking) -> any BackedObject {
        let object: any BackedObject = if let type = backing.entity.modelType {
            type.init(backing: backing)
        } else {
            DynamicObject(backing: backing)
        }
        let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
        backing.storeIdentity = coordinator.identity
        enroll(object, backing, at: key)
        return object
    }

    /// Enters an object in the registry. An object without an ``ObjectSlot`` (a class that
    /// conforms to ``BackedObject`` by hand) could not take its entry out when destroyed, so the
    /// context holds it strongly instead, until reset.
    func enroll(_ object: any BackedObject, _ backing: ObjectBacking, at key: RowCacheKey) {
        let displaced = identityMap.insert(object, backing, at: key)
        announceRegisteredEntities()
        withExtendedLifetime(displaced) {}   // released here, once the map is consistent
    }

    /// Debug builds check the identity map after each save, merge, rollback and reset, and trap
    /// naming what is wrong (release builds skip it: it reads every entry).
    func checkIdentityMap() {
        assert(identityMap.problems(in: self).isEmpty, "Loom: the identity map of context '\(name ?? "unnamed")' is inconsistent: \(identityMap.problems(in: self).joined(separator: "; ")).")
    }

    /// Takes a destroyed object's entry out of the registry (called from ``ObjectSlot``'s
    /// `deinit`), unless the key now belongs to another object.
    func unregister(_ backing: ObjectBacking) {
        identityMap.removeEntry(of: backing, at: RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key))
    }

    /// Loads a fault's values from the shared row cache or the store. A fault whose row is gone
    /// becomes a deleted object (see ``deletesInaccessibleFaults``). A fault whose row cannot be
    /// read (the store failed or was closed) stays a fault and shows placeholder values for now
    /// (see ``pendingStoreError``).
    func fulfillFault(_ backing: ObjectBacking) {
        if backing.holdsFetchedRow {
            // The fetch that made the fault read its row: nothing to load, unless a save
            // through this coordinator changed or deleted the row since.
            backing.holdsFetchedRow = false
            let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
            if !coordinator.mayHaveChanged(key, since: (fetchedRowsGeneration ?? 0) + UInt64(backing.heldRowAge)) {
                backing.state = .loaded
                return
            }
            backing.values = []
        }
        let row: StoreRow?
        do {
            row = try rowSource.baseRow(of: backing.entity, key: backing.key, fresh: false)
        } catch {
            recordReadFailure(error)
            backing.showPlaceholderValues()
            return
        }
        guard let row else {
            guard deletesInaccessibleFaults else {
                fatalError("\(backing.entity.name) \(backing.objectIDDescription) could not be loaded: its row no longer exists in the store (deleted elsewhere), and deletesInaccessibleFaults is off. Use fulfillFault(of:) or existingObject(with:) to get an error instead.")
            }
            forgetInaccessible(backing)
            return
        }
        backing.load(row)
    }

    /// Takes an object whose row is gone out of this context and makes it read as deleted.
    func forgetInaccessible(_ backing: ObjectBacking) {
        let key = RowCacheKey(entity: ObjectIdentifier(backing.entity), key: backing.key)
        let id = objectID(of: backing)
        identityMap.remove(key)
        pending.updated[key] = nil
        pending.deleted[key] = nil
        backing.becomeInaccessible()
        observation.inaccessible.append(id)
        scheduleEndOfEventIfNeeded()
    }

    /// Loads an object's values now if it is a fault; throws when its row no longer exists.
    ///
    /// Reading a property of a fault whose row was deleted elsewhere cannot throw: the object
    /// just reads as deleted (see ``deletesInaccessibleFaults``). Call this first where you want
    /// an error instead, for instance before showing an object reached through a relationship:
    ///
    /// ```swift
    /// if let author = book.author {
    ///     try context.fulfillFault(of: author)   // throws objectNotFound naming Author/12
    ///     show(author.name)
    /// }
    /// ```
    ///
    /// Call it on this context's isolation. Does no I/O for an object already loaded.
    ///
    /// - Throws: ``LoomError/Code/objectNotFound`` naming the object when its row is gone (the
    ///   object is then deleted, as a property read would have made it);
    ///   ``LoomError/Code/wrongContext`` for an object of another context.
    public func fulfillFault(of object: some BackedObject) throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        let backing = object._loomBacking
        if backing.isInaccessible {
            throw LoomError(.objectNotFound, "\(backing.objectIDDescription) was deleted elsewhere: its row no longer exists in the store.", entity: backing.entity.name, objectID: backing.requireObjectID())
        }
        guard backing.context === self else {
            throw LoomError(.wrongContext, "fulfillFault(of:) was given \(English.a(backing.entity.name)) that is not registered in this context.", entity: backing.entity.name)
        }
        guard backing.state == .fault else { return }
        guard let row = try rowSource.baseRow(of: backing.entity, key: backing.key, fresh: false) else {
            let id = objectID(of: backing)
            forgetInaccessible(backing)
            throw LoomError(.objectNotFound, "\(id) was deleted elsewhere: its row no longer exists in the store.", entity: id.entityName, objectID: id)
        }
        backing.load(row)
    }

    // MARK: Discarding changes

    /// Discards every unsaved change: inserted objects are forgotten, deleted ones restored,
    /// changed ones get their last saved values back, and the undo stack is emptied. No I/O. Posts `objectsDidChange`: the
    /// forgotten insertions as deleted, the restored objects as inserted, the changed ones as
    /// updated.
    ///
    /// Observers of the objects' properties are told about each property that gets its saved
    /// value back, and about each to-many relationship that had gained or lost objects.
    public func rollback() {
        ConcurrencyDebugging.check(self, #function)
        refresher.rollback()
        undoStack?.removeAllActions()
    }

    /// Forgets every registered object, every unsaved change and the undo stack's steps. Objects obtained from this
    /// context before the reset must not be used again: any use traps with a message saying so.
    public func reset() {
        ConcurrencyDebugging.check(self, #function)
        refresher.reset()
        undoStack?.removeAllActions()
    }

    /// Refreshes an object from the store.
    ///
    /// With `mergeChanges: false` unsaved changes are discarded and the object becomes a fault
    /// (its next use reads current data). With `true` the current store values are loaded and
    /// this context's unsaved changes are applied on top of them. Either way, observers of the
    /// object's properties are told about each one whose value is not the one it showed, and
    /// about each loaded to-many relationship (it is read again when next used).
    ///
    /// An object whose row was deleted elsewhere is no error here, as in Core Data: it becomes
    /// a fault, and its next use finds the row gone, as any fault's would (it then reads as
    /// deleted, see ``deletesInaccessibleFaults``; ``fulfillFault(of:)`` throws
    /// ``LoomError/Code/objectNotFound``). With `mergeChanges: true` an object with unsaved
    /// changes keeps them and its values instead: they are not lost, and saving them reports
    /// the deletion as a conflict, which the ``mergePolicy`` resolves.
    ///
    /// Call it on this context's isolation. Reads the object's row from the store (one query).
    ///
    /// - Throws: ``LoomError/Code/wrongContext`` for an object of another context; the store's
    ///   error when its row cannot be read (the object is then left as it was).
    public func refresh(_ object: some BackedObject, mergeChanges: Bool) throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        let backing = object._loomBacking
        guard backing.context === self else {
            throw LoomError(.wrongContext, "refresh(_:mergeChanges:) was given \(English.a(backing.entity.name)) that is not registered in this context.", entity: backing.entity.name)
        }
        try refresher.refresh(backing, mergeChanges: mergeChanges)
    }

    /// Refreshes every registered object from the store, keeping unsaved changes on top
    /// (Core Data's `refreshAllObjects()`): loaded objects get current values, faults stay
    /// faults and will read current data. Posts `objectsDidChange` with the objects as
    /// refreshed.
    ///
    /// Objects deleted elsewhere do not stop it: each becomes a fault that finds its row gone
    /// when next used (it then reads as deleted), or, with unsaved changes, keeps them for the
    /// save to report the conflict; see ``refresh(_:mergeChanges:)``. Call it after moving a
    /// context's query generation (``setQueryGenerationFrom(_:)``) to bring the objects it
    /// holds to the new one.
    ///
    /// Call it on this context's isolation. Reads each loaded object's row (one query each).
    ///
    /// - Throws: the store's error when a row cannot be read; the objects not reached by then
    ///   keep their values.
    public func refreshAllObjects() throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        try refresher.refreshAllObjects()
    }

    /// Rollback, reset and refresh (see ``ObjectRefresher``).
    var refresher: ObjectRefresher { ObjectRefresher(context: self) }
}
