/// How a context turns rows read from its source into objects: the registered object for a
/// row, or a new one registered; loaded, or a fault holding the row or filling from the shared
/// cache (``Materialization``). A fetch into a context with registered objects lets the store
/// skip the rows whose objects keep what they have.
///
/// It keeps no state of its own: its functions take the context, which calls them on its own
/// isolation.
enum ObjectMaterializer {
    // The context is a parameter, borrowed from the caller for the call. A stored strong
    // reference is retained for each materializer made (one per object where members and
    // batches call `ManagedObjectContext.materialize(_:of:as:)`), an `unowned(unsafe)` one
    // around each use; and a whole-module build took a stored copy's release for the context's
    // end, warning that each new object's weak reference to it "will always be nil".
    static func fetchObjects(_ query: StoreQuery, includesPendingChanges: Bool, asFaults: Bool, in context: ManagedObjectContext) throws(LoomError) -> [any BackedObject] {
        let entity = query.entity
        // Read before the query: rows the query returns are at least this recent.
        let generation = context.coordinator.currentGeneration
        // A child's objects are filled at once: its faults would have to ask the parent again.
        let form: Materialization = asFaults && context.parent == nil ? faultMaterialization(readAt: generation, in: context) : .loaded
        if !includesPendingChanges || !context.hasPendingChanges(affecting: query) {
            let registeredBefore = context.identityMap.count
            if context.parent == nil, !form.fillsFromCache, registeredBefore > 0, entity.storedValueCount > 0 {
                return try fetchReusingRegistered(query, as: form, in: context)
            }
            var rows = try context.rowSource.baseFetch(query)
            if form.fillsFromCache && context.readsLatestData { context.coordinator.cache(rows, of: entity, readAt: generation) }
            // The rows are not kept: each object takes its row's values (see
            // `materialize(taking:of:as:in:)`), except faults filled from the cache, which keep
            // no row (taking one would copy the rows the cache holds).
            let takesRows = !form.fillsFromCache
            if registeredBefore == 0 {
                // Nothing was registered and one query's keys are distinct: no lookups. The
                // backings are made first, all together, then their objects: a later fetch
                // (and the teardown) reads every backing in key order, and finds them next to
                // each other rather than each between two objects.
                context.identityMap.reserveCapacity(forNew: rows.count, of: ObjectIdentifier(entity))
                var backings: [ObjectBacking] = []
                backings.reserveCapacity(rows.count)
                for index in rows.indices {
                    backings.append(takesRows ? newBacking(taking: &rows[index], of: entity, as: form, in: context)
                        : ObjectBacking(entity: entity, key: rows[index].key, context: context))
                }
                return backings.map { context.register($0) }
            }
            var objects: [any BackedObject] = []
            objects.reserveCapacity(rows.count)
            for index in rows.indices {
                objects.append(takesRows ? materialize(taking: &rows[index], of: entity, as: form, in: context)
                    : materialize(rows[index], of: entity, as: form, in: context))
            }
            return objects
        }
        let matches = try context.matchingRows(query)
        if form.fillsFromCache && context.readsLatestData { context.coordinator.cache(matches.compactMap { $0.object == nil ? $0.row : nil }, of: entity, readAt: generation) }
        return matches.map { match in
            match.object ?? materialize(match.row, of: entity, as: form, in: context)
        }
    }

    /// A fetch into a context where objects are registered: the store is asked, row by row,
    /// whether the registered object keeps what it has (``keepsValues(_:version:as:)``);
    /// those rows are not decoded, and their objects go straight into the result.
    private static func fetchReusingRegistered(_ query: StoreQuery, as form: Materialization, in context: ManagedObjectContext) throws(LoomError) -> [any BackedObject] {
        let entity = query.entity
        let entityID = ObjectIdentifier(entity)
        // Registered objects that keep what they have, in the order of their rows.
        var kept: [any BackedObject] = []
        var rows = try context.coordinator.fetch(query, pinned: context.pinnedSnapshot()) { key, version in
            guard let entry = context.identityMap[RowCacheKey(entity: entityID, key: key)],
                keepsValues(entry.backing, version: version, as: form)
            else { return false }
            kept.append(entry.object)
            return true
        }
        context.identityMap.reserveCapacity(forNew: rows.count - kept.count, of: entityID)
        guard rows.reduce(0, { $0 + ($1.values.isEmpty ? 1 : 0) }) == kept.count else {
            throw LoomError(.corruptValue, "The store returned \(entity.name) rows without values that were not asked to be left out.", entity: entity.name)
        }
        var next = kept.startIndex
        var objects: [any BackedObject] = []
        objects.reserveCapacity(rows.count)
        for index in rows.indices {
            if rows[index].values.isEmpty {
                objects.append(kept[next])
                next += 1
            } else {
                objects.append(materialize(taking: &rows[index], of: entity, as: form, in: context))
            }
        }
        return objects
    }

