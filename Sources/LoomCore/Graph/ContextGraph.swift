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

    /// Loads the destination rows of a to-one for many keys at once (one query).
    func warmDestinations(_ r: ResolvedRelationship, of sources: [Row]) {
        guard case .foreignKey(let slot) = r.storage else { return }
        var keys: [Int64] = []
        var seen: Set<Int64> = []
        for source in sources {
            guard case .integer(let key) = source.values[slot], seen.insert(key).inserted else { continue }
            let k = RowCacheKey(entity: ObjectIdentifier(r.destination), key: key)
            if rows[k] == nil, context.identityMap.object(for: k) == nil { keys.append(key) }
        }
        guard !keys.isEmpty else { return }
        do {
            let found = try context.rowSource.baseRows(of: r.destination, keys: keys)
            for row in found { rows[RowCacheKey(entity: ObjectIdentifier(r.destination), key: row.key)] = Row(entity: r.destination, key: row.key, values: row.values, version: row.version) }
            let present = Set(found.map(\.key))
            for key in keys where !present.contains(key) { rows[RowCacheKey(entity: ObjectIdentifier(r.destination), key: key)] = .some(nil) }
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
                let k = RowCacheKey(entity: ObjectIdentifier(r.destination), key: pair.row.key)
                if let backing = context.identityMap.backing(for: k), backing.isDeleted { continue }
                byOwner[pair.owner, default: []].append(Row(entity: r.destination, key: pair.row.key, values: pair.row.values, version: pair.row.version))
            }
            for owner in missing { related[r.reference, default: [:]][owner] = byOwner[owner] ?? [] }
        } catch {
            failure = failure ?? error
        }
    }

    func destination(of row: Row, _ relationship: RelationshipReference) -> Row? {
        guard let r = context.coordinator.schema.relationship(relationship), case .foreignKey(let slot) = r.storage,
              case .integer(let key) = row.values[slot] else { return nil }
        return self.row(r.destination, key)
    }

    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row] {
        guard let r = context.coordinator.schema.relationship(relationship) else { return [] }
        if case .foreignKey = r.storage { return destination(of: row, relationship).map { [$0] } ?? [] }
        if related[relationship]?[row.key] == nil { warmMembers(r, of: [row.key]) }
        return related[relationship]?[row.key] ?? []
    }
}

extension StoreQuery {
    /// Every chain of relationships the predicate and the sort keys follow.
    var relationshipPaths: [[RelationshipReference]] {
        (predicate?.relationshipPaths ?? []) + sortKeys.filter { !$0.relationshipPath.isEmpty }.map(\.relationshipPath)
    }
}
