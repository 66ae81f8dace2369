extension SaveOperation {
    /// A save's first stage: refuses changes the store must never see, before any I/O but the
    /// loading of deny rules' relationships. Every required attribute and to-one relationship
    /// has a value of its type, no deleted object still holds objects in a relationship whose
    /// rule is ``DeleteRule/deny``, and no two objects being saved break a uniqueness
    /// constraint (the store checks saved rows). `inserted` is ``insertedInOrder()``.
    func validate(_ inserted: [InsertedObject]) throws(LoomError) {
        for (_, b) in inserted { try validateValues(b) }
        for (key, object) in context.pending.updated where context.pending.deleted[key] == nil { try validateValues(object._loomBacking) }
        let doomed = (Array(context.pending.deleted.values) + Array(context.pending.insertedDeleted.values)).sorted { $0._loomBacking.key < $1._loomBacking.key }
        context.graph.loadToManyRelationships(of: doomed.map(\._loomBacking)) { $0 == .deny }
        try context.reportStoreFailures()   // a deny rule's relationships that could not be loaded
        for object in doomed { try validateDeletion(object._loomBacking) }
        try validateUniqueness()
    }

    private func validateValues(_ backing: ObjectBacking) throws(LoomError) {
        let entity = backing.entity
        if attributesAreValid(backing) {
            try validateRequiredRelationships(backing)
            return
        }
        for (i, attribute) in entity.attributes.enumerated() {
            let value = backing.values[i]
            if value.isNull && !attribute.isOptional {
                throw LoomError(
                    .missingRequiredValue,
                    "\(entity.name).\(attribute.name) is required but has no value in \(backing.objectIDDescription); set it, give it a default, or make it optional.",
                    entity: entity.name, attributes: [attribute.name], objectID: context.objectID(of: backing))
            }
            if !attribute.type.accepts(value) {
                throw LoomError(
                    .typeMismatch,
                    "\(entity.name).\(attribute.name) in \(backing.objectIDDescription) holds \(English.a(value.kindName)), which is not a valid \(attribute.type.rawValue).",
                    entity: entity.name, attributes: [attribute.name], objectID: context.objectID(of: backing))
            }
        }
        try validateRequiredRelationships(backing)
    }

    /// Whether every attribute of `backing` holds a value its type accepts, NULL only where
    /// optional: one AND per attribute against the entity's kind masks (the fetch check's), and
    /// the full rule only for the types that need it (a UUID's 16 bytes). The loop above finds
    /// which attribute fails and says so.
    private func attributesAreValid(_ backing: ObjectBacking) -> Bool {
        let entity = backing.entity
        let values = backing.values
        let accepted = entity.acceptedKinds
        guard values.count == entity.storedValueCount else { return false }
        for slot in 0..<entity.attributes.count where accepted[slot] & values[slot].kindBit == 0 { return false }
        for slot in entity.slotsCheckedInFull where !entity.attributes[slot].type.accepts(values[slot]) { return false }
        return true
    }

    private func validateRequiredRelationships(_ backing: ObjectBacking) throws(LoomError) {
        let entity = backing.entity
        for (j, relationship) in entity.relationships.enumerated() where relationship.kind == .toOne && !relationship.isOptional {
            guard let slot = entity.storedValueIndex(ofRelationship: j) else { continue }
            if (backing.values[slot]).isNull {
                throw LoomError(
                    .missingRequiredValue,
                    "\(entity.name).\(relationship.name) is a required relationship but is empty in \(backing.objectIDDescription); set it, or make it optional.",
                    entity: entity.name, attributes: [relationship.name], objectID: context.objectID(of: backing))
            }
        }
    }

    /// Refuses the deletion of an object whose deny relationship still holds objects.
    private func validateDeletion(_ backing: ObjectBacking) throws(LoomError) {
        guard let (relationship, count) = context.graph.deniedRelationship(of: backing) else { return }
        throw LoomError(
            .deleteDenied,
            "\(backing.objectIDDescription) cannot be deleted: its relationship '\(relationship)' (delete rule deny) still holds \(count) object\(count == 1 ? "" : "s"); empty it or delete them first, or roll back.",
            entity: backing.entity.name, attributes: [relationship], objectID: context.objectID(of: backing))
    }

    /// Finds two objects being saved that share values for a uniqueness constraint, before any
    /// SQL is sent. NULLs never conflict, as in SQL.
    /// Checks the uniqueness constraints among the inserted and updated objects (the store checks
    /// them against saved rows). Only objects of entities with constraints are gathered: most
    /// saves have none to check, and a save of one object cannot break one by itself. A
    /// constraint declared on an entity with sub-entities holds across them: objects of any of
    /// them are compared together.
    private func validateUniqueness() throws(LoomError) {
        guard coordinator.schema.entities.contains(where: { !$0.uniquenessConstraints.isEmpty }) else { return }
        var byEntity: [ObjectIdentifier: [ObjectBacking]] = [:]
        func gather(_ backing: ObjectBacking) {
            guard !backing.entity.uniquenessConstraints.isEmpty else { return }
            byEntity[ObjectIdentifier(backing.entity), default: []].append(backing)
        }
        for object in context.pending.inserted.values { gather(object._loomBacking) }
        for (key, object) in context.pending.updated where context.pending.deleted[key] == nil { gather(object._loomBacking) }
        // Each constraint with the objects it covers: per declaring entity, so that the objects
        // of a parent's sub-entities meet.
        struct Covered { let owner: EntityDescription; let constraint: [String]; var backings: [ObjectBacking] }
        var covered: [String: Covered] = [:]
        for backings in byEntity.values {
            let entity = backings[0].entity
            for constraint in entity.uniquenessConstraints {
                let owner = entity.declaringEntity(ofConstraint: constraint)
                covered["\(owner.name)\u{0}\(constraint.joined(separator: "\u{0}"))", default: Covered(owner: owner, constraint: constraint, backings: [])].backings += backings
            }
        }
        for group in covered.values where group.backings.count > 1 {
            let constraint = group.constraint
            var seen: [[StoredValue]: ObjectBacking] = [:]
            // The constraint's slots, per entity (the same attribute may sit in another slot of a sub-entity).
            var slots: (entity: EntityDescription, indexes: [Int?])?
            for backing in group.backings {
                if slots?.entity !== backing.entity { slots = (backing.entity, constraint.map { backing.entity.storedValueIndex(named: $0) }) }
                let values = slots!.indexes.map { index in index.map { backing.values[$0] } ?? .null }
                if values.contains(where: \.isNull) { continue }
                if let other = seen[values] {
                    let across = other.entity === backing.entity ? "" : " (\(group.owner.name)'s constraint holds across its sub-entities)"
                    throw LoomError(
                        .uniquenessViolation,
                        "\(group.owner.name) \(other.objectIDDescription) and \(backing.objectIDDescription) have the same \(constraint.joined(separator: ", ")), which must be unique\(across); change one of them or delete it.",
                        entity: backing.entity.name, attributes: constraint, objectID: context.objectID(of: backing))
                }
                seen[values] = backing
            }
        }
    }
}
