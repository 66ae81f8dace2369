import Foundation

/// How batch requests run: inside one store write transaction (so a failure anywhere leaves the
/// store as it was), in chunks of ``BatchWriter/chunkSize`` objects, each chunk written as one
/// store change set — the same change sets a context's save writes, so that versions advance,
/// the history records every change, and the shared cache forgets what changed exactly as
/// after a save. The history records the request as one transaction, as it does a save (each
/// chunk after the first continues it: ``StoreChangeSet/continuesHistoryTransaction``). Each
/// chunk's changes are published like a save's, carrying IDs and no rows: merging contexts read
/// the rows of the objects they hold.
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
        if writer.committed { mergeBatchChanges(writer.changes) }
        return writer.result
    }
}

/// Writes one batch request's chunks as store change sets, and collects what changed.
final class BatchWriter {
    /// Objects per change set. It bounds each change set, not the request: the result and the
    /// merge still hold every changed object's ID (see the issue note).
    static let chunkSize = 10_000

    let context: ManagedObjectContext
    var result = BatchResult()
    /// Each committed chunk's changes, merged chunk by chunk (no union of them all is built).
    var changes: [ObjectChanges] = []
    /// Whether a chunk changed the store.
    var committed = false
    /// Whether a chunk wrote changes a store records in its history (a non-empty change set).
    private var recordedHistory = false
    /// Whether the result lists IDs (``BatchResultType/objectIDs``) or only counts.
    let listsIDs: Bool
    /// Whether the executing context merges the chunks' changes (see `runBatch`).
    let keepsChanges: Bool
    /// How errors name a batch insert's rows.
    var rowNaming = BatchRowNaming()
    private var coordinator: PersistentStoreCoordinator { context.coordinator }
    private var store: any PersistentStore { context.coordinator.store }

    init(context: ManagedObjectContext, listsIDs: Bool, keepsChanges: Bool) {
        self.context = context
        self.listsIDs = listsIDs
        self.keepsChanges = keepsChanges
    }

    private func noteInserted(_ id: AnyObjectID) {
        result.insertedCount += 1
        if listsIDs { result.inserted.append(id) }
    }

    private func noteUpdated(_ id: AnyObjectID) {
        result.updatedCount += 1
        if listsIDs { result.updated.append(id) }
    }

    private func noteDeleted(_ id: AnyObjectID) {
        result.deletedCount += 1
        if listsIDs { result.deleted.append(id) }
    }

    private func id(_ entity: EntityDescription, _ key: Int64) -> AnyObjectID {
        AnyObjectID(storeIdentifier: coordinator.storeIdentifier, entityName: entity.name, primaryKey: key)
    }

    /// Encodes a request's values as stored values by slot, checking their types.
    static func resolve<Model: PersistentModel>(_ values: [BatchValue<Model>], of entity: EntityDescription, row: Int?, naming: BatchRowNaming = BatchRowNaming(),
                                                targets: inout KeyPathTargets) throws(LoomError) -> [(slot: Int, value: StoredValue)] {
        var resolved: [(slot: Int, value: StoredValue)] = []
        resolved.reserveCapacity(values.count)
        for value in values {
            let slot: Int
            let stored: StoredValue
            switch targets.target(for: value.keyPath, of: entity, in: Model.self) {
            case .toOne(let fk) where value.related != nil:
                slot = fk
                stored = value.related!.key.map { .integer($0) } ?? .null
            case .attribute(let index, let type, let isOptional) where value.related == nil:
                if let known = value.stored {
                    stored = known
                } else {
                    do { stored = try entity.attributes[index].codec.encode(value.value) } catch {
                        let name = entity.attributes[index].name
                        throw LoomError(.typeMismatch, "A batch request on \(entity.name)\(naming.place(row)) gives \(name) a value that cannot be stored as \(entity.attributes[index].valueTypeName): \(error.message)", entity: entity.name, attributes: [name])
                    }
                }
                guard type.accepts(stored) || (stored.isNull && isOptional) else {
                    let name = entity.attributes[index].name
                    throw LoomError(.typeMismatch, "A batch request on \(entity.name)\(naming.place(row)) gives \(name) \(English.a(stored.kindName)), which is not a valid \(type.rawValue).", entity: entity.name, attributes: [name])
                }
                slot = index
            default:
                if value.related != nil {
                    throw LoomError(.invalidRequest, "A batch request on \(entity.name)\(naming.place(row)) relates through a key path that is not one of its to-one relationships.", entity: entity.name)
                }
                throw LoomError(.invalidRequest, "A batch request on \(entity.name)\(naming.place(row)) names a key path that is not one of its attributes (\(entity.attributes.map(\.name).joined(separator: ", "))); set a to-one relationship with relate(_:to:).", entity: entity.name)
            }
            // A later value for the same slot wins.
            if let earlier = resolved.firstIndex(where: { $0.slot == slot }) { resolved.remove(at: earlier) }
            resolved.append((slot, stored))
        }
        return resolved
    }

