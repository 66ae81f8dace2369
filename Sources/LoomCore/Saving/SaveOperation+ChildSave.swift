extension ManagedObjectContext {
    /// A child's save: its changes become unsaved changes of its parent.
    func saveIntoParent(_ parent: ParentLink) throws(LoomError) {
        var child = ChildChanges()
        for b in insertedBackingsInOrder() {
            child.inserts.append(.init(entity: b.entity, key: b.key, values: b.values))
        }
        for (key, object) in pending.updated.sorted(by: { $0.key.key < $1.key.key }) where pending.deleted[key] == nil {
            let b = object._loomBacking
            let changed = b.changedSlots()
            if !changed.isEmpty { child.updates.append(.init(entity: b.entity, key: b.key, changes: changed)) }
        }
        for object in pending.deleted.values {
            child.deletes.append(.init(entity: object._loomBacking.entity, key: object._loomBacking.key))
        }
        for (link, added) in pending.links.sorted(by: { ($0.key.table.name, $0.key.source, $0.key.target) < ($1.key.table.name, $1.key.source, $1.key.target) }) {
            child.links.append(.init(table: link.table, source: link.source, target: link.target, added: added))
        }
        let pushed = child
        try parent.run { (context) throws(LoomError) in
            try context.absorb(pushed)
            context.processPendingChanges()
        }
        let versions = Dictionary(uniqueKeysWithValues: (Array(pending.inserted.values) + Array(pending.updated.values)).map { (ObjectIdentifier($0._loomBacking), $0._loomBacking.version) })
        let changes = commitSavedState(recording: hasEventListeners).changes
        // A child's objects keep the parent's versions: only the store's saves bump them.
        for object in identityMap.objects {
            if let version = versions[ObjectIdentifier(object._loomBacking)] { object._loomBacking.version = version }
        }
        post(.didSave(changes))
    }

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

/// A child's saved changes, on their way to its parent.
struct ChildChanges: Sendable {
    struct Insert: Sendable { let entity: EntityDescription; let key: Int64; let values: [StoredValue] }
    struct Update: Sendable { let entity: EntityDescription; let key: Int64; let changes: [(Int, StoredValue)] }
    struct Delete: Sendable { let entity: EntityDescription; let key: Int64 }
    struct Link: Sendable { let table: JoinTable; let source: Int64; let target: Int64; let added: Bool }
    var inserts: [Insert] = []
    var updates: [Update] = []
    var deletes: [Delete] = []
    var links: [Link] = []
}
