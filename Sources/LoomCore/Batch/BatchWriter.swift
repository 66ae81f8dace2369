import Foundation

/// Writes one batch request's chunks as store change sets, and collects what changed.
final class BatchWriter {
    /// Objects per change set. It bounds each change set, not the request: the result and the
    /// merge still hold every changed object's ID (see the issue note).
    static let chunkSize = 10_000

    let context: ManagedObjectContext
    var result = BatchResult()
    /// Each committed chunk's save event, for the executing context to merge chunk by chunk
    /// (no union of them all is built).
    var events: [SaveEvent] = []
    /// Whether a chunk changed the store.
    var committed = false
    /// Whether a chunk wrote changes a store records in its history (a non-empty change set).
    private var recordedHistory = false
    /// Whether the result lists IDs (``BatchResultType/objectIDs``) or only counts.
    let listsIDs: Bool
    /// Whether the executing context merges the chunks' changes (see `runBatch`).
    let keepsChanges: Bool
    /// The entities whose rows the merging contexts need (the executing one's included): each
    /// chunk's event carries them, built from what the chunk read and wrote, so that no
    /// context reads them again.
    let interest: MergeInterest
    /// How errors name a batch insert's rows.
    var rowNaming = BatchRowNaming()
    private var coordinator: PersistentStoreCoordinator { context.coordinator }
    private var store: any PersistentStore { context.coordinator.store }

    init(context: ManagedObjectContext, listsIDs: Bool, keepsChanges: Bool) {
        self.context = context
        self.listsIDs = listsIDs
        self.keepsChanges = keepsChanges
        context.announceRegisteredEntities()
        self.interest = context.coordinator.mergeInterest(including: keepsChanges ? context.inbox : nil)
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

    /// `row` with `changes` written, as the store leaves it: the values set, the version one up.
    private static func written(_ row: StoreRow, _ changes: some Sequence<(slot: Int, value: StoredValue)>) -> StoreRow {
        var row = row
        for (slot, value) in changes { row.values[slot] = value }
        row.version += 1
        return row
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
        // The entity of each key found: the destination's, or one of its sub-entities'.
        var entities: [Int: [Int64: EntityDescription]] = [:]
        for (j, keys) in wanted {
            let r = schema.relationship(j, of: entity)
            var remaining = Array(Set(keys))
            for narrowed in r.concreteDestinations(in: schema) where !remaining.isEmpty {
                let found = try store.rows(of: narrowed.destination, keys: remaining).map(\.key)
                for key in found { entities[j, default: [:]][key] = narrowed.destination }
                remaining.removeAll { entities[j]?[$0] != nil }
            }
            guard let missing = keys.first(where: { entities[j]?[$0] == nil }) else { continue }
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
                let destination = r.leadsToSubentities ? try entityOfKey(other, in: r, known: entities[j]) : r.destination
                owners.append((destination, other, [r.inverse.name]))
                let id = id(destination, other)
                chunk.updated.insert(id)
                chunk.changedProperties[id, default: []].insert(r.inverse.name)
            }
        }
    }