    /// Whether slot `slot` of `entity` may hold NULL.
    static func isOptional(_ slot: Int, of entity: EntityDescription) -> Bool {
        switch entity.storedValue(at: slot) {
        case .attribute(let a): a.isOptional
        case .foreignKey(let r): r.isOptional
        case .order: true
        }
    }

    /// Checks that every object a chunk relates to exists, and notes the objects whose to-many
    /// inverse gains (`new`) or loses (`old`) a member, for the history.
    private func checkRelated(_ changes: [(row: Int?, key: Int64?, slot: Int, old: StoredValue, new: StoredValue)], of entity: EntityDescription,
                              owners: inout [(entity: EntityDescription, key: Int64, relationships: [String])], chunk: inout ObjectChanges) throws(LoomError) {
        let schema = coordinator.schema
        var wanted: [Int: [Int64]] = [:]   // relationship index → destination keys
        for change in changes {
            guard case .foreignKey(let relationship) = entity.storedValue(at: change.slot), let j = entity.relationshipIndex(named: relationship.name) else { continue }
            if case .integer(let key) = change.new { wanted[j, default: []].append(key) }
        }
        for (j, keys) in wanted {
            let r = schema.relationship(j, of: entity)
            let found = Set(try store.rows(of: r.destination, keys: Array(Set(keys))).map(\.key))
            guard let missing = keys.first(where: { !found.contains($0) }) else { continue }
            let row = changes.first { $0.slot == entity.storedValueIndex(ofRelationship: j) && $0.new == .integer(missing) }?.row
            let place = row.map { rowNaming.name($0, of: entity.name) } ?? "A batch update of \(entity.name)"
            throw LoomError(.objectNotFound, "\(place) relates \(r.description.name) to \(r.destination.name)/\(missing), which does not exist.",
                            entity: entity.name, attributes: [r.description.name], objectID: id(r.destination, missing))
        }
        for change in changes where change.old != change.new {
            guard case .foreignKey(let relationship) = entity.storedValue(at: change.slot), let j = entity.relationshipIndex(named: relationship.name) else { continue }
            let r = schema.relationship(j, of: entity)
            for value in [change.old, change.new] {
                guard case .integer(let other) = value else { continue }
                owners.append((r.destination, other, [r.inverse.name]))
                let id = id(r.destination, other)
                chunk.updated.insert(id)
                chunk.changedProperties[id, default: []].insert(r.inverse.name)
            }
        }
    }

    /// Refuses relating through a to-one whose inverse a batch request cannot keep in step: a
    /// to-one (the other object's own foreign key) or an ordered to-many (its order).
    static func checkRelatable(_ values: [(slot: Int, value: StoredValue)], of entity: EntityDescription, in schema: Schema) throws(LoomError) {
        let attributeCount = entity.attributes.count
        for (slot, _) in values where slot >= attributeCount {
            guard case .foreignKey(let relationship) = entity.storedValue(at: slot), let j = entity.relationshipIndex(named: relationship.name) else { continue }
            let inverse = schema.relationship(j, of: entity).inverse
            if inverse.kind != .toMany {
                throw LoomError(.invalidRequest, "A batch request cannot set \(entity.name).\(relationship.name): its inverse \(inverse.name) is \(inverse.kind == .toOne ? "a to-one (one-to-one)" : "an ordered to-many"), which a batch request does not keep in step; set it through a context.",
                                entity: entity.name, attributes: [relationship.name])
            }
        }
    }

