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
        return object(of: r.destination, key: key)
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

    /// Sets relationship `j` of a loaded object, keeping every inverse in step.
    func setRelationship(_ j: Int, of backing: ObjectBacking, to objects: [any BackedObject]) {
        graph.setRelationship(j, of: backing, to: objects)
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
