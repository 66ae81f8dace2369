/// The pending-change correction of queries: a source's answer (the store's, or the parent's
/// for a child context) to a query or a to-many read, corrected by one context's unsaved
/// inserts, changes, deletions and relationship changes, with the same rules the store uses.
///
/// Objects whose answer may differ from the source's (changed here, or reaching a changed
/// object through the relationships the query follows) are judged in memory on a
/// ``ContextGraph``; the others keep the source's verdict. It keeps no state of its own: the
/// context makes one for each call (``ManagedObjectContext/pendingChangeEvaluator``) and calls
/// it on its own isolation; it is not `Sendable`.
struct PendingChangeEvaluator {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// Whether this context has unsaved changes that can change the answer to `query`: to its
    /// entity, or to an entity its predicate or sort reaches through relationships.
    func affects(_ query: StoreQuery) -> Bool {
        if context.pending.changedEntities.contains(ObjectIdentifier(query.entity)) { return true }
        let schema = context.coordinator.schema
        for path in query.relationshipPaths {
            for reference in path {
                guard let r = schema.relationship(reference) else { continue }
                for destination in r.concreteDestinations(in: schema) where context.pending.changedEntities.contains(ObjectIdentifier(destination.destination)) {
                    return true
                }
            }
        }
        return false
    }

    /// The keys of `entity`'s objects whose unsaved changes (or links) touch it.
    func changedKeys(of entity: EntityDescription) -> Set<Int64> {
        let id = ObjectIdentifier(entity)
        var keys: Set<Int64> = []
        for k in context.pending.inserted.keys where k.entity == id { keys.insert(k.key) }
        for k in context.pending.updated.keys where k.entity == id { keys.insert(k.key) }
        for k in context.pending.deleted.keys where k.entity == id { keys.insert(k.key) }
        for k in context.pending.relationships.entries.keys where k.entity == id { keys.insert(k.key) }
        for link in context.pending.links.keys {
            // A sub-entity's links are in the table of the entity that declares the relationship.
            if entity.isOrInherits(fromEntityNamed: link.table.sourceEntityName) { keys.insert(link.source) }
            if entity.isOrInherits(fromEntityNamed: link.table.targetEntityName) { keys.insert(link.target) }
        }
        return keys
    }

    /// The objects of the query's entity whose answer this context must compute itself: those
    /// changed here, and those that reach, through the relationships the query follows, an
    /// object changed here (now or before the change).
    func affectedKeys(_ query: StoreQuery) throws(LoomError) -> Set<Int64> {
        let schema = context.coordinator.schema
        var affected = changedKeys(of: query.entity)
        for path in query.relationshipPaths {
            let hops = path.compactMap { schema.relationship($0) }
            guard hops.count == path.count else { continue }
            var frontier: Set<Int64> = []
            for level in stride(from: hops.count - 1, through: 0, by: -1) {
                let r = hops[level]
                if r.leadsToSubentities {
                    // Each destination entity's keys through its own table and slots.
                    var previous: Set<Int64> = []
                    let entities = context.destinationEntities(of: r.destination, keys: frontier)
                    for narrowed in r.concreteDestinations(in: schema) {
                        let keys = frontier.filter { entities[$0] === narrowed.destination }.union(changedKeys(of: narrowed.destination))
                        previous.formUnion(try predecessors(of: keys, via: narrowed))
                    }
                    frontier = previous
                    continue
                }
                frontier.formUnion(changedKeys(of: r.destination))
                frontier = try predecessors(of: frontier, via: r)
            }
            affected.formUnion(frontier)
        }
        return affected
    }