    /// Applies one chunk's change set and publishes it like a save.
    private func commit(_ set: StoreChangeSet, _ chunk: ObjectChanges) throws(LoomError) {
        guard !set.isEmpty || !set.relationshipOwners.isEmpty else { return }
        var set = set
        set.author = context.transactionAuthor
        set.contextName = context.name
        // One request, one history transaction: the chunks after the first that recorded
        // history continue it.
        set.continuesHistoryTransaction = recordedHistory
        let receipt = try coordinator.save(set)
        if !set.isEmpty { recordedHistory = true }
        var event: SaveEvent?
        if coordinator.hasInboxes(besides: context.inbox) {
            event = SaveEvent(number: receipt.sequence, changes: chunk, rows: [:], origin: ObjectIdentifier(context.inbox), mergesIntoViewContext: true)
            event!.isRemote = true   // carries IDs, not rows: merging contexts read the rows they need
        }
        coordinator.publish(event, for: receipt)
        committed = true
        if keepsChanges { changes.append(chunk) }
    }

    // MARK: Update

    func update(_ keys: [Int64], of entity: EntityDescription, setting values: [(slot: Int, value: StoredValue)]) throws(LoomError) {
        var set = StoreChangeSet()
        var chunk = ObjectChanges()
        var related: [(row: Int?, key: Int64?, slot: Int, old: StoredValue, new: StoredValue)] = []
        for row in try store.rows(of: entity, keys: keys) {
            let changed = values.filter { row.values[$0.slot] != $0.value }
            guard !changed.isEmpty else { result.unchanged += 1; continue }
            set.updates.append(.init(entity: entity, key: row.key, expectedVersion: row.version, changes: changed.map { ($0.slot, $0.value) }))
            let id = id(entity, row.key)
            chunk.updated.insert(id)
            chunk.changedProperties[id] = Set(changed.map { entity.storedValueName(at: $0.slot) })
            noteUpdated(id)
            for (slot, value) in changed where slot >= entity.attributes.count { related.append((nil, row.key, slot, row.values[slot], value)) }
        }
        try checkRelated(related, of: entity, owners: &set.relationshipOwners, chunk: &chunk)
        try commit(set, chunk)
    }

    // MARK: Insert

