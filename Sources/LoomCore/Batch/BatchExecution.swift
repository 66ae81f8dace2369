import Foundation

/// How batch requests run: inside one store write transaction (so a failure anywhere leaves the
/// store as it was), in chunks of ``BatchWriter/chunkSize`` objects, each chunk written as one
/// store change set — the same change sets a context's save writes, so that versions advance,
/// the history records every change, and the shared cache forgets what changed exactly as
/// after a save. The history records the request as one transaction, as it does a save (each
/// chunk after the first continues it: ``StoreChangeSet/continuesHistoryTransaction``). Each
/// chunk's changes are published like a save's, with the rows of the entities contexts hold,
/// built from what the chunk read and wrote (``BatchWriter``): merging contexts read nothing.
extension ManagedObjectContext {
    /// Deletes, in the store, every object the request matches, with the delete rules of their
    /// relationships applied there (cascade, nullify, deny); see ``BatchDeleteRequest``.
    ///
    /// Runs on this context's isolation, like ``save()``. When it returns, this context has
    /// merged the deletion (its objects that were deleted are deleted, those whose relationships
    /// changed are refreshed, `objectsDidChange` was posted, live queries updated), and every
    /// other context that merges automatically gets it as it gets a save. Unsaved changes of
    /// this context are neither saved nor lost. A deny rule holding, a store failure or a
    /// nullified required relationship throws, and the store is left as it was.
    @discardableResult
    public func execute<Model: PersistentModel>(_ request: BatchDeleteRequest<Model>) throws(LoomError) -> BatchResult {
        ConcurrencyDebugging.check(self, "execute(_:)")
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        let query: StoreQuery
        if let keys = request.keys {
            query = StoreQuery(entity: entity, predicate: .isIn(.primaryKey, keys.map { .integer($0) }))
        } else {
            query = try FetchRequest<Model>(predicate: request.predicate).storeQuery(for: entity, in: coordinator.schema)
        }
        return try runBatch(request.resultType) { writer throws(LoomError) in
            let matched = try coordinator.store.fetchKeys(StoreQuery(entity: entity, predicate: query.predicate))
            let all = Set(matched)
            for chunk in matched.chunked(by: BatchWriter.chunkSize) { try writer.delete(Array(chunk), of: entity, requestKeys: all) }
        }
    }

    /// Sets, in the store, the request's attributes on every object it matches; see
    /// ``BatchUpdateRequest``.
    ///
    /// Runs on this context's isolation, like ``save()``, and merges like
    /// ``execute(_:)-(BatchDeleteRequest<Model>)``: this context's unsaved edits stay on top. A
    /// value of the wrong type, `nil` for a required attribute or a broken uniqueness
    /// constraint throws, and the store is left as it was.
    @discardableResult
    public func execute<Model: PersistentModel>(_ request: BatchUpdateRequest<Model>) throws(LoomError) -> BatchResult {
        ConcurrencyDebugging.check(self, "execute(_:)")
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
        let query = try FetchRequest<Model>(predicate: request.predicate).storeQuery(for: entity, in: coordinator.schema)
        var targets = KeyPathTargets()
        let values = try BatchWriter.resolve(request.values, of: entity, row: nil, targets: &targets)
        try BatchWriter.checkRelatable(values, of: entity, in: coordinator.schema)
        for (slot, value) in values where value.isNull && !BatchWriter.isOptional(slot, of: entity) {
            throw LoomError(.missingRequiredValue, "A batch update cannot set \(entity.name).\(entity.storedValueName(at: slot)) to nil: it is required.",
                            entity: entity.name, attributes: [entity.storedValueName(at: slot)])
        }
        return try runBatch(request.resultType) { writer throws(LoomError) in
            guard !values.isEmpty else { return }
            let matched = try coordinator.store.fetchKeys(query)
            for chunk in matched.chunked(by: BatchWriter.chunkSize) { try writer.update(Array(chunk), of: entity, setting: values) }
        }
    }

    /// Inserts the request's rows in the store, uniquing them as it says; see
    /// ``BatchInsertRequest``.
    ///
    /// Runs on this context's isolation, like ``save()``, and merges like
    /// ``execute(_:)-(BatchDeleteRequest<Model>)``. A row with a value of the wrong type,
    /// without a value for a required attribute, or (with ``BatchInsertRequest/Uniquing/fail``)
    /// matching an existing object throws, naming the row, and the store is left as it was.
    @discardableResult
    public func execute<Model: PersistentModel>(_ request: BatchInsertRequest<Model>) throws(LoomError) -> BatchResult {
        ConcurrencyDebugging.check(self, "execute(_:)")
        let entity = try coordinator.schema.requireEntity(named: Model.entity.name)
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
                    try BatchWriter.checkRelatable(values, of: entity, in: coordinator.schema)
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
        try reportStoreFailures()
        // A context holding no objects, with no one listening, has nothing to merge: its
        // chunks' changes are not kept (a request's heap stays one chunk's).
        let writer = BatchWriter(context: self, listsIDs: resultType == .objectIDs, keepsChanges: !identityMap.isEmpty || hasEventListeners)
        writer.rowNaming = rowNaming
        do {
            _ = try coordinator.write(.batch) { () throws -> Void in try body(writer) }
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store's write transaction failed.", underlying: error)
        }
        // The chunks' events carry the rows this context holds: merging reads nothing.
        if writer.committed { merge(writer.events) }
        return writer.result
    }
}
