extension ManagedObjectContext {
    // MARK: Reading

    /// The registered object with this key, or a new fault that reads its row when first used.
    /// No I/O.
    func object(of entity: EntityDescription, key: Int64) -> any BackedObject {
        if let registered = identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key)) { return registered }
        return register(ObjectBacking(entity: entity, key: key, context: self))
    }

    /// The registered object for a key, if any.
    func registeredBacking(of entity: EntityDescription, key: Int64) -> ObjectBacking? {
        identityMap.backing(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key))
    }

    /// The registered object with `key` among the destinations of `r` (its sub-entities'
    /// objects too, when it has them), if any. No I/O.
    func registeredDestination(of r: ResolvedRelationship, key: Int64) -> ObjectBacking? {
        guard r.leadsToSubentities else { return registeredBacking(of: r.destination, key: key) }
        for entity in coordinator.schema.concreteEntities(of: r.destination) {
            if let backing = registeredBacking(of: entity, key: key) { return backing }
        }
        return nil
    }

    /// Runs `body` with the backing of an object, registering a fault when needed, and keeps the
    /// object alive meanwhile (the registry does not keep clean objects alive).
    func withObject<T>(_ entity: EntityDescription, _ key: Int64, _ body: (ObjectBacking) -> T) -> T {
        let object = self.object(of: entity, key: key)
        return withExtendedLifetime(object) { body(object._loomBacking) }
    }

    /// The object a to-one relationship of a loaded object leads to.
    func destinationObject(of backing: ObjectBacking, relationship j: Int) -> (any BackedObject)? {
        let r = coordinator.schema.relationship(j, of: backing.entity)
        guard case .foreignKey(let slot) = r.storage, case .integer(let key) = backing.values[slot] else { return nil }
        return object(for: r, key: key)
    }

    /// The object with `key` among the destinations of `r`: an object of its destination
    /// entity, or of one of its sub-entities (see ``destinationEntity(of:key:)``).
    func object(for r: ResolvedRelationship, key: Int64) -> any BackedObject {
        object(of: r.leadsToSubentities ? destinationEntity(of: r, key: key) : r.destination, key: key)
    }

    /// The objects with `keys` among the destinations of `r`, in the same order; their entities
    /// found at once (see ``destinationEntities(of:keys:)``).
    func objects(for r: ResolvedRelationship, keys: [Int64]) -> [any BackedObject] {
        guard r.leadsToSubentities else { return keys.map { object(of: r.destination, key: $0) } }
        let entities = destinationEntities(of: r.destination, keys: keys)
        let fallback = fallbackEntity(of: r.destination)
        return keys.map { object(of: entities[$0] ?? fallback, key: $0) }
    }

    /// The entity of the object with `key` that relationship `r` leads to: its destination,
    /// unless that has sub-entities (``ResolvedRelationship/leadsToSubentities``); then the
    /// one whose table holds the key.
    ///
    /// A key names one object of a hierarchy (one key space per hierarchy). Found, in this
    /// order, in the coordinator's ``KeyEntities``, among this context's registered objects
    /// (its inserted ones too), and by asking this context's source for the key in each
    /// table, which the coordinator then remembers (a root context's source also caches the
    /// rows it read, so the faults made from them fire without I/O). A key found nowhere (a deleted
    /// object's) is given the destination itself, or its first concrete entity when it is
    /// abstract: its fault then finds no row, as any deleted object's.
    func destinationEntity(of r: ResolvedRelationship, key: Int64) -> EntityDescription {
        guard r.leadsToSubentities else { return r.destination }
        return destinationEntities(of: r.destination, keys: [key])[key] ?? fallbackEntity(of: r.destination)
    }

    /// The entity of each of `keys` among `entity` and its sub-entities, as
    /// ``destinationEntity(of:key:)`` finds it; keys found nowhere are left out. One query per
    /// table at most, for all the keys not known yet.
    func destinationEntities(of entity: EntityDescription, keys: some Sequence<Int64>) -> [Int64: EntityDescription] {
        let candidates = coordinator.schema.concreteEntities(of: entity)
        let root = entity.rootEntity
        // The coordinator's map first (one lock for all the keys), then registered objects.
        var found = coordinator.keyEntities.entities(in: root, keys: keys).filter { $0.value.isKind(of: entity) }
        var missing: [Int64] = []
        for key in keys where found[key] == nil {
            if let registered = candidates.first(where: { identityMap.backing(for: RowCacheKey(entity: ObjectIdentifier($0), key: key)) != nil }) {
                found[key] = registered
            } else {
                missing.append(key)
            }
        }
        guard !missing.isEmpty else { return found }
        do {
            for candidate in candidates where !missing.isEmpty {
                let rows = try rowSource.baseRows(of: candidate, keys: missing)
                guard !rows.isEmpty else { continue }
                for row in rows { found[row.key] = candidate }
                coordinator.keyEntities.note(candidate, keys: rows.map(\.key))
                missing.removeAll { found[$0] != nil }
            }
        } catch {
            // The next save reports it; meanwhile the keys not found are treated as gone.
            recordReadFailure(error)
        }
        return found
    }

    /// Rows `r` led to, grouped by their entity: all of `r`'s destination's, unless it has
    /// sub-entities (their entities are known once ``currentRelated(_:keys:)`` read them).
    func rowsByEntity(_ rows: [StoreRow], of r: ResolvedRelationship) -> [(EntityDescription, [StoreRow])] {
        guard r.leadsToSubentities else { return rows.isEmpty ? [] : [(r.destination, rows)] }
        var groups: [(EntityDescription, [StoreRow])] = []
        let entities = destinationEntities(of: r.destination, keys: rows.map(\.key))
        let fallback = fallbackEntity(of: r.destination)
        for row in rows {
            let entity = entities[row.key] ?? fallback
            if let i = groups.firstIndex(where: { $0.0 === entity }) { groups[i].1.append(row) } else { groups.append((entity, [row])) }
        }
        return groups
    }

    /// The entity given a key of `entity`'s hierarchy found in no table.
    func fallbackEntity(of entity: EntityDescription) -> EntityDescription {
        entity.isAbstract ? coordinator.schema.concreteEntities(of: entity).first ?? entity : entity
    }

    /// The corrector of reads by this context's unsaved changes.
    var pendingChangeEvaluator: PendingChangeEvaluator { PendingChangeEvaluator(context: self) }

    /// Whether this context has unsaved changes that can change the answer to `query`.
    func hasPendingChanges(affecting query: StoreQuery) -> Bool { pendingChangeEvaluator.affects(query) }

    /// The destinations of a to-many relationship for each of `keys`, as this context sees
    /// them: its source's answer corrected by this context's unsaved changes.
    func currentRelated(_ r: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [(owner: Int64, row: StoreRow)] {
        try pendingChangeEvaluator.currentRelated(r, keys: keys)
    }

    // MARK: Changing (see Graph/)

    /// The graph of this context's objects: inverses and delete rules.
    var graph: ObjectGraph { ObjectGraph(context: self) }

    /// Sets relationship `j` of a loaded object, keeping every inverse in step; `object`, when
    /// the caller has it, is the object `backing` belongs to.
    func setRelationship(_ j: Int, of backing: ObjectBacking, object: (any BackedObject)? = nil, to objects: [any BackedObject]) {
        graph.setRelationship(j, of: backing, object: object, to: objects)
    }

    /// Relates the object with key `other` to `backing` through `r`, and its inverse.
    func relate(_ r: ResolvedRelationship, _ backing: ObjectBacking, _ other: Int64) { graph.relate(r, backing, other) }

    /// Forgets every loaded to-many list (see ``ObjectGraph/forgetLoadedRelationships()``).
    func forgetLoadedRelationships() { graph.forgetLoadedRelationships() }

    /// See ``ObjectGraph/forgetInverseLists(of:before:dropAll:)``.
    func forgetInverseLists(of backing: ObjectBacking, before: [StoredValue], dropAll: Bool = false) {
        graph.forgetInverseLists(of: backing, before: before, dropAll: dropAll)
    }
}
