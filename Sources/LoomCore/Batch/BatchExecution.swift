import Foundation

/// How batch requests run: inside one store write transaction (so a failure anywhere leaves the
/// store as it was), in chunks of ``BatchWriter/chunkSize`` objects, each chunk written as one
/// store change set — the same change sets a context's save writes, so that versions advance,
/// the history records every change, and the shared cache forgets what changed exactly as
/// after a save. The history records the request as one transaction, as it does a save (each
/// chunk after the first continues it: ``StoreChangeSet/continuesHistoryTransaction``). Each
/// chunk's changes are published like a save's, with the rows of the entities contexts hold,
/// built from what the chunk read and wrote (``BatchWriter``): merging contexts read nothing.
///
/// It keeps no state of its own: the context makes one for each request
/// (``ManagedObjectContext/execute(_:)-(BatchDeleteRequest<Model>)`` and its siblings) and calls
/// it on its own isolation; it is not `Sendable`.
struct BatchExecution {
    // Strong: the value lives for one call, and an unowned reference is checked at every use.
    let context: ManagedObjectContext

    /// The body of ``ManagedObjectContext/execute(_:)-(BatchDeleteRequest<Model>)``. A request
    /// of an entity with sub-entities deletes in each concrete entity's table, in the same
    /// store transaction.
    func execute<Model: PersistentModel>(_ request: BatchDeleteRequest<Model>) throws(LoomError) -> BatchResult {
        let entity = try context.coordinator.schema.requireEntity(named: Model.entity.name)
        let entities = context.coordinator.schema.concreteEntities(of: entity)
        var queries: [StoreQuery] = []
        for concrete in entities {
            if let ids = request.objectIDs {
                // A flat entity's IDs are all its own; in a hierarchy each names its entity.
                let keys = entities.count == 1 ? ids.map(\.primaryKey) : ids.filter { $0.entityName == concrete.name }.map(\.primaryKey)
                if keys.isEmpty && entities.count > 1 { continue }
                queries.append(StoreQuery(entity: concrete, predicate: .isIn(.primaryKey, keys.map { .integer($0) })))
            } else {
                queries.append(StoreQuery(entity: concrete, predicate: try FetchRequest<Model>(predicate: request.predicate).storeQuery(for: concrete, in: context.coordinator.schema).predicate))
            }
        }
        return try runBatch(request.resultType) { writer throws(LoomError) in
            for query in queries {
                let matched = try context.coordinator.store.fetchKeys(query)
                let all = Set(matched)
                for chunk in matched.chunked(by: BatchWriter.chunkSize) { try writer.delete(Array(chunk), of: query.entity, requestKeys: all) }
            }
        }
    }

    /// The body of ``ManagedObjectContext/execute(_:)-(BatchUpdateRequest<Model>)``. A request
    /// of an entity with sub-entities updates each concrete entity's table, in the same store
    /// transaction.
    func execute<Model: PersistentModel>(_ request: BatchUpdateRequest<Model>) throws(LoomError) -> BatchResult {
        let schema = context.coordinator.schema
        let entity = try schema.requireEntity(named: Model.entity.name)
        let entities = schema.concreteEntities(of: entity)
        var updates: [(query: StoreQuery, values: [(slot: Int, value: StoredValue)])] = []
        // An abstract entity with no concrete sub-entity is still checked, and updates nothing.
        for concrete in entities.isEmpty ? [entity] : entities {
            let query = try FetchRequest<Model>(predicate: request.predicate).storeQuery(for: concrete, in: schema)
            var targets = KeyPathTargets()
            let values = try BatchWriter.resolve(request.values, of: concrete, row: nil, targets: &targets)
            try BatchWriter.checkRelatable(values, of: concrete, in: schema)
            for (slot, value) in values where value.isNull && !BatchWriter.isOptional(slot, of: concrete) {
                throw LoomError(.missingRequiredValue, "A batch update cannot set \(concrete.name).\(concrete.storedValueName(at: slot)) to nil: it is required.",
                                entity: concrete.name, attributes: [concrete.storedValueName(at: slot)])
            }
            if !concrete.isAbstract { updates.append((query, values)) }
        }
        return try runBatch(request.resultType) { writer throws(LoomError) in
            for (query, values) in updates where !values.isEmpty {
                let matched = try context.coordinator.store.fetchKeys(query)
                for chunk in matched.chunked(by: BatchWriter.chunkSize) { try writer.update(Array(chunk), of: query.entity, setting: values) }
            }
        }
    }