    func insert<Model: PersistentModel>(_ rows: [(row: Int, values: [(slot: Int, value: StoredValue)])], of entity: EntityDescription,
                                        uniquingBy constraint: [Int], uniquing: BatchInsertRequest<Model>.Uniquing) throws(LoomError) {
        // The saved objects the rows match, by their constrained values: one query per chunk.
        // Rows with a nil constrained value never match (NULLs never conflict, as in SQL).
        func uniqueValues(_ values: [(slot: Int, value: StoredValue)]) -> [StoredValue]? {
            guard !constraint.isEmpty else { return nil }
            var found: [StoredValue] = []
            for slot in constraint {
                guard let value = values.last(where: { $0.slot == slot })?.value, !value.isNull else { return nil }
                found.append(value)
            }
            return found
        }
        var existing: [[StoredValue]: StoreRow] = [:]
        let wanted = rows.compactMap { uniqueValues($0.values) }
        if !wanted.isEmpty {
            // By the constraint's first attribute (one IN list, whatever the constraint's width);
            // the rows whose other attributes differ match no row below.
            let predicate = PredicateNode.isIn(.attribute(constraint[0]), Array(Set(wanted.map { $0[0] })))
            for row in try store.fetch(StoreQuery(entity: entity, predicate: predicate)) {
                existing[constraint.map { row.values[$0] }] = row
            }
        }

        var newRows: [(row: Int, values: [StoredValue])] = []
        var newByUnique: [[StoredValue]: Int] = [:]          // index in newRows
        var updates: [Int64: (version: Int64, values: [StoredValue], saved: [StoredValue], changed: Set<Int>, row: Int)] = [:]
        var updateOrder: [Int64] = []
        // Where each row ended: a saved object's key, or (negative) the index of a new row + 1.
        var ends: [Int64] = []
        for (row, values) in rows {
            let unique = uniqueValues(values)
            if let unique, let index = newByUnique[unique] {
                // An earlier row of this request inserts the same object.
                switch uniquing {
                case .fail: throw duplicate(entity, row: row, constraint)
                case .ignore:
                    result.unchanged += 1
                    result.rows.unchanged += 1
                case .update:
                    var changed = false
                    for (slot, value) in values where newRows[index].values[slot] != value {
                        newRows[index].values[slot] = value
                        changed = true
                    }
                    result.rows.count(changed: changed)
                }
                ends.append(-Int64(index) - 1)
                continue
            }
            if let unique, let saved = existing[unique] {
                ends.append(saved.key)
                switch uniquing {
                case .fail: throw duplicate(entity, row: row, constraint, existing: saved.key)
                case .ignore:
                    result.unchanged += 1
                    result.rows.unchanged += 1
                case .update:
                    var entry = updates[saved.key] ?? (saved.version, saved.values, saved.values, [], row)
                    if updates[saved.key] == nil { updateOrder.append(saved.key) }
                    var changed = false
                    for (slot, value) in values where entry.values[slot] != value {
                        entry.values[slot] = value
                        entry.changed.insert(slot)
                        changed = true
                    }
                    updates[saved.key] = entry
                    result.rows.count(changed: changed)
                }
                continue
            }
            var full = entity.nullValues
            for (index, make) in entity.defaultMakers { if let value = make() { full[index] = value } }
            for (slot, value) in values { full[slot] = value }
            if let unique { newByUnique[unique] = newRows.count }
            ends.append(-Int64(newRows.count) - 1)
            newRows.append((row, full))
            result.rows.inserted += 1
        }

        var set = StoreChangeSet()
        var chunk = ObjectChanges()
        chunk.inserted.reserveCapacity(newRows.count)
        chunk.updated.reserveCapacity(updateOrder.count)
        set.inserts.reserveCapacity(newRows.count)
        var related: [(row: Int?, key: Int64?, slot: Int, old: StoredValue, new: StoredValue)] = []
        for key in updateOrder {
            let entry = updates[key]!
            guard !entry.changed.isEmpty else { result.unchanged += 1; continue }
            let slots = entry.changed.sorted()
            set.updates.append(.init(entity: entity, key: key, expectedVersion: entry.version, changes: slots.map { ($0, entry.values[$0]) }))
            let id = id(entity, key)
            chunk.updated.insert(id)
            chunk.changedProperties[id] = Set(slots.map { entity.storedValueName(at: $0) })
            noteUpdated(id)
            for slot in slots where slot >= entity.attributes.count { related.append((nil, key, slot, entry.saved[slot], entry.values[slot])) }
        }
        var newKeys: [Int64] = []
        if !newRows.isEmpty {
            // The slots that must hold a value, found once: the rows are only looked at there.
            var required: [Int] = []
            for (i, attribute) in entity.attributes.enumerated() where !attribute.isOptional { required.append(i) }
            for (j, relationship) in entity.relationships.enumerated() where relationship.kind == .toOne && !relationship.isOptional {
                if let slot = entity.storedValueIndex(ofRelationship: j) { required.append(slot) }
            }
            for (row, values) in newRows where required.contains(where: { values[$0].isNull }) { try checkRequired(values, of: entity, row: row) }
            newKeys = Array(try store.allocateKeys(for: entity, count: newRows.count))
            for ((row, values), key) in zip(newRows, newKeys) {
                set.inserts.append(.init(entity: entity, key: key, values: values))
                let id = id(entity, key)
                chunk.inserted.insert(id)
                noteInserted(id)
                for slot in entity.attributes.count..<entity.storedValueCount where !values[slot].isNull { related.append((row, nil, slot, .null, values[slot])) }
            }
        }
        try checkRelated(related, of: entity, owners: &set.relationshipOwners, chunk: &chunk)
        if listsIDs { for end in ends { result.objectIDs.append(id(entity, end >= 0 ? end : newKeys[Int(-end - 1)])) } }
        do {
            try commit(set, chunk)
        } catch {
            // A store's refusal names an object: named here by its row.
            let conflict = error.storeConflicts.first { $0.entity === entity }?.key
            let key = conflict ?? (error.objectID?.entityName == entity.name ? error.objectID?.primaryKey : nil)
            guard let key, let row = newKeys.firstIndex(of: key).map({ newRows[$0].row }) ?? updates[key]?.row else { throw error }
            var named = error
            named.message = "\(rowNaming.name(row, of: entity.name)): \(error.message)"
            throw named
        }
    }

