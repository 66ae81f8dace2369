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
    /// A request for an entity with sub-entities covers their objects too: each concrete
    /// entity's table answers its part and the parts combine as one table's would (counts and
    /// sums add, an average is the total sum over the total count, the smallest minimum and the
    /// largest maximum, equal groups merge), then sort and window.
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
    /// - Complexity: one store query (one per concrete entity of a hierarchy); computed in memory, one query for the matching rows plus
    ///   one per relationship level the properties follow, and O(matching objects).
    public func fetch<Model: PersistentModel>(_ request: PropertyFetchRequest<Model>) throws(LoomError) -> [FetchedValues] {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        let (query, names, summed) = try request.aggregateQuery(for: entity, in: coordinator.schema)
        let entities = coordinator.schema.concreteEntities(of: entity)
        do {
            let rows = if entities.count == 1 && entities[0] === entity {
                try AggregateFetch(context: self).rows(query, includesPendingChanges: request.includesPendingChanges)
            } else {
                try HierarchyAggregate(context: self, entities: entities).rows(request, query: query)
            }
            return rows.map { FetchedValues(names: names, values: $0) }
        } catch let error where error.code == .integerOverflow {
            var named = error
            named.attributeNames = summed
            throw named
        }
    }
}
