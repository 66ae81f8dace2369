extension ManagedObjectContext {
    /// The object of this context's model that `old`, an object of an earlier version handed
    /// to a migration's transform, became: the same entity and primary key. Call on the new
    /// context's queue, inside the transform.
    ///
    /// - Throws: ``LoomError/Code/objectNotFound`` when the new version has no such object (its
    ///   entity was dropped or renamed), ``LoomError/Code/unknownEntity`` when `New` is not in
    ///   this context's model.
    public func migratedObject<New: PersistentModel>(_ old: some PersistentModel, as type: New.Type) throws(LoomError) -> New {
        let erased = old.objectID.erased
        guard let id = ObjectID<New>(AnyObjectID(storeIdentifier: erased.storeIdentifier, entityName: New.entity.name, primaryKey: erased.primaryKey)) else {
            throw LoomError(.unknownEntity, "\(New.self) is not an entity of this context's model.", entity: New.entity.name)
        }
        return try existingObject(with: id)
    }

    /// ``migratedObject(_:as:)`` for a whole chunk, in one fetch: the objects of this context's
    /// model that `olds` became, in the same order. Call on the new context's queue.
    ///
    /// - Throws: ``LoomError/Code/objectNotFound`` naming the first object the new version does
    ///   not have, ``LoomError/Code/unknownEntity`` when `New` is not in this context's model.
    public func migratedObjects<Old: PersistentModel, New: PersistentModel>(_ olds: [Old], as type: New.Type) throws(LoomError) -> [New] {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: New.entity.name)
        let keys = olds.map { $0.objectID.erased.primaryKey }
        let query = StoreQuery(entity: entity, predicate: .isIn(.primaryKey, keys.map { .integer($0) }))
        var byKey: [Int64: New] = [:]
        for object in try fetchObjects(query, includesPendingChanges: true, asFaults: false) {
            if let object = object as? New { byKey[object._loomBacking.key] = object }
        }
        var found: [New] = []
        found.reserveCapacity(keys.count)
        for key in keys {
            guard let object = byKey[key] else {
                throw LoomError(.objectNotFound, "\(New.entity.name)/\(key) is not in the new model version's store: its entity was dropped or renamed.", entity: New.entity.name)
            }
            found.append(object)
        }
        return found
    }
}