    private func checkRequired(_ values: [StoredValue], of entity: EntityDescription, row: Int) throws(LoomError) {
        for (i, attribute) in entity.attributes.enumerated() where values[i].isNull && !attribute.isOptional {
            throw LoomError(.missingRequiredValue, "\(rowNaming.name(row, of: entity.name)) has no value for \(attribute.name), which is required and has no default.",
                            entity: entity.name, attributes: [attribute.name])
        }
        for (j, relationship) in entity.relationships.enumerated() where relationship.kind == .toOne && !relationship.isOptional {
            if let slot = entity.storedValueIndex(ofRelationship: j), values[slot].isNull {
                throw LoomError(.missingRequiredValue, "\(rowNaming.name(row, of: entity.name)) does not relate its required relationship \(relationship.name); relate it with .relate(\\.\(relationship.name), to: id).",
                                entity: entity.name, attributes: [relationship.name])
            }
        }
    }

    private func duplicate(_ entity: EntityDescription, row: Int, _ constraint: [Int], existing: Int64? = nil) -> LoomError {
        // The values are not in the message (they may be personal data); the row and the object are.
        let names = constraint.map { entity.attributes[$0].name }
        let other = existing.map { "\(entity.name)/\($0) has" } ?? "an earlier row of the request has"
        return LoomError(.uniquenessViolation, "\(rowNaming.name(row, of: entity.name)) matches an object by its unique \(names.joined(separator: ", ")): \(other) the same; use uniquing .update or .ignore, or leave the row out.",
                         entity: entity.name, attributes: names, objectID: existing.map { id(entity, $0) })
    }

    // MARK: Delete

