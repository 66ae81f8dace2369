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
    /// The query runs now and records the matching keys only (with `includesPendingChanges`,
    /// unsaved inserts, changes and deletions are reflected as in ``fetch(_:)-(FetchRequest<Model>)``);
    /// rows are read when their batch is first used. A batch size of 0 turns batching off: the
    /// first element read loads every object. Call it, and read the result, on the context's
    /// isolation.
    ///
    /// - Throws: ``LoomError/Code/invalidRequest`` for a negative batch size; otherwise what
    ///   ``fetch(_:)-(FetchRequest<Model>)`` throws.
    /// - Complexity: one query for the keys (plus O(changed objects) with pending changes),
    ///   then one per batch read, plus one per prefetched relationship per batch.
    public func fetch<Model: PersistentModel>(_ request: FetchRequest<Model>, batchSize: Int) throws(LoomError) -> FetchResultsCollection<Model> {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        try coordinator.schema.requireOwnTable(of: entity, for: "A batched fetch", includingSubentities: request.includesSubentities)
        guard batchSize >= 0 else {
            throw LoomError(.invalidRequest, "A batched fetch of \(entity.name) has a negative batch size; use 1 or more, or 0 to load everything at once.", entity: entity.name)
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
