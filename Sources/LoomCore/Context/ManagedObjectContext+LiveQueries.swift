extension ManagedObjectContext {
    /// A live query without sections: the objects matching `request`, kept current as they
    /// change; see ``LiveQuery``. The first element is the result now, evaluated here (so an
    /// error in the request, or a store failure, is thrown at once).
    ///
    /// Call it on this context's isolation; read the sequence from any task.
    public func liveQuery<Model: PersistentModel>(_ request: FetchRequest<Model>) throws(LoomError) -> LiveQuery<Model, NoSection> {
        let channel = try LiveQueryChannel<Model, NoSection>(sectionKeyPath: nil, in: self)
        try startLiveQuery(request, sectionKeyPath: nil, sink: channel)
        return LiveQuery(channel: channel)
    }

    /// A live query in sections: the objects matching `request`, grouped by the value of
    /// `sectionKeyPath` (an attribute, or one reached through to-one relationships:
    /// `\.author?.name`), kept current as they change; see ``LiveQuery``.
    ///
    /// Sections are ordered by their key, ascending with `nil` first, whatever the request's
    /// sort (the key sorts first, as in Core Data); within a section, objects keep the request's
    /// order. The first element is the result now, evaluated here.
    ///
    /// Call it on this context's isolation; read the sequence from any task.
    ///
    /// - Throws: ``LoomError/Code/unsupportedSort`` if the key path does not lead to an
    ///   attribute that sorts like its values; what a fetch of `request` throws.
    public func liveQuery<Model: PersistentModel, SectionKey: Hashable & Sendable>(
        _ request: FetchRequest<Model>, sectionedBy sectionKeyPath: any KeyPath<Model, SectionKey> & Sendable
    ) throws(LoomError) -> LiveQuery<Model, SectionKey> {
        let channel = try LiveQueryChannel<Model, SectionKey>(sectionKeyPath: sectionKeyPath, in: self)
        try startLiveQuery(request, sectionKeyPath: sectionKeyPath, sink: channel)
        return LiveQuery(channel: channel)
    }

    /// Registers a live query's engine and evaluates it once (its first result goes to `sink`).
    ///
    /// A request of an entity with sub-entities (unless `includesSubentities` is off) or of an
    /// abstract one lists the objects of each concrete entity it covers, as a fetch does.
    func startLiveQuery<Model: PersistentModel>(_ request: FetchRequest<Model>, sectionKeyPath: AnyKeyPath?, sink: any LiveQuerySink) throws(LoomError) {
        ConcurrencyDebugging.check(self, #function)
        let schema = coordinator.schema
        let entity = try schema.requireEntity(named: Model.entity.name)
        var query = try request.storeQuery(for: entity, in: schema)
        let covered = schema.concreteEntities(of: entity, includingSubentities: request.includesSubentities)
        var parts: [LiveQueryEngine.Part] = []
        for member in covered { parts.append(LiveQueryEngine.Part(entity: member, query: member === entity ? query : try request.storeQuery(for: member, in: schema))) }
        if let sectionKeyPath {
            guard let (path, index) = FetchRequest<Model>.sortTarget(sectionKeyPath, entity, coordinator.schema) else {
                throw LoomError(.unsupportedSort, "A live query's section key path on \(entity.name) does not name a stored attribute; use a key path to one of \(entity.attributes.map(\.name).joined(separator: ", ")), or to an attribute of an object reached through to-one relationships (\\.author?.name).", entity: entity.name)
            }
            let owner = path.last?.destination ?? entity
            guard owner.attributes[index].type.isOrderable else {
                throw LoomError(.unsupportedSort, "\(owner.name).\(owner.attributes[index].name) is \(English.a(owner.attributes[index].type.rawValue)) attribute, whose stored form does not sort like its values, so it cannot key sections.", entity: entity.name, attributes: [owner.attributes[index].name])
            }
            let sectionKey = SortKey(attributeIndex: index, ascending: true, relationshipPath: path.map(\.reference))
            query.sortKeys.insert(sectionKey, at: 0)
            // An inherited attribute has the same index in every sub-entity.
            for i in parts.indices { parts[i].query.sortKeys.insert(sectionKey, at: 0) }
        }
        let spans = parts.count != 1 || parts[0].entity !== entity
        let engine = LiveQueryEngine(context: self, query: query, parts: spans ? parts : nil, sectioned: sectionKeyPath != nil, includesPendingChanges: request.includesPendingChanges)
        engine.sink = sink
        try engine.start()
        observation.add(engine)
        // Saves then carry the rows of the objects it may list.
        for part in engine.parts { inbox.noteQueried(ObjectIdentifier(part.entity)) }
    }
}