    /// The objects of `r`'s source that `r` leads (or led, before unsaved changes) to `keys`.
    private func predecessors(of keys: Set<Int64>, via r: ResolvedRelationship) throws(LoomError) -> Set<Int64> {
        guard !keys.isEmpty else { return [] }
        let schema = context.coordinator.schema
        let inverse = schema.relationship(r.inverseIndex, of: r.destination)
        var found: Set<Int64> = []
        switch (r.storage, inverse.storage) {
        case (.foreignKey, .foreignKey(let slot)), (.inverseForeignKey, .foreignKey(let slot)):
            // The destination holds the key back to its source: read it now and as saved.
            for key in keys {
                if let backing = context.registeredBacking(of: r.destination, key: key), backing.state == .loaded {
                    if case .integer(let k) = backing.values[slot] { found.insert(k) }
                    if let committed = backing.committed, case .integer(let k) = committed[slot] { found.insert(k) }
                } else if let row = try context.rowSource.baseRow(of: r.destination, key: key, fresh: false), case .integer(let k) = row.values[slot] {
                    found.insert(k)
                }
            }
        default:
            // The source holds the key (its objects are the inverse to-many's members), or a
            // join table does: the inverse's members now. Members that left are changed objects
            // of the source entity, which the caller counts already.
            for pair in try currentRelated(inverse, keys: Array(keys)) { found.insert(pair.row.key) }
        }
        return found
    }

    /// The store's answer corrected by this context's unsaved changes, sorted and windowed.
    ///
    /// Objects whose answer may differ from the store's (changed here, or reaching a changed
    /// object through the relationships the query follows) are judged in memory, on their
    /// current values and relationships; the others keep the store's verdict.
    func matchingRows(_ query: StoreQuery) throws(LoomError) -> [(row: StoreRow, object: (any BackedObject)?)] {
        let entity = query.entity
        let entityID = ObjectIdentifier(entity)
        let affected = try affectedKeys(query)
        // The store's rows that no unsaved change touches keep their verdict and their place in
        // the order (the sort keys' relationships count among the affected paths), so the window
        // needs at most `offset + limit` of them, and the store's first `offset + limit +
        // affected` rows hold those: the rest of the entity is not read.
        var base = query
        base.fetchOffset = 0
        base.fetchLimit = query.fetchLimit.flatMap { limit in
            let (window, o1) = query.fetchOffset.addingReportingOverflow(limit)
            let (needed, o2) = window.addingReportingOverflow(affected.count)
            return o1 || o2 ? nil : needed
        }
        let graph = ContextGraph(context)
        var results: [(row: StoreRow, object: (any BackedObject)?, graphRow: ContextGraph.Row)] = []
        for row in try context.rowSource.baseFetch(base) where !affected.contains(row.key) {
            results.append((row, nil, graph.remember(entity, row)))
        }
        var candidates: [ContextGraph.Row] = []
        for key in affected.sorted() {
            if let row = graph.row(entity, key) { candidates.append(row) }
        }
        if let failure = graph.failure { throw failure }
        // Judge the candidates on what they are now, loading what the predicate follows in
        // one query per relationship at the first level.
        if let predicate = query.predicate {
            for path in predicate.relationshipPaths {
                guard let first = path.first, let r = context.coordinator.schema.relationship(first) else { continue }
                if r.description.isToMany { graph.warmMembers(r, of: candidates.map(\.key)) } else { graph.warmDestinations(r, of: candidates) }
            }
        }
        for candidate in candidates where query.predicate?.matches(candidate, in: graph) ?? true {
            let k = RowCacheKey(entity: entityID, key: candidate.key)
            let object = context.pending.inserted[k] ?? context.pending.updated[k]
            // A registered fault that holds no row (one a relationship change registered) knows
            // no version: the row read for it does.
            let version = object?._loomBacking.version ?? candidate.version
            results.append((StoreRow(key: candidate.key, version: version, values: candidate.values), object, candidate))
        }
        if let failure = graph.failure { throw failure }
        if SortKey.usesRelationships(query.sortKeys) {
            for key in query.sortKeys {
                guard let first = key.relationshipPath.first, let r = context.coordinator.schema.relationship(first) else { continue }
                graph.warmDestinations(r, of: results.map(\.graphRow))
            }
            SortKey.sort(&results, by: query.sortKeys, row: \.graphRow, in: graph)
            if let failure = graph.failure { throw failure }
        } else {
            results.sort { SortKey.areInIncreasingOrder(query.sortKeys, $0.row, $1.row) }
        }
        let start = min(query.fetchOffset, results.count)
        let end = query.fetchLimit.map { min(start + $0, results.count) } ?? results.count
        return results[start..<end].map { ($0.row, $0.object) }
    }

