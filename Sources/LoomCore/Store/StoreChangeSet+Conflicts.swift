extension StoreChangeSet {
    /// Every conflict between this change set and `store` as it is: rows updated or deleted
    /// whose version is not the one expected (or that are gone), and inserted or updated rows
    /// whose values for a uniqueness constraint another row already has (NULLs never conflict;
    /// rows this change set deletes do not count).
    ///
    /// A store calls it when it refuses a change set, inside the write that failed (after
    /// undoing the change set), so that the answer describes exactly what made it fail; see
    /// ``LoomError/storeConflicts``.
    ///
    /// - Complexity: one ``StoreReading/rows(of:keys:)`` per entity updated or deleted, plus one
    ///   ``StoreReading/fetch(_:)`` per uniqueness constraint of each inserted or updated row.
    package func conflicts(in store: any StoreReading) throws(LoomError) -> [StoreConflict] {
        var found: [StoreConflict] = []
        // Versions, and the stored rows of updated objects (for their values after the update).
        var expected: [ObjectIdentifier: (entity: EntityDescription, versions: [Int64: Int64])] = [:]
        for update in updates { expected[ObjectIdentifier(update.entity), default: (update.entity, [:])].versions[update.key] = update.expectedVersion }
        for delete in deletes { expected[ObjectIdentifier(delete.entity), default: (delete.entity, [:])].versions[delete.key] = delete.expectedVersion }
        var stored: [ObjectIdentifier: [Int64: StoreRow]] = [:]
        for (id, (entity, versions)) in expected.sorted(by: { $0.value.entity.name < $1.value.entity.name }) {
            let keys = versions.keys.sorted()
            let rows = try store.rows(of: entity, keys: keys)
            for row in rows { stored[id, default: [:]][row.key] = row }
            for key in keys {
                let row = stored[id]?[key]
                if row?.version != versions[key] { found.append(StoreConflict(kind: .version, entity: entity, key: key, persisted: row)) }
            }
        }
        // Uniqueness.
        var deleted: [ObjectIdentifier: Set<Int64>] = [:]
        for delete in deletes { deleted[ObjectIdentifier(delete.entity), default: []].insert(delete.key) }
        var candidates: [(entity: EntityDescription, key: Int64, values: [StoredValue])] = inserts.map { ($0.entity, $0.key, $0.values) }
        for update in updates where !update.entity.uniquenessConstraints.isEmpty {
            guard var values = stored[ObjectIdentifier(update.entity)]?[update.key]?.values else { continue }
            for change in update.changes { values[change.index] = change.value }
            candidates.append((update.entity, update.key, values))
        }
        for candidate in candidates {
            let entity = candidate.entity
            for constraint in entity.uniquenessConstraints {
                let indexes = constraint.compactMap { entity.storedValueIndex(named: $0) }
                let values = indexes.map { candidate.values[$0] }
                if values.contains(where: \.isNull) { continue }
                // A constraint declared on a parent holds across its sub-entities' tables.
                let members = store.schema.hierarchyConstraint(of: entity, constraint)?.members ?? [entity]
                for member in members {
                    var predicate = PredicateNode.compare(.notEqual, .primaryKey, .constant(.integer(member === entity ? candidate.key : 0)))
                    for (name, v) in zip(constraint, values) {
                        guard let i = member.storedValueIndex(named: name) else { continue }
                        predicate = .and(predicate, .compare(.equal, .attribute(i), .constant(v)))
                    }
                    let gone = deleted[ObjectIdentifier(member)] ?? []
                    let rows = try store.fetch(StoreQuery(entity: member, predicate: predicate, fetchLimit: gone.count + 1))
                    guard let existing = rows.first(where: { !gone.contains($0.key) }) else { continue }
                    found.append(StoreConflict(kind: .uniqueness(constraint: constraint), entity: entity, key: candidate.key, persisted: existing, persistedEntity: member))
                    break
                }
            }
        }
        return found
    }
}