    /// Whether ``materialize(_:of:as:)`` would leave the registered object for this row as
    /// it is: loaded (its values are never overwritten by a fetch), or a fault that already
    /// holds this version of the row and stays a fault.
    private static func keepsValues(_ backing: ObjectBacking, version: Int64, as form: Materialization) -> Bool {
        switch backing.state {
        case .loaded: return true
        case .fault:
            guard case .heldFault = form else { return false }
            return backing.holdsFetchedRow && backing.version == version
        case .detached, .invalidated: return false
        }
    }

    /// How rows read by a query that began at `generation` become faults: holding their rows
    /// when the context's faults do, else filled from the shared cache.
    static func faultMaterialization(readAt generation: UInt64, in context: ManagedObjectContext) -> Materialization {
        context.faultsHoldFetchedRows ? .heldFault(age: heldRowAge(readAt: generation, in: context)) : .cachedFault
    }

    /// The ``ObjectBacking/heldRowAge`` of faults holding rows read by a query that began at
    /// `generation`. The first such query sets the context's oldest (``ManagedObjectContext/fetchedRowsGeneration``).
    private static func heldRowAge(readAt generation: UInt64, in context: ManagedObjectContext) -> UInt32 {
        guard let oldest = context.fetchedRowsGeneration, oldest <= generation else {
            // A row older than the oldest (a to-many's members, read before the first fetch)
            // moves the oldest back: the other faults' rows then only count as older than they are.
            context.fetchedRowsGeneration = generation
            return 0
        }
        return UInt32(clamping: generation - oldest)
    }

    /// The registered object for a row, or a new one; never overwrites a loaded object's values.
    ///
    /// A fault keeps the fetched row (see ``ManagedObjectContext/faultsHoldFetchedRows``), so that firing it costs
    /// no lookup and no I/O; otherwise it fills from the shared cache the fetch filled.
    static func materialize(_ row: StoreRow, of entity: EntityDescription, as form: Materialization, in context: ManagedObjectContext) -> any BackedObject {
        var row = row
        return materialize(taking: &row, of: entity, as: form, in: context)
    }

    /// ``materialize(_:of:as:in:)`` for a row the caller does not keep: the object takes the
    /// row's values rather than sharing them (see ``ObjectBacking/load(taking:)``), and `row`
    /// may be left without them.
    private static func materialize(taking row: inout StoreRow, of entity: EntityDescription, as form: Materialization, in context: ManagedObjectContext) -> any BackedObject {
        let key = RowCacheKey(entity: ObjectIdentifier(entity), key: row.key)
        if let registered = context.identityMap[key] {
            let backing = registered.backing
            if backing.state == .fault, row.values.count == entity.storedValueCount {
                switch form {
                case .loaded: backing.load(taking: &row)
                case .heldFault(let age): backing.attach(taking: &row, age: age)
                case .cachedFault: break
                }
            }
            return registered.object
        }
        return context.register(newBacking(taking: &row, of: entity, as: form, in: context))
    }

    /// The backing of a new object for a row: loaded with it, holding it, or a fault, as `form`
    /// says; it takes the row's values (see ``materialize(taking:of:as:in:)``).
    private static func newBacking(taking row: inout StoreRow, of entity: EntityDescription, as form: Materialization, in context: ManagedObjectContext) -> ObjectBacking {
        let backing = ObjectBacking(entity: entity, key: row.key, context: context)
        switch form {
        case .loaded: backing.load(taking: &row)
        case .heldFault(let age): backing.attach(taking: &row, age: age)
        case .cachedFault: break
        }
        return backing
    }
}

/// How a row read from the store becomes an object. A query or a member list decides it
/// once, for all its rows (``ObjectMaterializer/faultMaterialization(readAt:in:)``).
enum Materialization {
    /// Loaded with the row's values.
    case loaded
    /// A fault holding the row (see ``ManagedObjectContext/faultsHoldFetchedRows``), of this
    /// ``ObjectBacking/heldRowAge`` (see ``ObjectMaterializer/heldRowAge(readAt:in:)``).
    case heldFault(age: UInt32)
    /// A fault that fills from the shared row cache when it fires: the context has a
    /// ``ManagedObjectContext/stalenessInterval``, which the cache's row ages answer.
    case cachedFault

    /// Whether the rows go to the shared row cache, for faults that keep no row.
    var fillsFromCache: Bool {
        if case .cachedFault = self { return true }
        return false
    }
}

