/// A fetch of an entity with sub-entities (or an abstract one): each entity of the hierarchy
/// whose objects the request returns is stored in a table of its own, holding the inherited
/// columns too, so the fetch asks each of them and merges the answers in the request's order.
///
/// The inherited attributes come first in a sub-entity, in the same positions, so a sort key
/// translated for one entity of the hierarchy reads the same attribute in every other.
/// Sorting through relationships never arises: a schema refuses relationships in a hierarchy
/// for now (see ``Schema/concreteEntities(of:includingSubentities:)``).
///
/// Made by the context for one call, on its isolation; not `Sendable`.
struct HierarchyFetch {
    let context: ManagedObjectContext
    /// The entities whose objects the request returns, parents before sub-entities.
    let entities: [EntityDescription]

    /// The objects of every entity, merged in the request's order (ties by primary key, then
    /// by the entity's place in ``entities``), then windowed.
    func objects<Model: PersistentModel>(_ request: FetchRequest<Model>) throws(LoomError) -> [any BackedObject] {
        let schema = context.coordinator.schema
        if let first = entities.first { try StoreQuery.checkWindow(offset: request.fetchOffset, limit: request.fetchLimit, entity: first) }
        // Each entity's first `offset + limit` objects hold the window of the merge.
        var widened = request
        widened.fetchOffset = 0
        widened.fetchLimit = request.fetchLimit.flatMap { limit in
            let (window, overflow) = request.fetchOffset.addingReportingOverflow(limit)
            return overflow ? nil : window
        }
        var sortKeys: [SortKey] = []
        var merged: [(object: any BackedObject, key: Int64, place: Int)] = []
        for (place, entity) in entities.enumerated() {
            let query = try widened.storeQuery(for: entity, in: schema)
            sortKeys = query.sortKeys
            // Sorting reads the values: the objects come loaded then.
            let asFaults = request.returnsObjectsAsFaults && (query.sortKeys.isEmpty || entities.count == 1)
            let objects = try context.fetchObjects(query, includesPendingChanges: request.includesPendingChanges, asFaults: asFaults)
            for object in objects { merged.append((object, object._loomBacking.key, place)) }
        }
        if entities.count > 1 {
            let decorated = merged.map { item in (item, sortKeys.map { item.object._loomBacking.storedValue(at: $0.attributeIndex) }) }
            merged = decorated.sorted { a, b in
                let c = SortKey.compare(sortKeys, a.1, b.1)
                return c != 0 ? c < 0 : (a.0.key, a.0.place) < (b.0.key, b.0.place)
            }.map(\.0)
        }
        let start = min(request.fetchOffset, merged.count)
        let end = request.fetchLimit.map { min(start + $0, merged.count) } ?? merged.count
        return merged[start..<end].map(\.object)
    }

    /// The keys of the objects ``objects(_:)`` returns, in the same order, with each key's
    /// entity as its index in ``entities``, reading only the sort values (for a batched fetch).
    func orderedKeys<Model: PersistentModel>(_ request: FetchRequest<Model>) throws(LoomError) -> (keys: [Int64], places: [Int]) {
        let schema = context.coordinator.schema
        if let first = entities.first { try StoreQuery.checkWindow(offset: request.fetchOffset, limit: request.fetchLimit, entity: first) }
        var unwindowed = request
        unwindowed.fetchOffset = 0
        unwindowed.fetchLimit = nil
        var sortKeys: [SortKey] = []
        var merged: [(values: [StoredValue], key: Int64, place: Int)] = []
        for (place, entity) in entities.enumerated() {
            let query = try unwindowed.storeQuery(for: entity, in: schema)
            sortKeys = query.sortKeys
            let columns = query.sortKeys.map { key in
                AggregateQuery.Column.value(key.relationshipPath.reversed().reduce(PredicateNode.attribute(key.attributeIndex)) { .toOne($1, $0) })
            }
            let values = AggregateQuery(entity: entity, predicate: query.predicate, columns: columns + [.value(.primaryKey)])
            for row in try AggregateFetch(context: context).rows(values, includesPendingChanges: request.includesPendingChanges) {
                guard case .integer(let key) = row[row.count - 1] else { continue }
                merged.append((Array(row.dropLast()), key, place))
            }
        }
        merged.sort { a, b in
            let c = SortKey.compare(sortKeys, a.values, b.values)
            return c != 0 ? c < 0 : (a.key, a.place) < (b.key, b.place)
        }
        let start = min(request.fetchOffset, merged.count)
        let end = request.fetchLimit.map { min(start + $0, merged.count) } ?? merged.count
        return (merged[start..<end].map(\.key), merged[start..<end].map(\.place))
    }

    /// How many objects of every entity match the request, windowed as the fetch would be.
    func count<Model: PersistentModel>(_ request: FetchRequest<Model>) throws(LoomError) -> Int {
        if let first = entities.first { try StoreQuery.checkWindow(offset: request.fetchOffset, limit: request.fetchLimit, entity: first) }
        var unwindowed = request
        unwindowed.fetchOffset = 0
        unwindowed.fetchLimit = nil
        var total = 0
        for entity in entities {
            total += try context.count(for: unwindowed, of: entity)
        }
        let afterOffset = max(0, total - request.fetchOffset)
        return request.fetchLimit.map { min($0, afterOffset) } ?? afterOffset
    }
}
