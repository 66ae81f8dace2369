extension ManagedObjectContext {
    /// The objects matching a request, loaded `batchSize` at a time as the result is read
    /// (SwiftData's `fetch(_:batchSize:)`, Core Data's `fetchBatchSize`); see
    /// ``FetchResultsCollection``.
    ///
    /// ```swift
    /// var request = FetchRequest<Book>(sortBy: [SortDescriptor(\.title)])
    /// request.relationshipKeyPathsForPrefetching = [\.author]   // prefetched per batch
    /// for book in try context.fetch(request, batchSize: 500) {
    ///     print(book.title, book.author?.name ?? "-")
    /// }
    /// ```
    ///
    /// A request for an entity with sub-entities covers their objects too (unless
    /// `includesSubentities` is off), each of its own class, in the order a fetch gives.
    ///
    /// The query runs now and records the matching keys only (with `includesPendingChanges`,
    /// unsaved inserts, changes and deletions are reflected as in ``fetch(_:)-(FetchRequest<Model>)``);
    /// rows are read when their batch is first used. A batch size of 0 turns batching off: the
    /// first element read loads every object. Call it, and read the result, on the context's
    /// isolation.
    ///
    /// - Throws: ``LoomError/Code/invalidRequest`` for a negative batch size; otherwise what
    ///   ``fetch(_:)-(FetchRequest<Model>)`` throws.
    /// - Complexity: one query for the keys (plus O(changed objects) with pending changes; across
    ///   a hierarchy, one per concrete entity, reading the sort values too), then one per batch
    ///   read (per entity in it), plus one per prefetched relationship per batch.
    public func fetch<Model: PersistentModel>(_ request: FetchRequest<Model>, batchSize: Int) throws(LoomError) -> FetchResultsCollection<Model> {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        guard batchSize >= 0 else {
            throw LoomError(.invalidRequest, "A batched fetch of \(entity.name) has a negative batch size; use 1 or more, or 0 to load everything at once.", entity: entity.name)
        }
        let entities = coordinator.schema.concreteEntities(of: entity, includingSubentities: request.includesSubentities)
        if entities.count != 1 || entities[0] !== entity {
            // Across a hierarchy: the order of every entity's keys, merged; no rows read yet.
            let order = try HierarchyFetch(context: self, entities: entities).orderedKeys(request)
            let storage = FetchResultsStorage(context: self, entities: entities, keys: order.keys, places: order.places,
                                              batchSize: batchSize == 0 ? max(order.keys.count, 1) : batchSize)
            return FetchResultsCollection(storage: storage)
        }
        let query = try request.storeQuery(for: entity, in: coordinator.schema)
        let prefetched = try request.prefetchedRelationships(in: entity)
        let keys: [Int64]
        if !request.includesPendingChanges || !hasPendingChanges(affecting: query) {
            keys = try rowSource.baseKeys(query)
        } else {
            keys = try matchingRows(query).map(\.row.key)
        }
        let storage = FetchResultsStorage(context: self, entity: entity, keys: keys, batchSize: batchSize == 0 ? max(keys.count, 1) : batchSize, prefetched: prefetched)
        return FetchResultsCollection(storage: storage)
    }
}
