/// A context's objects as a predicate graph: every object with its unsaved changes, deleted
/// objects absent, relationships as they are now. Built for one fetch.
///
/// Not `Sendable`: used on its context's isolation only. Store failures met while following
/// relationships are kept in ``failure`` (graph methods cannot throw) and rethrown by the fetch.
final class ContextGraph: PredicateGraph {
    struct Row {
        let entity: EntityDescription
        let key: Int64
        let values: [StoredValue]
        /// The version the values are of: the object's (loaded here), or the row's as read.
        let version: Int64
    }

    unowned let context: ManagedObjectContext
    private var rows: [RowCacheKey: Row?] = [:]
    private var related: [RelationshipReference: [Int64: [Row]]] = [:]
    private(set) var failure: LoomError?

    init(_ context: ManagedObjectContext) { self.context = context }

    func key(of row: Row) -> Int64 { row.key }

    func value(_ index: Int, of row: Row) -> StoredValue { row.values[index] }

    /// The object with this key as the context sees it now; `nil` when it is deleted or gone.
    func row(_ entity: EntityDescription, _ key: Int64) -> Row? {
        let k = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
        if let known = rows[k] { return known }
        var found: Row?
        if let backing = context.identityMap.backing(for: k), backing.state == .loaded {
            found = backing.isDeleted ? nil : Row(entity: entity, key: key, values: backing.values, version: backing.version)
        } else {
            do {
                found = try context.rowSource.baseRow(of: entity, key: key, fresh: false).map { Row(entity: entity, key: key, values: $0.values, version: $0.version) }
            } catch {
                failure = failure ?? error
            }
        }
        rows[k] = found
        return found
    }

    /// Records a row the caller already has (a store row not changed here).
    func remember(_ entity: EntityDescription, _ row: StoreRow) -> Row {
        let k = RowCacheKey(entity: ObjectIdentifier(entity), key: row.key)
        if let known = rows[k], let known { return known }
        let made = Row(entity: entity, key: row.key, values: row.values, version: row.version)
        rows[k] = made
        return made
    }

    /// Loads the destination rows of a to-one for many keys at once (one query per table).
    func warmDestinations(_ r: ResolvedRelationship, of sources: [Row]) {
        guard case .foreignKey = r.storage else { return }
        var keys: [Int64] = []
        var seen: Set<Int64> = []
        let candidates = r.leadsToSubentities ? context.coordinator.schema.concreteEntities(of: r.destination) : [r.destination]
        for source in sources {
            // A sub-entity's row: its own slot for the relationship it inherits.
            let slot = source.entity === r.source ? r.storage.foreignKeySlot : source.entity.relationshipSlots[r.index]
            guard case .integer(let key) = source.values[slot], seen.insert(key).inserted else { continue }
            let known = candidates.contains { entity in
                let k = RowCacheKey(entity: ObjectIdentifier(entity), key: key)
                return rows[k] != nil || context.identityMap.object(for: k) != nil
            }
            if !known { keys.append(key) }
        }
        guard !keys.isEmpty else { return }
        do {
            for entity in candidates where !keys.isEmpty {
                let found = try context.rowSource.baseRows(of: entity, keys: keys)
                for row in found { rows[RowCacheKey(entity: ObjectIdentifier(entity), key: row.key)] = Row(entity: entity, key: row.key, values: row.values, version: row.version) }
                if r.leadsToSubentities { context.coordinator.keyEntities.note(entity, keys: found.map(\.key)) }
                let present = Set(found.map(\.key))
                keys.removeAll { present.contains($0) }
            }
            let gone = context.fallbackEntity(of: r.destination)
            for key in keys { rows[RowCacheKey(entity: ObjectIdentifier(gone), key: key)] = .some(nil) }
        } catch {
            failure = failure ?? error
        }
    }

    /// Loads the members of a to-many for many owners at once (one query).
    func warmMembers(_ r: ResolvedRelationship, of owners: [Int64]) {
        let missing = owners.filter { related[r.reference]?[$0] == nil }
        guard !missing.isEmpty else { return }
        do {
            var byOwner: [Int64: [Row]] = [:]
            for pair in try context.currentRelated(r, keys: missing) {
                let entity = context.destinationEntity(of: r, key: pair.row.key)
                let k = RowCacheKey(entity: ObjectIdentifier(entity), key: pair.row.key)
                if let backing = context.identityMap.backing(for: k), backing.isDeleted { continue }
                byOwner[pair.owner, default: []].append(Row(entity: entity, key: pair.row.key, values: pair.row.values, version: pair.row.version))
            }
            for owner in missing { related[r.reference, default: [:]][owner] = byOwner[owner] ?? [] }
        } catch {
            failure = failure ?? error
        }
    }

    func destination(of row: Row, _ relationship: RelationshipReference) -> Row? {
        guard let r = resolve(relationship, of: row), case .foreignKey(let slot) = r.storage,
              case .integer(let key) = row.values[slot] else { return nil }
        return self.row(context.destinationEntity(of: r, key: key), key)
    }

    /// The relationship a reference names, as `row`'s entity has it: a sub-entity's row
    /// reached through a relationship to its parent has the relationships it inherits in the
    /// same positions, their foreign keys at slots of its own.
    private func resolve(_ relationship: RelationshipReference, of row: Row) -> ResolvedRelationship? {
        guard let r = context.coordinator.schema.relationship(relationship) else { return nil }
        return row.entity === r.source ? r : context.coordinator.schema.relationship(r.index, of: row.entity)
    }

    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row] {
        guard let r = resolve(relationship, of: row) else { return [] }
        if case .foreignKey = r.storage { return destination(of: row, relationship).map { [$0] } ?? [] }
        if related[r.reference]?[row.key] == nil { warmMembers(r, of: [row.key]) }
        return related[r.reference]?[row.key] ?? []
    }
}

extension StoreQuery {
    /// Every chain of relationships the predicate and the sort keys follow.
    var relationshipPaths: [[RelationshipReference]] {
        (predicate?.relationshipPaths ?? []) + sortKeys.filter { !$0.relationshipPath.isEmpty }.map(\.relationshipPath)
    }
}
