extension ManagedObjectContext {
    /// The values a request asks for: attributes, distinct values, or aggregates per group
    /// (Core Data's dictionary results); see ``PropertyFetchRequest``.
    ///
    /// ```swift
    /// let totals = try context.fetch(PropertyFetchRequest<Book>(
    ///     properties: [.count(as: "books"), .sum(\.pages, as: "pages")]))
    /// let pages = try totals[0]["pages", as: Int?.self]   // nil when there are no books
    /// ```
    ///
    /// Call it on the context's isolation. The store computes the answer, unless
    /// `includesPendingChanges` is set and this context has unsaved changes the answer depends
    /// on (or it is a child context): then it is computed in memory, with the store's rules,
    /// over the objects a fetch would return.
    ///
    /// - Throws: ``LoomError`` with ``LoomError/Code/invalidRequest`` for a key path that names
    ///   no stored attribute, a sum or average of a non-numeric attribute, a value fetched but
    ///   not grouped by, or two results with one name; ``LoomError/Code/unsupportedSort`` for a
    ///   sort by an unknown result; ``LoomError/Code/integerOverflow`` when an integer sum
    ///   overflows; ``LoomError/Code/unsupportedPredicate`` for a predicate Loom cannot translate.
    /// - Complexity: one store query; computed in memory, one query for the matching rows plus
    ///   one per relationship level the properties follow, and O(matching objects).
    public func fetch<Model: PersistentModel>(_ request: PropertyFetchRequest<Model>) throws(LoomError) -> [FetchedValues] {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        let (query, names, summed) = try request.aggregateQuery(for: entity, in: coordinator.schema)
        do {
            return try aggregateRows(query, includesPendingChanges: request.includesPendingChanges).map { FetchedValues(names: names, values: $0) }
        } catch let error where error.code == .integerOverflow {
            var named = error
            named.attributeNames = summed
            throw named
        }
    }

    /// The rows of an aggregate query as this context sees them.
    func aggregateRows(_ query: AggregateQuery, includesPendingChanges: Bool) throws(LoomError) -> [[StoredValue]] {
        if let parent {
            guard includesPendingChanges else {
                return try parent.run { (context) throws(LoomError) -> [[StoredValue]] in try context.aggregateRows(query, includesPendingChanges: true) }
            }
            return try aggregateInMemory(query)
        }
        if includesPendingChanges && hasPendingChanges(affecting: query) { return try aggregateInMemory(query) }
        return try (pinnedSnapshot() ?? coordinator.store as any StoreReading).aggregate(query)
    }

    /// Whether unsaved changes here can change the answer to `query`: to its entity, or to
    /// an entity its predicate or its properties reach through relationships.
    func hasPendingChanges(affecting query: AggregateQuery) -> Bool {
        if hasPendingChanges(affecting: StoreQuery(entity: query.entity, predicate: query.predicate)) { return true }
        for path in query.valueRelationshipPaths {
            for reference in path {
                guard let r = coordinator.schema.relationship(reference) else { continue }
                if pending.changedEntities.contains(ObjectIdentifier(r.destination)) { return true }
            }
        }
        return false
    }

    /// The answer computed over the objects a fetch would return, with their unsaved values
    /// and relationships.
    func aggregateInMemory(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        let matches = try matchingRows(StoreQuery(entity: query.entity, predicate: query.predicate))
        let graph = ContextGraph(self)
        let rows = matches.map { graph.remember(query.entity, $0.row) }
        // Load what the properties read through to-one relationships: one query per level.
        for path in query.valueRelationshipPaths {
            var level = rows
            for reference in path {
                guard let r = coordinator.schema.relationship(reference) else { break }
                graph.warmDestinations(r, of: level)
                level = level.compactMap { graph.destination(of: $0, reference) }
            }
        }
        let result = try AggregateEvaluator.evaluate(query, rows: rows, in: graph)
        if let failure = graph.failure { throw failure }
        return result
    }
}
