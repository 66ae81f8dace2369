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
        try coordinator.schema.requireOwnTable(of: entity, for: "A property or aggregate fetch")
        let (query, names, summed) = try request.aggregateQuery(for: entity, in: coordinator.schema)
        do {
            return try AggregateFetch(context: self).rows(query, includesPendingChanges: request.includesPendingChanges).map { FetchedValues(names: names, values: $0) }
        } catch let error where error.code == .integerOverflow {
            var named = error
            named.attributeNames = summed
            throw named
        }
    }
}