    /// Deletes `keys` of `entity` and what their cascade rules reach, nullifies what their
    /// nullify rules reach, and refuses the chunk (and so the request) where a deny rule still
    /// holds an object. `requestKeys` are every key the request deletes of `entity` (objects of
    /// later chunks are not held by a deny rule).
    func delete(_ keys: [Int64], of entity: EntityDescription, requestKeys: Set<Int64>) throws(LoomError) {
        let schema = coordinator.schema
        // The objects to delete: the chunk, then what its cascade rules reach, in waves, with
        // one query per relationship per wave.
        var doomed: [ObjectIdentifier: DoomedRows] = [:]
        func isDoomed(_ e: EntityDescription, _ key: Int64) -> Bool {
            doomed[ObjectIdentifier(e)]?.rows[key] != nil || (e === entity && requestKeys.contains(key))
        }
        // Each wave holds rows (read once: a cascade through a to-many reads the destinations'
        // rows with the relationship) or keys still to read. What a cascade found is kept for
        // the rules below.
        var known: [RelationshipKey: [(owner: Int64, other: Int64)]] = [:]
        var wave: [(EntityDescription, rows: [StoreRow]?, keys: [Int64])] = [(entity, nil, keys)]
        while let (e, given, keys) = wave.popLast() {
            var rows: [StoreRow]
            let found = doomed[ObjectIdentifier(e)]
            if let given { rows = given } else { rows = try store.rows(of: e, keys: found.map { found in keys.filter { found.rows[$0] == nil } } ?? keys) }
            if let found { rows.removeAll { found.rows[$0.key] != nil } }
            guard !rows.isEmpty else { continue }
            let entry = found ?? DoomedRows(e)
            doomed[ObjectIdentifier(e)] = entry
            entry.rows.reserveCapacity(entry.rows.count + rows.count)
            for row in rows { entry.rows[row.key] = row }
            for r in schema.relationships(of: e) where r.description.deleteRule == .cascade {
                let destination = doomed[ObjectIdentifier(r.destination)]
                let isNew = { (key: Int64) in destination?.rows[key] == nil }
                if case .foreignKey = r.storage {
                    let related = try relatedKeys(r, rows)
                    known[RelationshipKey(r), default: []].append(contentsOf: related)
                    let next = Array(Set(related.map(\.other))).filter(isNew)
                    if !next.isEmpty { wave.append((r.destination, nil, next)) }
                } else {
                    let related = try store.fetchRelated(r, keys: rows.map(\.key))
                    known[RelationshipKey(r), default: []].append(contentsOf: related.map { ($0.owner, $0.row.key) })
                    var seen = Set<Int64>(minimumCapacity: related.count)
                    let next = related.map(\.row).filter { isNew($0.key) && seen.insert($0.key).inserted }
                    if !next.isEmpty { wave.append((r.destination, next, [])) }
                }
            }
        }

        var set = StoreChangeSet()
        // Every row was read above, in the request's write transaction.
        set.versionsReadInTransaction = true
        var chunk = ObjectChanges()
        // Foreign keys to clear on objects that stay, by entity and key.
        var clears: [ObjectIdentifier: (entity: EntityDescription, slots: [Int64: [(slot: Int, name: String, to: Int64)]])] = [:]
        var owners: [ObjectIdentifier: (entity: EntityDescription, names: [Int64: Set<String>])] = [:]
        func own(_ e: EntityDescription, _ key: Int64, _ name: String) {
            if owners[ObjectIdentifier(e)] == nil { owners[ObjectIdentifier(e)] = (e, [:]) }
            owners[ObjectIdentifier(e)]!.names[key, default: []].insert(name)
        }
        // Each entity's rows by key, in key order: for the rules, then for the deletes.
        let doomedInOrder = doomed.values.sorted { $0.entity.name < $1.entity.name }.map { ($0.entity, $0.rows.values.sorted { $0.key < $1.key }) }
        for (e, rows) in doomedInOrder {
            for r in schema.relationships(of: e) {
                let rule = r.description.deleteRule
                let inverse = schema.relationship(r.inverseIndex, of: r.destination)
                let all: [(owner: Int64, other: Int64)]
                if let found = known[RelationshipKey(r)] { all = found } else { all = try relatedKeys(r, rows) }
                let related = all.filter { !isDoomed(r.destination, $0.other) }
                if rule == .deny, let first = related.first {
                    let count = related.filter { $0.owner == first.owner }.count
                    throw LoomError(.deleteDenied, "\(e.name)/\(first.owner) cannot be deleted by the batch delete: its relationship '\(r.description.name)' (delete rule deny) still holds \(count) object\(count == 1 ? "" : "s"), \(r.destination.name)/\(first.other) first; delete them first or empty the relationship. Nothing was deleted.",
                                    entity: e.name, attributes: [r.description.name], objectID: id(e, first.owner))
                }
                if case .joinTable(let table, let ownColumn, _) = r.storage {
                    for pair in all {
                        let mine = ownColumn == JoinTable.sourceColumn
                        set.linkDeletes.append(.init(table: table, source: mine ? pair.owner : pair.other, target: mine ? pair.other : pair.owner))
                    }
                }
                guard rule != .noAction || r.storage.isJoinTable else { continue }
                for pair in related {
                    switch inverse.storage {
                    case .foreignKey(let slot):
                        // The object that stays points back with a foreign key: cleared.
                        if clears[ObjectIdentifier(r.destination)] == nil { clears[ObjectIdentifier(r.destination)] = (r.destination, [:]) }
                        clears[ObjectIdentifier(r.destination)]!.slots[pair.other, default: []].append((slot, inverse.description.name, pair.owner))
                    default:
                        own(r.destination, pair.other, inverse.description.name)
                    }
                }
            }
        }
        // Clear foreign keys on the objects that stay (reading their versions; one that points
        // elsewhere by now is left alone).
        for (e, byKey) in clears.values.sorted(by: { $0.entity.name < $1.entity.name }) {
            for row in try store.rows(of: e, keys: byKey.keys.sorted()) {
                var changes: [(index: Int, value: StoredValue)] = []
                var names: Set<String> = []
                for (slot, name, to) in byKey[row.key] ?? [] where row.values[slot] == .integer(to) && changes.allSatisfy({ $0.index != slot }) {
                    let j = e.relationshipIndex(named: name)!
                    if !e.relationships[j].isOptional {
                        throw LoomError(.missingRequiredValue, "The batch delete would leave \(e.name)/\(row.key)'s required relationship '\(name)' empty (the other side's delete rule is nullify); delete it too with a cascade rule, or make the relationship optional. Nothing was deleted.",
                                        entity: e.name, attributes: [name], objectID: id(e, row.key))
                    }
                    changes.append((slot, .null))
                    names.insert(name)
                }
                guard !changes.isEmpty else { continue }
                set.updates.append(.init(entity: e, key: row.key, expectedVersion: row.version, changes: changes))
                let id = id(e, row.key)
                chunk.updated.insert(id)
                chunk.changedProperties[id, default: []].formUnion(names)
                noteUpdated(id)
            }
        }
        for (e, byKey) in owners.values.sorted(by: { $0.entity.name < $1.entity.name }) {
            // Only objects still in the store (an earlier chunk may have deleted one).
            for row in try store.rows(of: e, keys: byKey.keys.sorted()) {
                let names = byKey[row.key] ?? []
                set.relationshipOwners.append((e, row.key, names.sorted()))
                let id = id(e, row.key)
                if chunk.updated.insert(id).inserted { noteUpdated(id) }
                chunk.changedProperties[id, default: []].formUnion(names)
            }
        }
        let doomedCount = doomedInOrder.reduce(0) { $0 + $1.1.count }
        chunk.deleted.reserveCapacity(doomedCount)
        if listsIDs { result.deleted.reserveCapacity(result.deleted.count + doomedCount) }
        set.deletes.reserveCapacity(doomedCount)
        for (e, rows) in doomedInOrder {
            for row in rows {
                set.deletes.append(.init(entity: e, key: row.key, expectedVersion: row.version, tombstone: e.preservedOnDeletion.map { ($0, row.values[$0]) }))
                let id = id(e, row.key)
                chunk.deleted.insert(id)
                noteDeleted(id)
            }
        }
        try commit(set, chunk)
    }