    /// The entity of the object with `key` among the destinations of `r`, which has
    /// sub-entities: `known` (keys just checked), or the table that holds it; the destination
    /// itself when none does (an object deleted meanwhile).
    private func entityOfKey(_ key: Int64, in r: ResolvedRelationship, known: [Int64: EntityDescription]?) throws(LoomError) -> EntityDescription {
        if let found = known?[key] { return found }
        for narrowed in r.concreteDestinations(in: coordinator.schema) where try !store.rows(of: narrowed.destination, keys: [key]).isEmpty {
            return narrowed.destination
        }
        return r.destination
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

    /// Applies one chunk's change set and publishes it like a save, with `rows`: the rows as
    /// written of the inserted and updated objects of the entities in ``interest``.
    private func commit(_ set: StoreChangeSet, _ chunk: ObjectChanges, rows: [AnyObjectID: StoreRow]) throws(LoomError) {
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
        if keepsChanges || coordinator.hasInboxes(besides: context.inbox) {
            // An object of an entity in `interest` without a row here kept its row (only a
            // to-many list of it changed).
            event = SaveEvent(number: receipt.sequence, changes: chunk, rows: EventRows(rows: rows, covered: interest.entities),
                              origin: ObjectIdentifier(context.inbox), mergesIntoViewContext: true)
        }
        coordinator.publish(event, for: receipt)
        committed = true
        if keepsChanges, let event { events.append(event) }
    }

    // MARK: Update

    func update(_ keys: [Int64], of entity: EntityDescription, setting values: [(slot: Int, value: StoredValue)]) throws(LoomError) {
        var set = StoreChangeSet()
        var chunk = ObjectChanges()
        var related: [(row: Int?, key: Int64?, slot: Int, old: StoredValue, new: StoredValue)] = []
        var rows: [AnyObjectID: StoreRow] = [:]
        let wantsRows = interest.wantsUpdated(ObjectIdentifier(entity))
        for row in try store.rows(of: entity, keys: keys) {
            let changed = values.filter { row.values[$0.slot] != $0.value }
            guard !changed.isEmpty else { result.unchanged += 1; continue }
            set.updates.append(.init(entity: entity, key: row.key, expectedVersion: row.version, changes: changed.map { ($0.slot, $0.value) }))
            let id = id(entity, row.key)
            if wantsRows { rows[id] = Self.written(row, changed) }
            chunk.updated.insert(id)
            chunk.changedProperties[id] = Set(changed.map { entity.storedValueName(at: $0.slot) })
            noteUpdated(id)
            for (slot, value) in changed where slot >= entity.attributes.count { related.append((nil, row.key, slot, row.values[slot], value)) }
        }
        try checkRelated(related, of: entity, owners: &set.relationshipOwners, chunk: &chunk)
        try commit(set, chunk, rows: rows)
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
        var elsewhere: [[StoredValue]: (entity: EntityDescription, key: Int64)] = [:]
        var endsElsewhere: [Int: EntityDescription] = [:]   // index in ends
        let wanted = rows.compactMap { uniqueValues($0.values) }
        if !wanted.isEmpty {
            // By the constraint's first attribute (one IN list, whatever the constraint's width);
            // the rows whose other attributes differ match no row below.
            let predicate = PredicateNode.isIn(.attribute(constraint[0]), Array(Set(wanted.map { $0[0] })))
            for row in try store.fetch(StoreQuery(entity: entity, predicate: predicate)) {
                existing[constraint.map { row.values[$0] }] = row
            }
            // A constraint declared on a parent holds across its sub-entities: their objects
            // match too, though a row of this entity cannot update them.
            let names = constraint.map { entity.attributes[$0].name }
            for member in store.schema.hierarchyConstraint(of: entity, names)?.members ?? [] where member !== entity {
                let slots = names.compactMap { member.attributeIndex(named: $0) }
                guard slots.count == names.count else { continue }
                for row in try store.fetch(StoreQuery(entity: member, predicate: .isIn(.attribute(slots[0]), Array(Set(wanted.map { $0[0] }))))) {
                    elsewhere[slots.map { row.values[$0] }] = (member, row.key)
                }
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
            if let unique, let other = elsewhere[unique] {
                switch uniquing {
                case .fail:
                    throw duplicate(entity, row: row, constraint, existing: other.key, of: other.entity)
                case .ignore:
                    endsElsewhere[ends.count] = other.entity
                    ends.append(other.key)
                    result.unchanged += 1
                    result.rows.unchanged += 1
                case .update:
                    let names = constraint.map { entity.attributes[$0].name }
                    throw LoomError(
                        .uniquenessViolation,
                        "\(rowNaming.name(row, of: entity.name)) matches \(other.entity.name)/\(other.key) by its unique \(names.joined(separator: ", ")), which holds across the hierarchy; a row of \(entity.name) cannot update an object of another entity. Use uniquing .ignore, or leave the row out.",
                        entity: entity.name, attributes: names, objectID: id(other.entity, other.key))
                }
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
        var eventRows: [AnyObjectID: StoreRow] = [:]
        for key in updateOrder {
            let entry = updates[key]!
            guard !entry.changed.isEmpty else { result.unchanged += 1; continue }
            let slots = entry.changed.sorted()
            set.updates.append(.init(entity: entity, key: key, expectedVersion: entry.version, changes: slots.map { ($0, entry.values[$0]) }))
            let id = id(entity, key)
            if interest.wantsUpdated(ObjectIdentifier(entity)) { eventRows[id] = StoreRow(key: key, version: entry.version + 1, values: entry.values) }
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
            let wantsRows = interest.wantsInserted(ObjectIdentifier(entity))
            for ((row, values), key) in zip(newRows, newKeys) {
                set.inserts.append(.init(entity: entity, key: key, values: values))
                let id = id(entity, key)
                if wantsRows { eventRows[id] = StoreRow(key: key, version: 1, values: values) }
                chunk.inserted.insert(id)
                noteInserted(id)
                for slot in entity.attributes.count..<entity.storedValueCount where !values[slot].isNull { related.append((row, nil, slot, .null, values[slot])) }
            }
        }
        try checkRelated(related, of: entity, owners: &set.relationshipOwners, chunk: &chunk)
        if listsIDs { for (i, end) in ends.enumerated() { result.objectIDs.append(id(endsElsewhere[i] ?? entity, end >= 0 ? end : newKeys[Int(-end - 1)])) } }
        do {
            try commit(set, chunk, rows: eventRows)
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

    private func duplicate(_ entity: EntityDescription, row: Int, _ constraint: [Int], existing: Int64? = nil, of owner: EntityDescription? = nil) -> LoomError {
        // The values are not in the message (they may be personal data); the row and the object are.
        let names = constraint.map { entity.attributes[$0].name }
        let existingEntity = owner ?? entity
        let other = existing.map { "\(existingEntity.name)/\($0) has" } ?? "an earlier row of the request has"
        return LoomError(.uniquenessViolation, "\(rowNaming.name(row, of: entity.name)) matches an object by its unique \(names.joined(separator: ", ")): \(other) the same; use uniquing .update or .ignore, or leave the row out.",
                         entity: entity.name, attributes: names, objectID: existing.map { id(existingEntity, $0) })
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
        var known: [ResolvedRelationship.Identity: [(owner: Int64, other: Int64)]] = [:]
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
            for r in schema.relationships(of: e).flatMap({ $0.concreteDestinations(in: schema) }) where r.description.deleteRule == .cascade {
                let destination = doomed[ObjectIdentifier(r.destination)]
                let isNew = { (key: Int64) in destination?.rows[key] == nil }
                if case .foreignKey = r.storage {
                    let related = try relatedKeys(r, rows)
                    known[r.identity, default: []].append(contentsOf: related)
                    let next = Array(Set(related.map(\.other))).filter(isNew)
                    if !next.isEmpty { wave.append((r.destination, nil, next)) }
                } else {
                    let related = try store.fetchRelated(r, keys: rows.map(\.key))
                    known[r.identity, default: []].append(contentsOf: related.map { ($0.owner, $0.row.key) })
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
        var eventRows: [AnyObjectID: StoreRow] = [:]
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
            for r in schema.relationships(of: e).flatMap({ $0.concreteDestinations(in: schema) }) {
                let rule = r.description.deleteRule
                let inverse = schema.relationship(r.inverseIndex, of: r.destination)
                let all: [(owner: Int64, other: Int64)]
                if let found = known[r.identity] { all = found } else { all = try relatedKeys(r, rows) }
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
                if interest.wantsUpdated(ObjectIdentifier(e)) { eventRows[id] = Self.written(row, changes.map { (slot: $0.index, value: $0.value) }) }
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
        try commit(set, chunk, rows: eventRows)
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
            let pairs: [(owner: Int64, other: Int64)] = rows.compactMap { row in
                if case .integer(let other) = row.values[slot] { return (row.key, other) }
                return nil
            }
            guard r.isNarrowed, !pairs.isEmpty else { return pairs }
            // Followed once per entity of the destination's hierarchy: the keys in its table.
            let present = Set(try store.rows(of: r.destination, keys: Array(Set(pairs.map(\.other)))).map(\.key))
            return pairs.filter { present.contains($0.other) }
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

extension RelationshipStorage {
    var isJoinTable: Bool {
        if case .joinTable = self { return true }
        return false
    }
}

extension Array {
    /// The array in consecutive slices of at most `size` elements.
    func chunked(by size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
