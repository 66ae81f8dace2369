extension ManagedObjectContext {
    /// The objects matching a request, in order.
    ///
    /// With `includesPendingChanges` (the default), this context's unsaved inserts, changes and
    /// deletions are reflected: the store's answer is corrected by evaluating the predicate on
    /// the changed objects in memory, with the same rules the store uses.
    ///
    /// - Throws: ``LoomError`` if the predicate or a sort cannot be translated, or the store fails.
    /// - Complexity: one store query; with pending changes on the entity, plus O(changed objects).
    public func fetch<Model: PersistentModel>(_ request: FetchRequest<Model>) throws(LoomError) -> [Model] {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        if let hierarchy = hierarchyFetch(of: entity, request) { return Self.models(try hierarchy.objects(request)) }
        let query = try request.storeQuery(for: entity, in: coordinator.schema)
        let prefetched = try request.prefetchedRelationships(in: entity)
        let objects = try fetchObjects(query, includesPendingChanges: request.includesPendingChanges, asFaults: request.returnsObjectsAsFaults)
        if !prefetched.isEmpty { try ObjectMaterializer.prefetch(prefetched, of: entity, for: objects, in: self) }
        return Self.models(objects)
    }

    /// The objects of a fetch as `Model`s. This generic code runs unspecialized, where `map`
    /// goes through `Collection`'s witnesses for every element (a cost paid per fetched
    /// object) and `append` through the array's: the array is written in place.
    /// The objects are of the entity's own class (always, unless a schema maps the entity to
    /// another class): a metatype comparison instead of a dynamic cast for each.
    /// An empty input returns `[]` before the unsafe initializer: with a capacity of 0 it
    /// writes the count into the one empty-array storage all empty arrays share, a data race
    /// between contexts fetching nothing at the same time.
    static func models<Model: PersistentModel>(_ objects: [any BackedObject]) -> [Model] {
        if objects.isEmpty { return [] }
        let model = ObjectIdentifier(Model.self)
        guard objects.allSatisfy({ ObjectIdentifier(type(of: $0)) == model }) else { return objects.map { $0 as! Model } }
        return [Model](unsafeUninitializedCapacity: objects.count) { buffer, count in
            for (i, object) in objects.enumerated() {
                (buffer.baseAddress! + i).initialize(to: unsafeDowncast(object as AnyObject, to: Model.self))
            }
            count = objects.count
        }
    }

    /// The IDs of the objects matching a request, in order (Core Data's
    /// `.managedObjectIDResultType`; SwiftData's `fetchIdentifiers`).
    public func fetchIDs<Model: PersistentModel>(_ request: FetchRequest<Model>) throws(LoomError) -> [ObjectID<Model>] {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        if let hierarchy = hierarchyFetch(of: entity, request) {
            // Each ID names its object's own entity (a `BusinessTrip` fetched as a `Trip`).
            return try hierarchy.objects(request).map { ObjectID(unchecked: $0.anyObjectID) }
        }
        let query = try request.storeQuery(for: entity, in: coordinator.schema)
        let store = coordinator.storeIdentifier
        if !request.includesPendingChanges || !hasPendingChanges(affecting: query) {
            return try rowSource.baseKeys(query).map {
                ObjectID(unchecked: AnyObjectID(storeIdentifier: store, entityName: entity.name, primaryKey: $0))
            }
        }
        return try matchingRows(query).map {
            ObjectID(unchecked: AnyObjectID(storeIdentifier: store, entityName: entity.name, primaryKey: $0.row.key))
        }
    }

    /// How many objects a fetch would return (pending changes included, like the fetch).
    public func count<Model: PersistentModel>(for request: FetchRequest<Model>) throws(LoomError) -> Int {
        ConcurrencyDebugging.check(self, #function)
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        if let hierarchy = hierarchyFetch(of: entity, request) { return try hierarchy.count(request) }
        return try count(for: request, of: entity)
    }

    /// How many objects of `entity` alone a fetch would return.
    func count<Model: PersistentModel>(for request: FetchRequest<Model>, of entity: EntityDescription) throws(LoomError) -> Int {
        let query = try request.storeQuery(for: entity, in: coordinator.schema)
        if !request.includesPendingChanges || !hasPendingChanges(affecting: query) {
            return try rowSource.baseCount(query)
        }
        return try matchingRows(query).count
    }

    /// The fetch across a hierarchy that a request of `entity` needs, or `nil` when the
    /// entity's own table answers it (no sub-entities, or ``FetchRequest/includesSubentities`` off).
    private func hierarchyFetch<Model: PersistentModel>(of entity: EntityDescription, _ request: FetchRequest<Model>) -> HierarchyFetch? {
        let entities = coordinator.schema.concreteEntities(of: entity, includingSubentities: request.includesSubentities)
        if entities.count == 1, entities[0] === entity { return nil }
        return HierarchyFetch(context: self, entities: entities)
    }

    /// The objects of an entity named at run time; see ``DynamicFetchRequest``.
    public func fetch(_ request: DynamicFetchRequest) throws(LoomError) -> [any BackedObject] {
        ConcurrencyDebugging.check(self, #function)
        let query = try request.storeQuery(in: coordinator.schema)
        return try fetchObjects(query, includesPendingChanges: request.includesPendingChanges, asFaults: false)
    }

    func fetchObjects(_ query: StoreQuery, includesPendingChanges: Bool, asFaults: Bool) throws(LoomError) -> [any BackedObject] {
        try ObjectMaterializer.fetchObjects(query, includesPendingChanges: includesPendingChanges, asFaults: asFaults, in: self)
    }

    /// The store's answer corrected by this context's unsaved changes, sorted and windowed
    /// (see ``PendingChangeEvaluator``).
    func matchingRows(_ query: StoreQuery) throws(LoomError) -> [(row: StoreRow, object: (any BackedObject)?)] {
        try pendingChangeEvaluator.matchingRows(query)
    }

    /// How rows read by a query that began at `generation` become faults; see
    /// ``ObjectMaterializer/faultMaterialization(readAt:in:)``.
    func faultMaterialization(readAt generation: UInt64) -> Materialization {
        ObjectMaterializer.faultMaterialization(readAt: generation, in: self)
    }

    /// The registered object for a row, or a new one; see ``ObjectMaterializer/materialize(_:of:as:in:)``.
    func materialize(_ row: StoreRow, of entity: EntityDescription, as form: Materialization) -> any BackedObject {
        ObjectMaterializer.materialize(row, of: entity, as: form, in: self)
    }

    /// Whether fetched faults keep their rows instead of filling from the shared cache: always,
    /// unless a ``stalenessInterval`` asks that a fault's data be no older than some age when
    /// it fires (then the cache, which knows each row's age, serves it). Always for a context
    /// pinned to a query generation: its rows are its generation's, not the cache's.
    var faultsHoldFetchedRows: Bool { stalenessInterval < 0 || queryGeneration != nil }
}
