extension StoreReading {
    /// Computes an aggregate query in memory over the rows ``fetch(_:)`` returns, following
    /// to-one relationships with ``rows(of:keys:)``: the default for stores without a query
    /// language of their own. ``InMemoryStore`` uses it; `SQLiteStore` runs SQL instead.
    ///
    /// - Complexity: one fetch, plus one ``rows(of:keys:)`` per relationship the columns follow.
    @_spi(LoomStore) public func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        let rows = try fetch(StoreQuery(entity: query.entity, predicate: query.predicate))
        let graph = StoreGraph(store: self)
        let graphRows = rows.map { StoreGraph.Row(entity: query.entity, row: $0) }
        for node in query.valueNodes { try graph.warm(node, from: graphRows) }
        return try AggregateEvaluator.evaluate(query, rows: graphRows, in: graph)
    }
}

/// A store's rows as a predicate graph that follows to-one relationships by key, loading each
/// level of a path for all rows in one ``PersistentStore/rows(of:keys:)`` call.
///
/// Not `Sendable`: built for one query.
final class StoreGraph: PredicateGraph {
    struct Row {
        let entity: EntityDescription
        let row: StoreRow
    }

    let store: any StoreReading
    private var loaded: [ObjectIdentifier: [Int64: StoreRow]] = [:]

    init(store: any StoreReading) { self.store = store }

    func key(of row: Row) -> Int64 { row.row.key }
    func value(_ index: Int, of row: Row) -> StoredValue { row.row.values[index] }

    func destination(of row: Row, _ relationship: RelationshipReference) -> Row? {
        guard let r = resolve(relationship, of: row.entity), case .foreignKey(let slot) = r.storage,
              case .integer(let key) = row.row.values[slot] else { return nil }
        for narrowed in r.concreteDestinations(in: store.schema) {
            if let found = loaded[ObjectIdentifier(narrowed.destination)]?[key] { return Row(entity: narrowed.destination, row: found) }
        }
        return nil
    }

    /// The relationship a reference names, as `entity` has it (a sub-entity inherits its
    /// parent's in the same positions, with foreign keys at slots of its own).
    private func resolve(_ reference: RelationshipReference, of entity: EntityDescription) -> ResolvedRelationship? {
        guard let r = store.schema.relationship(reference) else { return nil }
        return r.source === entity || !entity.isKind(of: r.source) ? r : store.schema.relationship(r.index, of: entity)
    }

    /// Aggregate value nodes follow to-one relationships only.
    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row] {
        destination(of: row, relationship).map { [$0] } ?? []
    }

    /// Loads, level by level, the objects `node`'s to-one chains reach from `rows`. Only
    /// objects loaded here are seen by ``destination(of:_:)``.
    func warm(_ node: PredicateNode, from rows: [Row]) throws(LoomError) {
        for path in node.relationshipPaths {
            var level = rows
            for reference in path {
                guard let declared = store.schema.relationship(reference), case .foreignKey = declared.storage else { break }
                let destinations = declared.concreteDestinations(in: store.schema).map(\.destination)
                var keys: Set<Int64> = []
                for row in level {
                    guard let r = resolve(reference, of: row.entity), case .integer(let key) = row.row.values[r.storage.foreignKeySlot] else { continue }
                    if !destinations.contains(where: { loaded[ObjectIdentifier($0)]?[key] != nil }) { keys.insert(key) }
                }
                for destination in destinations where !keys.isEmpty {
                    let id = ObjectIdentifier(destination)
                    for found in try store.rows(of: destination, keys: keys.sorted()) {
                        loaded[id, default: [:]][found.key] = found
                        keys.remove(found.key)
                    }
                }
                level = level.compactMap { destination(of: $0, reference) }
            }
        }
    }
}
