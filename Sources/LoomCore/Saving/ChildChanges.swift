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

extension ChildChanges {
    /// Makes a saved child's changes unsaved changes of `context`, its parent, on the parent's
    /// isolation. Everything is checked first, so that a failure changes nothing.
    func apply(to context: ManagedObjectContext) throws(LoomError) {
        var targets: [(any BackedObject, [(Int, StoredValue)])] = []
        for update in updates {
            let id = context.objectID(update.entity, update.key)
            let object = try context.existingObject(with: id)
            if object._loomBacking.isDeleted {
                throw LoomError(.objectNotFound, "\(id) was deleted in the parent context, so the child's changes to it cannot be saved there.", entity: update.entity.name, objectID: id)
            }
            targets.append((object, update.changes))
        }
        var doomed: [any BackedObject] = []
        for delete in deletes {
            let id = context.objectID(delete.entity, delete.key)
            if let object = context.registeredObject(for: id) { doomed.append(object) } else { doomed.append(try context.existingObject(with: id)) }
        }
        var inserted: [any BackedObject] = []
        for insert in inserts {
            let backing = ObjectBacking(entity: insert.entity, key: insert.key, context: context)
            backing.values = insert.values.map { $0 }
            backing.state = .loaded
            backing.isInserted = true
            let object = context.register(backing)
            inserted.append(object)
            let key = RowCacheKey(entity: ObjectIdentifier(insert.entity), key: insert.key)
            context.pending.noteInsertion(of: object, at: key)
            context.noteEventChange(backing, inserted: true)
        }
        let schema = context.coordinator.schema
        // The inserted objects' to-one relationships join their destinations' inverses.
        for object in inserted {
            let backing = object._loomBacking
            for r in schema.relationships(of: backing.entity) {
                guard case .foreignKey(let slot) = r.storage, case .integer(let other) = backing.values[slot] else { continue }
                backing.values[slot] = .null
                context.relate(r, backing, other)
            }
        }
        for (object, updates) in targets {
            let backing = object._loomBacking
            let before = backing.values
            defer { context.notifyObservers(of: backing, valuesFrom: before, to: backing.values) }
            for (index, value) in updates {
                guard index >= backing.entity.attributes.count else {
                    backing.setStoredValue(value, at: index)
                    continue
                }
                let j = backing.entity.slotRelationships[index - backing.entity.attributes.count]
                let r = schema.relationship(j, of: backing.entity)
                if case .foreignKey = r.storage {
                    if case .integer(let other) = value { context.relate(r, backing, other) } else { for old in context.graph.relatedKeys(of: backing, r) { context.graph.unrelate(r, backing, old) } }
                } else {
                    backing.setStoredValue(value, at: index)
                    backing.toMany[j] = nil
                }
            }
        }
        for link in links {
            guard let source = schema.entity(named: link.table.sourceEntityName),
                  let r = schema.relationships(of: source).first(where: {
                      if case .joinTable(let t, let own, _) = $0.storage { return t == link.table && own == JoinTable.sourceColumn }
                      return false
                  }) else { continue }
            context.withObject(source, link.source) { backing in
                if link.added { context.relate(r, backing, link.target) } else { context.graph.unrelate(r, backing, link.target) }
            }
        }
        for object in doomed where !object._loomBacking.isDeleted { context.delete(object) }
        withExtendedLifetime(inserted) {}
    }
}
