extension ManagedObjectContext {
    /// Writes every unsaved change to the store in one transaction.
    ///
    /// Before writing, the changes are validated: every required attribute has a value of its
    /// type, and no uniqueness constraint is broken among the objects being saved; the store
    /// then checks uniqueness against saved rows and that no saved row changed underneath
    /// (optimistic locking). If anything fails, nothing is written, the error says what and
    /// where, and the context is left exactly as it was, still usable: fix the cause and save
    /// again.
    ///
    /// - Throws: ``LoomError`` with code ``LoomError/Code/missingRequiredValue``,
    ///   ``LoomError/Code/typeMismatch``, ``LoomError/Code/uniquenessViolation``,
    ///   ``LoomError/Code/versionConflict`` or ``LoomError/Code/storeFailure``.
    public func save() throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        guard !insertedObjects.isEmpty || !updatedObjects.isEmpty || !deletedObjects.isEmpty else { return }
        let inserted = insertedObjects.values.sorted { $0._loomBacking.key < $1._loomBacking.key }
        let updated = updatedObjects.filter { deletedObjects[$0.key] == nil }.values.sorted { $0._loomBacking.key < $1._loomBacking.key }
        let deleted = deletedObjects.values.sorted { $0._loomBacking.key < $1._loomBacking.key }

        for object in inserted + updated { try validateValues(object._loomBacking) }
        try validateUniqueness(among: inserted + updated)

        var changes = StoreChangeSet()
        for object in inserted {
            let b = object._loomBacking
            changes.inserts.append(.init(entity: b.entity, key: b.key, values: b.values.map { $0 ?? .null }))
        }
        var updatedIndexes: [ObjectIdentifier: [(Int, StoredValue)]] = [:]
        for object in updated {
            let b = object._loomBacking
            let changed = changedIndexes(b)
            updatedIndexes[ObjectIdentifier(b)] = changed
            if changed.isEmpty { continue }
            changes.updates.append(.init(entity: b.entity, key: b.key, expectedVersion: b.version, changes: changed.map { (index: $0.0, value: $0.1) }))
        }
        for object in deleted {
            let b = object._loomBacking
            changes.deletes.append(.init(entity: b.entity, key: b.key, expectedVersion: b.version))
        }

        if !changes.isEmpty { try coordinator.save(changes) }

        // Committed: bring every object's state in line with the store.
        for object in inserted {
            let b = object._loomBacking
            b.isInserted = false
            b.committed = b.values.map { $0 ?? .null }
            b.version = 1
        }
        for object in updated {
            let b = object._loomBacking
            b.isUpdated = false
            b.committed = b.values.map { $0 ?? .null }
            if !(updatedIndexes[ObjectIdentifier(b)]?.isEmpty ?? true) { b.version += 1 }
        }
        for (key, object) in deletedObjects {
            registry[key] = nil
            object._loomBacking.invalidate(reason: "it was deleted and the deletion saved")
        }
        insertedObjects = [:]
        updatedObjects = [:]
        deletedObjects = [:]
        changedEntities = [:]
    }

    private func validateValues(_ backing: ObjectBacking) throws(LoomError) {
        let entity = backing.entity
        for (i, attribute) in entity.attributes.enumerated() {
            let value = backing.values[i] ?? .null
            if value.isNull && !attribute.isOptional {
                throw LoomError(
                    .missingRequiredValue,
                    "\(entity.name).\(attribute.name) is required but has no value in \(backing.objectIDDescription); set it, give it a default, or make it optional.",
                    entity: entity.name, attributes: [attribute.name], objectID: objectID(of: backing))
            }
            if case .text(let text) = value, text.utf8.contains(0) {
                throw LoomError(
                    .typeMismatch,
                    "\(entity.name).\(attribute.name) in \(backing.objectIDDescription) contains a NUL character, which stores cannot keep exactly; remove it or store the value as Data.",
                    entity: entity.name, attributes: [attribute.name], objectID: objectID(of: backing))
            }
            if !attribute.type.accepts(value) {
                throw LoomError(
                    .typeMismatch,
                    "\(entity.name).\(attribute.name) in \(backing.objectIDDescription) holds a \(value.kindName), which is not a valid \(attribute.type.rawValue).",
                    entity: entity.name, attributes: [attribute.name], objectID: objectID(of: backing))
            }
        }
    }

    /// Finds two objects being saved that share values for a uniqueness constraint, before any
    /// SQL is sent. NULLs never conflict, as in SQL.
    private func validateUniqueness(among objects: [any BackedObject]) throws(LoomError) {
        var byEntity: [ObjectIdentifier: [ObjectBacking]] = [:]
        for object in objects { byEntity[ObjectIdentifier(object._loomBacking.entity), default: []].append(object._loomBacking) }
        for backings in byEntity.values where backings.count > 1 {
            let entity = backings[0].entity
            for constraint in entity.uniquenessConstraints {
                let indexes = constraint.compactMap { entity.attributeIndex(named: $0) }
                var seen: [[StoredValue]: ObjectBacking] = [:]
                for backing in backings {
                    let values = indexes.map { backing.values[$0] ?? .null }
                    if values.contains(where: \.isNull) { continue }
                    if let other = seen[values] {
                        throw LoomError(
                            .uniquenessViolation,
                            "\(entity.name) \(other.objectIDDescription) and \(backing.objectIDDescription) have the same \(constraint.joined(separator: ", ")), which must be unique; change one of them or delete it.",
                            entity: entity.name, attributes: constraint, objectID: objectID(of: backing))
                    }
                    seen[values] = backing
                }
            }
        }
    }

    func objectID(of backing: ObjectBacking) -> AnyObjectID {
        AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: backing.entity.name, primaryKey: backing.key)
    }
}
