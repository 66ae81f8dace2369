/// How a context answers an aggregate query (``PropertyFetchRequest``): the store computes it,
/// unless unsaved changes here can change the answer (or the context is a child), when it is
/// computed in memory over the objects a fetch would return, with the store's rules
/// (``AggregateEvaluator``).
///
/// It keeps no state of its own: the context makes one for each request and calls it on its
/// own isolation; it is not `Sendable`.
struct AggregateFetch {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// The rows of an aggregate query as this context sees them.
    func rows(_ query: AggregateQuery, includesPendingChanges: Bool) throws(LoomError) -> [[StoredValue]] {
        if let parent = context.parent {
            guard includesPendingChanges else {
                return try parent.run { (parent) throws(LoomError) -> [[StoredValue]] in
                    try AggregateFetch(context: parent).rows(query, includesPendingChanges: true)
                }
            }
            return try inMemory(query)
        }
        if includesPendingChanges && hasPendingChanges(affecting: query) { return try inMemory(query) }
        return try (context.pinnedSnapshot() ?? context.coordinator.store as any StoreReading).aggregate(query)
    }

    /// Whether unsaved changes here can change the answer to `query`: to its entity, or to
    /// an entity its predicate or its properties reach through relationships.
    func hasPendingChanges(affecting query: AggregateQuery) -> Bool {
        if context.hasPendingChanges(affecting: StoreQuery(entity: query.entity, predicate: query.predicate)) { return true }
        for path in query.valueRelationshipPaths {
            for reference in path {
                guard let r = context.coordinator.schema.relationship(reference) else { continue }
                for destination in r.concreteDestinations(in: context.coordinator.schema) where context.pending.changedEntities.contains(ObjectIdentifier(destination.destination)) {
                    return true
                }
            }
        }
        return false
    }

    /// The answer computed over the objects a fetch would return, with their unsaved values
    /// and relationships.
    func inMemory(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        let matches = try context.matchingRows(StoreQuery(entity: query.entity, predicate: query.predicate))
        let graph = ContextGraph(context)
        let rows = matches.map { graph.remember(query.entity, $0.row) }
        // Load what the properties read through to-one relationships: one query per level.
        for path in query.valueRelationshipPaths {
            var level = rows
            for reference in path {
                guard let r = context.coordinator.schema.relationship(reference) else { break }
                graph.warmDestinations(r, of: level)
                level = level.compactMap { graph.destination(of: $0, reference) }
            }
        }
        let result = try AggregateEvaluator.evaluate(query, rows: rows, in: graph)
        if let failure = graph.failure { throw failure }
        return result
    }
}