    /// The body of ``ManagedObjectContext/execute(_:)-(BatchInsertRequest<Model>)``.
    func execute<Model: PersistentModel>(_ request: BatchInsertRequest<Model>) throws(LoomError) -> BatchResult {
        let entity = try context.coordinator.schema.requireEntity(named: Model.entity.name)
        // Inserting rows of a parent is fine (they are its own); of an abstract entity, not.
        try context.coordinator.schema.requireOwnTable(of: entity, for: "A batch insert", includingSubentities: false)
        var constraint: [Int] = []
        if let paths = request.uniquingBy {
            for path in paths {
                guard let name = Model.loomPropertyName(for: path), let index = entity.attributeIndex(named: name) else {
                    throw LoomError(.invalidRequest, "A key path to unique a batch insert of \(entity.name) by does not name one of its attributes.", entity: entity.name)
                }
                constraint.append(index)
            }
        } else if let first = entity.uniquenessConstraints.first {
            constraint = first.compactMap { entity.attributeIndex(named: $0) }
            if constraint.count != first.count { constraint = [] }   // a constraint on a relationship: not by values
        }
        if constraint.isEmpty && request.uniquing != .fail && request.uniquingBy == nil {
            throw LoomError(.invalidRequest, "A batch insert of \(entity.name) that updates or ignores matching objects needs a uniqueness constraint on attributes, or uniquingBy key paths.", entity: entity.name)
        }
        let rows = request.rows
        var targets = KeyPathTargets()
        return try runBatch(request.resultType, rowNaming: request.rowNaming) { writer throws(LoomError) in
            for indexes in Array(rows.indices).chunked(by: BatchWriter.chunkSize) {
                var chunk: [(row: Int, values: [(slot: Int, value: StoredValue)])] = []
                for i in indexes {
                    let values = try BatchWriter.resolve(rows[i], of: entity, row: i, naming: request.rowNaming, targets: &targets)
                    try BatchWriter.checkRelatable(values, of: entity, in: context.coordinator.schema)
                    chunk.append((i, values))
                }
                try writer.insert(chunk, of: entity, uniquingBy: constraint, uniquing: request.uniquing)
            }
        }
    }

    /// Runs `body` with a writer inside one store write transaction, then merges what it
    /// changed into this context. Inside ``PersistentContainer/performExclusiveWrite(_:)`` the
    /// request joins that transaction, and this context merges it before the transaction
    /// commits: if the exclusive write then throws, reset or refresh the context.
    private func runBatch(_ resultType: BatchResultType, rowNaming: BatchRowNaming = BatchRowNaming(), _ body: (BatchWriter) throws(LoomError) -> Void) throws(LoomError) -> BatchResult {
        try context.reportStoreFailures()
        // A context holding no objects, with no one listening, has nothing to merge: its
        // chunks' changes are not kept (a request's heap stays one chunk's).
        let writer = BatchWriter(context: context, listsIDs: resultType == .objectIDs, keepsChanges: !context.identityMap.isEmpty || context.hasEventListeners)
        writer.rowNaming = rowNaming
        do {
            _ = try context.coordinator.write(.batch) { () throws -> Void in try body(writer) }
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store's write transaction failed.", underlying: error)
        }
        // The chunks' events carry the rows this context holds: merging reads nothing.
        if writer.committed { context.merge(writer.events) }
        return writer.result
    }
}
