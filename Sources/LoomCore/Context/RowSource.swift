/// Where a context's rows come from: the store, through the coordinator and at the context's
/// query generation, for a root context; the parent context, with its unsaved changes, for a
/// child (reached synchronously through ``ParentLink``). Also what a context shows its own
/// children.
///
/// It keeps no state of its own. The context makes one for each call
/// (``ManagedObjectContext/rowSource``) and calls it on its own isolation; it is not `Sendable`.
struct RowSource {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// Rows for a query as this context's source sees them.
    func baseFetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        guard let parent = context.parent else { return try context.coordinator.fetch(query, pinned: context.pinnedSnapshot()) }
        return try parent.run { (parent) throws(LoomError) -> [StoreRow] in try parent.rowSource.rowsAsSeen(query) }
    }

    /// The keys of the rows this context's source has for a query, in order: without reading
    /// their values from the store.
    func baseKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        guard context.parent != nil else { return try (context.pinnedSnapshot() ?? context.coordinator.store as any StoreReading).fetchKeys(query) }
        return try baseFetch(query).map(\.key)
    }

    /// How many rows this context's source has for a query.
    func baseCount(_ query: StoreQuery) throws(LoomError) -> Int {
        guard context.parent != nil else { return try context.coordinator.count(query, pinned: context.pinnedSnapshot()) }
        return try baseFetch(query).count
    }

    /// The current row of one object as this context's source sees it. `fresh` reads past the
    /// coordinator's cache (root contexts); otherwise the cache serves rows no older than
    /// ``ManagedObjectContext/stalenessInterval``.
    func baseRow(of entity: EntityDescription, key: Int64, fresh: Bool) throws(LoomError) -> StoreRow? {
        guard let parent = context.parent else {
            return try context.coordinator.row(of: entity, key: key, bypassingCache: fresh, maximumAge: context.stalenessInterval, pinned: context.pinnedSnapshot())
        }
        return try parent.run { (parent) throws(LoomError) -> StoreRow? in try parent.rowSource.currentRow(of: entity, key: key, fresh: fresh) }
    }

    /// Rows by key as this context's source sees them, in one query.
    func baseRows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        guard let parent = context.parent else {
            // During a merge, the rows its saves carried first.
            let (carried, missing) = context.rowsCarriedByMerge(of: entity, keys: keys)
            if missing.isEmpty { return carried }
            return try carried + context.coordinator.rows(of: entity, keys: missing, pinned: context.pinnedSnapshot())
        }
        return try parent.run { (parent) throws(LoomError) -> [StoreRow] in
            var rows: [StoreRow] = []
            var missing: [Int64] = []
            let source = parent.rowSource
            for key in keys {
                if let backing = parent.identityMap.backing(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key)), backing.state == .loaded {
                    if !backing.isDeleted { rows.append(try source.currentRow(of: entity, key: key, fresh: false)!) }
                } else {
                    missing.append(key)
                }
            }
            return try rows + source.baseRows(of: entity, keys: missing)
        }
    }

    /// The destinations of a to-many relationship as this context's source sees them.
    func baseRelated(_ r: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [(owner: Int64, row: StoreRow)] {
        guard let parent = context.parent else {
            return try context.coordinator.fetchRelated(r, keys: keys, pinned: context.pinnedSnapshot()).map { ($0.owner, $0.row) }
        }
        let result = try parent.run { (parent) throws(LoomError) -> [RelatedRow] in
            try parent.currentRelated(r, keys: keys).map { RelatedRow(owner: $0.owner, row: $0.row) }
        }
        return result.map { ($0.owner, $0.row) }
    }

    // MARK: What this context shows its children

    /// What a child sees for a query: this context's objects with their unsaved changes.
    func rowsAsSeen(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        if !context.hasPendingChanges(affecting: query) { return try baseFetch(query) }
        return try context.matchingRows(query).map(\.row)
    }

    /// What a child sees for one object: this context's values, unsaved changes included.
    func currentRow(of entity: EntityDescription, key: Int64, fresh: Bool) throws(LoomError) -> StoreRow? {
        if let object = context.identityMap.object(for: RowCacheKey(entity: ObjectIdentifier(entity), key: key)) {
            let backing = object._loomBacking
            if backing.isDeleted { return nil }
            if backing.state == .loaded {
                return StoreRow(key: key, version: backing.version, values: backing.values)
            }
        }
        return try baseRow(of: entity, key: key, fresh: fresh)
    }
}