    /// The rows of one entity a batch delete deletes, by key: a class, so that looking one up
    /// copies no dictionary.
    private final class DoomedRows {
        let entity: EntityDescription
        var rows: [Int64: StoreRow] = [:]
        init(_ entity: EntityDescription) { self.entity = entity }
    }

    /// The objects relationship `r` of `rows` leads to, as (owner, other) key pairs.
    private func relatedKeys(_ r: ResolvedRelationship, _ rows: [StoreRow]) throws(LoomError) -> [(owner: Int64, other: Int64)] {
        switch r.storage {
        case .foreignKey(let slot):
            return rows.compactMap { row in
                if case .integer(let other) = row.values[slot] { return (row.key, other) }
                return nil
            }
        default:
            guard !rows.isEmpty else { return [] }
            return try store.fetchRelated(r, keys: rows.map(\.key)).map { ($0.owner, $0.row.key) }
        }
    }
}

/// How a batch insert's errors name a row: by its index in the request, or, for the chunk of an
/// import (``ImportRequest``), by its source's position in the import.
struct BatchRowNaming: Sendable {
    /// The position, in the import, of the request's first row.
    var offset = 0
    /// Whether the rows are an import's sources.
    var isImport = false

    /// `Row 7 of a batch insert of Book`, or `Source 7777 of an import of Book`.
    func name(_ row: Int, of entity: String) -> String {
        isImport ? "Source \(offset + row) of an import of \(entity)" : "Row \(row) of a batch insert of \(entity)"
    }

    /// ` (row 7)` or ` (source 7777 of the import)`, after an entity's name; empty without a row.
    func place(_ row: Int?) -> String {
        guard let row else { return "" }
        return isImport ? " (source \(offset + row) of the import)" : " (row \(row))"
    }
}

/// What the key paths of a request's rows lead to: rows made by one closure use the same
/// key-path instances, found here by identity before any hashing or name lookup.
struct KeyPathTargets {
    /// A key path's place in an entity's row.
    enum Target {
        /// An attribute: its index (its slot), its type, and whether it may be nil.
        case attribute(Int, AttributeType, isOptional: Bool)
        /// A to-one relationship: the slot of its foreign key.
        case toOne(Int)
        /// Neither (or a to-many).
        case none
    }

    private var entries: [(keyPath: AnyKeyPath, target: Target)] = []

    mutating func target<Model: PersistentModel>(for keyPath: AnyKeyPath, of entity: EntityDescription, in model: Model.Type) -> Target {
        for entry in entries where entry.keyPath === keyPath { return entry.target }
        var target = Target.none
        if let name = Model.loomPropertyName(for: keyPath) {
            if let index = entity.attributeIndex(named: name) {
                let attribute = entity.attributes[index]
                target = .attribute(index, attribute.type, isOptional: attribute.isOptional)
            } else if let j = entity.relationshipIndex(named: name), entity.relationships[j].kind == .toOne, let fk = entity.storedValueIndex(ofRelationship: j) {
                target = .toOne(fk)
            }
        }
        if entries.count < 64 { entries.append((keyPath, target)) }
        return target
    }
}

/// One relationship of one entity, as a dictionary key.
struct RelationshipKey: Hashable {
    let entity: ObjectIdentifier
    let index: Int

    init(_ r: ResolvedRelationship) {
        entity = ObjectIdentifier(r.source)
        index = r.index
    }
}

extension RelationshipStorage {
    var isJoinTable: Bool {
        if case .joinTable = self { return true }
        return false
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements.
    fileprivate func chunked(by size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