    /// The destinations of a to-many relationship for each of `keys`, as this context sees
    /// them: its source's answer corrected by this context's unsaved changes.
    func currentRelated(_ r: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [(owner: Int64, row: StoreRow)] {
        if r.leadsToSubentities {
            // Each entity's table in turn; the coordinator remembers whose each key is.
            var pairs: [(owner: Int64, row: StoreRow)] = []
            for narrowed in r.concreteDestinations(in: context.coordinator.schema) {
                let found = try currentRelated(narrowed, keys: keys)
                context.coordinator.keyEntities.note(narrowed.destination, keys: found.map(\.row.key))
                pairs += found
            }
            return pairs
        }
        let sourceID = ObjectIdentifier(r.source)
        // Objects inserted here have nothing related in the store or the parent.
        let saved = context.pending.inserted.isEmpty && context.pending.insertedDeleted.isEmpty ? keys : keys.filter {
            context.pending.inserted[RowCacheKey(entity: sourceID, key: $0)] == nil && context.pending.insertedDeleted[RowCacheKey(entity: sourceID, key: $0)] == nil
        }
        var pairs = saved.isEmpty ? [] : try context.rowSource.baseRelated(r, keys: saved)
        // Needed only where this context changed something: not built for every fault.
        var wanted: Set<Int64> { Set(keys) }
        let destinationID = ObjectIdentifier(r.destination)
        switch r.storage {
        case .foreignKey:
            fatalError("a to-one relationship is read from its foreign key")
        case .inverseForeignKey(let slot):
            // Destinations changed here are judged by their foreign key as it is now.
            var changed: [Int64: ObjectBacking] = [:]
            for (k, o) in context.pending.inserted where k.entity == destinationID { changed[k.key] = o._loomBacking }
            for (k, o) in context.pending.updated where k.entity == destinationID { changed[k.key] = o._loomBacking }
            for (k, o) in context.pending.deleted where k.entity == destinationID { changed[k.key] = o._loomBacking }
            for (k, o) in context.pending.insertedDeleted where k.entity == destinationID { changed[k.key] = o._loomBacking }
            if !changed.isEmpty {
                let wanted = wanted
                pairs.removeAll { changed[$0.row.key] != nil }
                // A deleted object leaves relationships when the delete rules run, at the end of
                // the event, as in Core Data.
                for (key, b) in changed.sorted(by: { $0.key < $1.key }) where !(b.isDeleted && b.deletePropagated) && b.state == .loaded {
                    if case .integer(let owner) = b.values[slot], wanted.contains(owner) {
                        pairs.append((owner, StoreRow(key: key, version: b.version, values: b.values)))
                    }
                }
            }
        case .joinTable(let table, let ownColumn, _):
            let ownIsSource = ownColumn == JoinTable.sourceColumn
            var removed: Set<[Int64]> = []
            var added: [(Int64, Int64)] = []
            let wanted = context.pending.links.isEmpty ? [] : wanted
            for (link, isAdded) in context.pending.links where link.table == table {
                let (owner, destination) = ownIsSource ? (link.source, link.target) : (link.target, link.source)
                guard wanted.contains(owner) else { continue }
                if isAdded { added.append((owner, destination)) } else { removed.insert([owner, destination]) }
            }
            if !removed.isEmpty { pairs.removeAll { removed.contains([$0.owner, $0.row.key]) } }
            let present = Set(pairs.map { [$0.owner, $0.row.key] })
            for (owner, destination) in added.sorted(by: { ($0.0, $0.1) < ($1.0, $1.1) }) where !present.contains([owner, destination]) {
                if let row = try context.rowSource.currentRow(of: r.destination, key: destination, fresh: false) {
                    pairs.append((owner, row))
                }
            }
            // Destinations deleted here are gone once the delete rules ran.
            pairs.removeAll { pair in
                let k = RowCacheKey(entity: destinationID, key: pair.row.key)
                let deleted = context.pending.deleted[k] ?? context.pending.insertedDeleted[k]
                return deleted?._loomBacking.deletePropagated == true
            }
            // A destination changed here is shown with its current values.
            pairs = pairs.map { pair in
                if let b = context.pending.updated[RowCacheKey(entity: destinationID, key: pair.row.key)]?._loomBacking, b.state == .loaded {
                    return (pair.owner, StoreRow(key: b.key, version: b.version, values: b.values))
                }
                return pair
            }
        }
        return pairs
    }
}
