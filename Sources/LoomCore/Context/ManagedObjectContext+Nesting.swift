import Foundation

extension ManagedObjectContext {
    // MARK: Where rows come from

    /// Rows for a query as this context's source sees them: the store for a root context, the
    /// parent (with its unsaved changes) for a child.
    func baseFetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        guard let parent else { return try coordinator.fetch(query, pinned: pinnedSnapshot()) }
        return try parent.run { (context) throws(LoomError) -> [StoreRow] in try context.rowsAsSeen(query) }
    }

    /// The keys of the rows this context's source has for a query, in order: without reading
    /// their values from the store.
    func baseKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        guard parent != nil else { return try (pinnedSnapshot() ?? coordinator.store as any StoreReading).fetchKeys(query) }
        return try baseFetch(query).map(\.key)
    }

    func baseCount(_ query: StoreQuery) throws(LoomError) -> Int {
        guard parent != nil else { return try coordinator.count(query, pinned: pinnedSnapshot()) }
        return try baseFetch(query).count
    }

    /// The current row of one object as this context's source sees it. `fresh` reads past the
    /// coordinator's cache (root contexts); otherwise the cache serves rows no older than
    /// ``stalenessInterval``.
    func baseRow(of entity: EntityDescription, key: Int64, fresh: Bool) throws(LoomError) -> StoreRow? {
        guard let parent else {
            return try coordinator.row(of: entity, key: key, bypassingCache: fresh, maximumAge: stalenessInterval, pinned: pinnedSnapshot())
        }
        return try parent.run { (context) throws(LoomError) -> StoreRow? in try context.currentRow(of: entity, key: key, fresh: fresh) }
    }

    /// What a child sees for a query: this context's objects with their unsaved changes.
    func rowsAsSeen(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        if !hasPendingChanges(affecting: query) { return try baseFetch(query) }
        return try matchingRows(query).map(\.row)
    }

    /// What a child sees for one object: this context's values, unsaved changes included.
    func currentRow(of entity: EntityDescription, key: Int64, fresh: Bool) throws(LoomError) -> StoreRow? {
        if let object = identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key)) {
            let backing = object._loomBacking
            if backing.isDeleted { return nil }
            if backing.state == .loaded {
                return StoreRow(key: key, version: backing.version, values: backing.values)
            }
        }
        return try baseRow(of: entity, key: key, fresh: fresh)
    }

    // MARK: Child contexts

    /// A new context on its own queue whose parent is this context: its fetches and faults see
    /// this context's unsaved changes, and its `save()` pushes its changes here (one level up),
    /// not to the store. Use it as a scratchpad: discard it to cancel, save it to keep.
    ///
    /// ```swift
    /// let editor = container.viewContext.newChildContext(name: "editor")
    /// try await editor.perform { context in
    ///     try context.existingObject(with: id).title = "Draft"
    ///     try context.save()             // now an unsaved change of the view context
    /// }
    /// ```
    ///
    /// Call it on this context's isolation. The child reaches this context synchronously on its
    /// isolation (like Core Data's children, which `performAndWait` on their parent) whenever it
    /// fetches, faults or saves. Waiting for the child from this context is allowed only while
    /// the child is not itself waiting for this context:
    ///
    /// - `child.performAndWait { ... }` from this context's isolation (from the main actor, for
    ///   a child of the view context) works: while this context waits for its child it is idle,
    ///   so the child's hops run this context's part on the child's queue.
    /// - Calling `child.performAndWait` while the child is busy in a `perform` that is reaching
    ///   this context can never end: Loom traps at once with "Loom deadlock: context '...' waits
    ///   synchronously for its child '...', which is waiting for it". Wait for a child that may
    ///   be busy with `await child.perform { ... }`.
    public func newChildContext(name: String = "Loom child context") -> BackgroundContext {
        ConcurrencyDebugging.check(self, #function)
        return BackgroundContext(coordinator: coordinator, name: name, parent: ParentLink(self))
    }

    /// Whether this context saves into a parent context rather than the store.
    public var hasParentContext: Bool { parent != nil }

    /// Pushes a saved child's changes into this context as its own unsaved changes.
    func absorb(_ changes: ChildChanges) throws(LoomError) {
        // Check everything first, so that a failure changes nothing.
        var targets: [(any BackedObject, [(Int, StoredValue)])] = []
        for update in changes.updates {
            let id = objectID(update.entity, update.key)
            let object = try existingObject(with: id)
            if object._loomBacking.isDeleted {
                throw LoomError(.objectNotFound, "\(id) was deleted in the parent context, so the child's changes to it cannot be saved there.", entity: update.entity.name, objectID: id)
            }
            targets.append((object, update.changes))
        }
        var doomed: [any BackedObject] = []
        for delete in changes.deletes {
            let id = objectID(delete.entity, delete.key)
            if let object = registeredObject(for: id) { doomed.append(object) } else { doomed.append(try existingObject(with: id)) }
        }
        var inserted: [any BackedObject] = []
        for insert in changes.inserts {
            let backing = ObjectBacking(entity: insert.entity, key: insert.key, context: self)
            backing.values = insert.values.map { $0 }
            backing.state = .loaded
            backing.isInserted = true
            let object = register(backing)
            inserted.append(object)
            let key = RowCacheKey(entity: ObjectIdentifier(insert.entity), key: insert.key)
            pending.inserted[key] = object
            pending.noteChange(of: key.entity)
            noteEventChange(backing, inserted: true)
        }
        let schema = coordinator.schema
        // The inserted objects' to-one relationships join their destinations' inverses.
        for object in inserted {
            let backing = object._loomBacking
            for r in schema.relationships(of: backing.entity) {
                guard case .foreignKey(let slot) = r.storage, case .integer(let other) = backing.values[slot] else { continue }
                backing.values[slot] = .null
                relate(r, backing, other)
            }
        }
        for (object, updates) in targets {
            let backing = object._loomBacking
            let before = backing.values
            defer { notifyObservers(of: backing, valuesFrom: before, to: backing.values) }
            for (index, value) in updates {
                guard index >= backing.entity.attributes.count else {
                    backing.setStoredValue(value, at: index)
                    continue
                }
                let j = backing.entity.slotRelationships[index - backing.entity.attributes.count]
                let r = schema.relationship(j, of: backing.entity)
                if case .foreignKey = r.storage {
                    if case .integer(let other) = value { relate(r, backing, other) } else { for old in relatedKeys(of: backing, r) { unrelate(r, backing, old) } }
                } else {
                    backing.setStoredValue(value, at: index)
                    backing.toMany[j] = nil
                }
            }
        }
        for link in changes.links {
            guard let source = schema.entity(named: link.table.sourceEntityName),
                  let r = schema.relationships(of: source).first(where: {
                      if case .joinTable(let t, let own, _) = $0.storage { return t == link.table && own == JoinTable.sourceColumn }
                      return false
                  }) else { continue }
            withObject(source, link.source) { backing in
                if link.added { relate(r, backing, link.target) } else { unrelate(r, backing, link.target) }
            }
        }
        for object in doomed where !object._loomBacking.isDeleted { delete(object) }
        withExtendedLifetime(inserted) {}
    }

    /// Saves this context and then each ancestor in turn, up to the store.
    ///
    /// For a root context this is ``save()``.
    public func saveRecursively() throws(LoomError) {
        try save()
        guard let parent else { return }
        try parent.run { (context) throws(LoomError) in try context.saveRecursively() }
    }
}
