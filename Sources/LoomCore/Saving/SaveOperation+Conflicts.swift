extension SaveOperation {
    /// The conflicts behind a store's refusal of a save, as merge conflicts of this context's
    /// objects: rows changed or deleted since they were read, or uniqueness constraints broken
    /// by saved rows. Built from what the store read inside the failed write
    /// (``LoomError/storeConflicts``): no I/O, nothing re-read after the fact.
    func mergeConflicts(for error: LoomError) throws(LoomError) -> [(conflict: MergeConflict, persisted: StoreRow?)] {
        var conflicts: [(MergeConflict, StoreRow?)] = []
        for found in error.storeConflicts {
            let key = RowCacheKey(entity: ObjectIdentifier(found.entity), key: found.key)
            guard let object = context.pending.inserted[key] ?? context.pending.updated[key] ?? context.pending.deleted[key] else { continue }
            let b = object._loomBacking
            switch found.kind {
            case .version:
                conflicts.append((try conflict(.optimisticLocking, b, persisted: found.persisted), found.persisted))
            case .uniqueness(let constraint):
                if b.isDeleted { continue }
                guard let existing = found.persisted else { continue }
                // A saved row this context is deleting in the same save is no conflict.
                if context.pending.deleted[RowCacheKey(entity: ObjectIdentifier(found.persistedEntity), key: existing.key)] != nil { continue }
                let existingID = context.objectID(found.persistedEntity, existing.key)
                conflicts.append((try conflict(.uniqueness(constraint: constraint, existing: existingID), b, persisted: existing, persistedEntity: found.persistedEntity), existing))
            }
        }
        return conflicts
    }

    /// `persistedEntity`: the entity of `persisted`, when it is another of the hierarchy (a
    /// constraint declared on a parent).
    private func conflict(_ kind: MergeConflict.Kind, _ b: ObjectBacking, persisted: StoreRow?, persistedEntity: EntityDescription? = nil) throws(LoomError) -> MergeConflict {
        func snapshot(_ values: [StoredValue], of entity: EntityDescription? = nil) -> [String: StoredValue] {
            let entity = entity ?? b.entity
            return Dictionary(uniqueKeysWithValues: zip((0..<entity.storedValueCount).map(entity.storedValueName(at:)), values))
        }
        // The coordinator's snapshot of the row: from its cache, else (as it would be filled) the
        // store's current row, which a version conflict already carries.
        let cached: StoreRow?
        if case .optimisticLocking = kind {
            cached = coordinator.cachedRow(of: b.entity, key: b.key) ?? persisted
        } else {
            cached = try coordinator.row(of: b.entity, key: b.key)
        }
        return MergeConflict(
            kind: kind, objectID: context.objectID(of: b),
            originalSnapshot: b.committed.map { snapshot($0) },
            objectSnapshot: snapshot(b.values),
            cachedSnapshot: cached.map { snapshot($0.values) },
            persistedSnapshot: persisted.map { snapshot($0.values, of: persistedEntity) })
    }

    /// Resolves conflicts by the merge policy, changing this context's objects so that a retry
    /// of the save succeeds; with the error policy (or a resolver that says `.fail`), throws
    /// `error` with the conflicts attached. Runs with no lock held: a custom resolver may take
    /// its time, and the retry finds out if the store changed again meanwhile.
    func resolve(_ found: [(conflict: MergeConflict, persisted: StoreRow?)], failing error: LoomError) throws(LoomError) {
        var failure = error
        let conflicts = found.map(\.conflict)
        failure.conflicts = conflicts
        if conflicts.count > 1 || !conflicts.isEmpty {
            failure.message += " Conflicts: " + conflicts.prefix(5).map(\.description).joined(separator: "; ") + (conflicts.count > 5 ? "; …" : "") + ". Set the context's mergePolicy to resolve them."
        }
        for (conflict, persisted) in found {
            let resolution: MergeConflict.Resolution
            switch context.mergePolicy {
            case .error: throw failure
            case .mergeByPropertyStoreTrump: resolution = .storeTrump
            case .mergeByPropertyObjectTrump: resolution = .objectTrump
            case .overwrite: resolution = .overwrite
            case .rollback: resolution = .rollback
            case .custom(let resolver): resolution = resolver(conflict)
            }
            if case .fail = resolution { throw failure }
            guard let object = context.registeredObject(for: conflict.objectID) else { continue }
            let b = object._loomBacking
            switch conflict.kind {
            case .optimisticLocking:
                resolveLocking(b, persisted: persisted, resolution)
            case .uniqueness(_, let existing):
                try resolveUniqueness(b, existing: existing, resolution)
            }
        }
    }

    private func resolveLocking(_ b: ObjectBacking, persisted: StoreRow?, _ resolution: MergeConflict.Resolution) {
        let key = RowCacheKey(entity: ObjectIdentifier(b.entity), key: b.key)
        guard let persisted else {
            // Deleted in the store: nothing left to update or delete.
            detachAsDeleted(b, key: key)
            return
        }
        let committed = b.committed ?? persisted.values
        let local = b.changedSlots()
        let storeChanged = Set(persisted.values.indices.filter { !(committed[$0].isSame(as: persisted.values[$0])) })
        switch resolution {
        case .storeTrump:
            var values = persisted.values
            for (i, v) in local where !storeChanged.contains(i) { values[i] = v }
            b.values = values
        case .objectTrump:
            var values = persisted.values
            for (i, v) in local { values[i] = v }
            b.values = values
        case .overwrite:
            break
        case .rollback, .fail:
            b.values = persisted.values
        }
        b.committed = persisted.values
        b.version = persisted.version
        if b.isDeleted, resolution == .storeTrump || resolution == .rollback {
            b.isDeleted = false
            context.pending.deleted[key] = nil
        }
        if b.changedSlots().isEmpty {
            b.isUpdated = false
            context.pending.updated[key] = nil
        }
    }

    private func resolveUniqueness(_ b: ObjectBacking, existing: AnyObjectID, _ resolution: MergeConflict.Resolution) throws(LoomError) {
        let key = RowCacheKey(entity: ObjectIdentifier(b.entity), key: b.key)
        try checkAcrossHierarchy(b, existing: existing, resolution)
        switch resolution {
        case .storeTrump, .rollback, .fail:
            if b.isInserted {
                // The saved object wins; the duplicate's to-many relationships join it (Core Data's
                // store-trump merges them too), so that nothing the duplicate held is lost.
                if resolution == .storeTrump {
                    let targetObject = try context.existingObject(with: existing)
                    mergeRelationships(from: b, into: targetObject._loomBacking, includingToOne: false)
                    withExtendedLifetime(targetObject) {}
                }
                drop(b, key: key)
            } else if let committed = b.committed {
                b.values = committed
                b.isUpdated = false
                context.pending.updated[key] = nil
            }
        case .objectTrump:
            // Hold the object: the registry does not keep it alive, and it must reach pending.updated below.
            let targetObject = try context.existingObject(with: existing)
            let target = targetObject._loomBacking
            let source = b.isInserted ? b.values.indices.map { ($0, b.values[$0]) } : b.changedSlots()
            let wasInserted = b.isInserted
            if wasInserted {
                // This object's attributes and relationships move onto the saved object, which
                // keeps its ID; to-many relationships are merged.
                mergeRelationships(from: b, into: target, includingToOne: true)
                drop(b, key: key)
            } else if let committed = b.committed {
                b.values = committed
                b.isUpdated = false
                context.pending.updated[key] = nil
            }
            // An inserted duplicate's relationships were merged above; only its attributes remain.
            for (i, v) in source where i < b.entity.attributes.count || !wasInserted {
                // By name: the saved object may be of a sub-entity (a constraint across a hierarchy).
                guard let slot = target.entity === b.entity ? i : target.entity.storedValueIndex(named: b.entity.storedValueName(at: i)) else { continue }
                target.setStoredValue(v, at: slot)
            }
            withExtendedLifetime(targetObject) {}
        case .overwrite:
            // This object wins and the saved one goes; its to-many relationships join this one.
            let duplicate = try context.existingObject(with: existing)
            mergeRelationships(from: duplicate._loomBacking, into: b, includingToOne: false)
            context.delete(duplicate)
            context.graph.propagateDeletes([duplicate])
        }
    }

    /// Refuses a resolution that would lose what an object holds when the saved object it
    /// conflicts with is of another entity of the hierarchy (a constraint declared on a parent):
    /// an object cannot change its entity, so store-trump can move the duplicate's
    /// relationships, and object-trump its values, only onto an object whose entity has them.
    /// Overwrite (the saved object goes, as any deleted object does) always can.
    private func checkAcrossHierarchy(_ b: ObjectBacking, existing: AnyObjectID, _ resolution: MergeConflict.Resolution) throws(LoomError) {
        guard existing.entityName != b.entity.name, b.isInserted || resolution == .objectTrump,
              let other = coordinator.schema.entity(named: existing.entityName) else { return }
        let lost: [String]
        switch resolution {
        case .storeTrump:
            lost = coordinator.schema.relationships(of: b.entity).filter { r in
                !other.isKind(of: r.source) && !context.graph.relatedKeys(of: b, r).isEmpty
            }.map(\.description.name)
        case .objectTrump:
            // What moves onto the saved object: all of an inserted object, an updated one's changes.
            let moving = b.isInserted ? b.entity.properties.map(\.name) : b.changedSlots().map { b.entity.storedValueName(at: $0.0) }
            lost = other.isKind(of: b.entity) ? [] : moving.filter { other.storedValueIndex(named: $0) == nil && other.relationshipIndex(named: $0) == nil }
        default:
            return
        }
        guard !lost.isEmpty else { return }
        throw LoomError(
            .uniquenessViolation,
            "\(b.objectIDDescription) has the same values as saved \(existing) for a uniqueness constraint that holds across their hierarchy, but the merge policy cannot resolve it: \(existing.entityName) has no \(lost.joined(separator: ", ")) to take \(b.objectIDDescription)'s onto, and an object cannot change its entity. Resolve it with the overwrite policy (the saved object is deleted), or change or delete one of them.",
            entity: b.entity.name, attributes: lost, objectID: context.objectID(of: b))
    }

    /// Moves the objects `source`'s to-many relationships hold (and, when asked, its to-ones)
    /// to `target`, keeping every inverse in step; a relationship `target`'s entity does not
    /// have (another entity of the hierarchy) stays with `source`.
    private func mergeRelationships(from source: ObjectBacking, into target: ObjectBacking, includingToOne: Bool) {
        for r in coordinator.schema.relationships(of: source.entity) where target.entity.isKind(of: r.source) {
            // A self-reference of the duplicate becomes one of the object it merges into.
            func mapped(_ other: Int64) -> Int64 { source.entity.isKind(of: r.destination) && other == source.key ? target.key : other }
            if r.description.kind == .toOne {
                guard includingToOne, case .foreignKey(let slot) = r.storage, case .integer(let other) = source.values[slot] else { continue }
                context.relate(r, target, mapped(other))
            } else {
                for other in context.graph.relatedKeys(of: source, r) { context.relate(r, target, mapped(other)) }
            }
        }
    }

    /// Takes an inserted object out of the save: it stays readable but belongs to no context.
    private func drop(_ b: ObjectBacking, key: RowCacheKey) {
        context.pending.inserted[key] = nil
        context.identityMap.remove(key)
        context.pending.relationships.remove(key)
        context.pending.links = context.pending.links.filter { link, _ in
            !((link.table.sourceEntityName == b.entity.name && link.source == b.key) || (link.table.targetEntityName == b.entity.name && link.target == b.key))
        }
        coordinator.keyAllocator.forgetUnsaved(b.entity, key: b.key)
        b.isInserted = false
        b.isDeleted = true
        b.context = nil
    }

    private func detachAsDeleted(_ b: ObjectBacking, key: RowCacheKey) {
        context.pending.updated[key] = nil
        context.pending.deleted[key] = nil
        context.identityMap.remove(key)
        b.isUpdated = false
        b.isDeleted = true
        b.context = nil
    }
}

extension MergeConflict.Resolution: Equatable {}
