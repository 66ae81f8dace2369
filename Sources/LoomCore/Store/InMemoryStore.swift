public import Foundation

/// A store that keeps everything in memory, for tests and previews. Written against the
/// ``PersistentStore`` protocol only, with the same semantics as the SQLite store: the store
/// conformance suite runs on both.
public final class InMemoryStore: PersistentStore {
    public let identifier: UUID
    public let schema: Schema

    struct State {
        var tables: [ObjectIdentifier: [Int64: StoreRow]] = [:]
        /// Join tables by name: each row a (source, target) pair.
        var links: [String: Set<Link>] = [:]
        var nextKeys: [ObjectIdentifier: Int64] = [:]
    }

    struct Link: Hashable {
        let source: Int64
        let target: Int64
    }
    /// The committed data.
    private let state = Locked(State())
    /// Held by every write (a change set, a key reservation, a write transaction) for its whole
    /// length, so that writes are serial and a write transaction excludes the others.
    @_spi(LoomStore) public let writeScope = WriteScope { LoomError(.closed, "The in-memory store was closed.") }
    /// The open write transaction's own data, which only the thread holding ``writeScope``
    /// reads and writes.
    private let transaction = Locked<State?>(nil)

    /// Creates an empty store for `schema`.
    public init(schema: Schema, identifier: UUID = UUID()) {
        self.schema = schema
        self.identifier = identifier
    }

    /// The data as the calling thread sees it: its write transaction's, or the committed data.
    private func snapshot() throws(LoomError) -> State {
        if writeScope.isHeldByCurrentThread, let working = transaction.withLock({ $0 }) { return working }
        try writeScope.checkOpen()
        return state.withLock { $0 }
    }

    /// Runs a change to the data as the calling thread sees it, holding the write scope.
    private func write<T>(_ body: (inout State) throws(LoomError) -> T) throws(LoomError) -> T {
        try writeScope.write { () throws(LoomError) -> T in
            if writeScope.isHeldByCurrentThread {
                return try transaction.withLock { working throws(LoomError) -> T in
                    var data = working!
                    let result = try body(&data)
                    working = data
                    return result
                }
            }
            return try state.withLock { state throws(LoomError) -> T in try body(&state) }
        }
    }

    @_spi(LoomStore) public func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) {
        try writeScope.transaction(
            begin: {
                let start = try snapshot()
                transaction.withLock { $0 = start }
            },
            body,
            commit: {
                guard let working = transaction.withLock({ state in defer { state = nil }; return state }) else {
                    throw LoomError(.storeFailure, "The in-memory store's write transaction lost its data.")
                }
                try writeScope.checkOpen()
                state.withLock { $0 = working }
            },
            rollBack: { transaction.withLock { $0 = nil } })
    }

    @_spi(LoomStore) public func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        Self.fetch(query, in: try snapshot(), schema: schema)
    }

    @_spi(LoomStore) public func count(_ query: StoreQuery) throws(LoomError) -> Int {
        try fetch(query).count
    }

    @_spi(LoomStore) public func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        Self.rows(of: entity, keys: keys, in: try snapshot())
    }

    @_spi(LoomStore) public func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        try Self.fetchRelated(relationship, keys: keys, in: try snapshot(), schema: schema)
    }

    /// A copy of the committed data (copy-on-write: nothing is copied until the store changes).
    @_spi(LoomStore) public func openSnapshot() throws(LoomError) -> any StoreSnapshot {
        try writeScope.checkOpen()
        let data = state.withLock { $0 }
        return Snapshot(schema: schema, data: data)
    }

    /// The committed data at one moment, for a context pinned to a query generation.
    final class Snapshot: StoreSnapshot {
        let schema: Schema
        private let data: Locked<State?>

        init(schema: Schema, data: State) {
            self.schema = schema
            self.data = Locked(data)
        }

        var retainedBytes: Int { 0 }
        func close() { data.withLock { $0 = nil } }

        private func current() throws(LoomError) -> State {
            guard let data = data.withLock({ $0 }) else { throw LoomError(.closed, "This snapshot of the in-memory store was closed.") }
            return data
        }

        func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] { InMemoryStore.fetch(query, in: try current(), schema: schema) }
        func count(_ query: StoreQuery) throws(LoomError) -> Int { try fetch(query).count }
        func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] { InMemoryStore.rows(of: entity, keys: keys, in: try current()) }
        func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
            try InMemoryStore.fetchRelated(relationship, keys: keys, in: try current(), schema: schema)
        }
    }

    static func fetch(_ query: StoreQuery, in snapshot: State, schema: Schema) -> [StoreRow] {
        let graph = TableGraph(schema: schema, tables: snapshot.tables, links: snapshot.links)
        let rows = Array(snapshot.tables[ObjectIdentifier(query.entity)]?.values ?? [:].values).map { TableGraph.Row(entity: query.entity, row: $0) }
        var matching = rows
        if let predicate = query.predicate {
            matching = rows.filter { predicate.matches($0, in: graph) }
        }
        SortKey.sort(&matching, by: query.sortKeys, row: { $0 }, in: graph)
        let sorted = matching.map(\.row)
        let start = min(query.fetchOffset, sorted.count)
        let end = query.fetchLimit.map { min(start + $0, sorted.count) } ?? sorted.count
        return Array(sorted[start..<end])
    }

    static func rows(of entity: EntityDescription, keys: [Int64], in snapshot: State) -> [StoreRow] {
        let table = snapshot.tables[ObjectIdentifier(entity)] ?? [:]
        return keys.compactMap { table[$0] }
    }

    static func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64], in snapshot: State, schema: Schema) throws(LoomError) -> [RelatedRow] {
        if relationship.leadsToSubentities {
            var related: [RelatedRow] = []
            for narrowed in relationship.concreteDestinations(in: schema) { related += try fetchRelated(narrowed, keys: keys, in: snapshot, schema: schema) }
            return related.sorted(by: RelatedRow.storeOrder)
        }
        let wanted = Set(keys)
        let destination = snapshot.tables[ObjectIdentifier(relationship.destination)] ?? [:]
        var related: [RelatedRow] = []
        switch relationship.storage {
        case .foreignKey:
            throw LoomError(.storeFailure, "\(relationship.reference) is a to-one relationship, read from its foreign key.")
        case .inverseForeignKey(let slot):
            for row in destination.values {
                if case .integer(let owner) = row.values[slot], wanted.contains(owner) { related.append(RelatedRow(owner: owner, row: row)) }
            }
        case .joinTable(let table, let ownColumn, _):
            for link in snapshot.links[table.name] ?? [] {
                let (owner, other) = ownColumn == JoinTable.sourceColumn ? (link.source, link.target) : (link.target, link.source)
                if wanted.contains(owner), let row = destination[other] { related.append(RelatedRow(owner: owner, row: row)) }
            }
        }
        return related.sorted(by: RelatedRow.storeOrder)
    }

    @discardableResult
    @_spi(LoomStore) public func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        try writeScope.write { () throws(LoomError) -> CommitReceipt in
            do throws(LoomError) {
                try write { state throws(LoomError) in try apply(changes, to: &state) }
            } catch let error where error.code == .versionConflict || error.code == .uniquenessViolation {
                // Nothing was written: read the conflicts from the data the change set failed on.
                var failure = error
                failure.storeConflicts = try changes.conflicts(in: self)
                throw failure
            }
            if writeScope.isHeldByCurrentThread { return writeScope.receiptOfOpenTransaction }
            return writeScope.commit()
        }
    }

    private func apply(_ changes: StoreChangeSet, to state: inout State) throws(LoomError) {
        var tables = state.tables
        var links = state.links
        for delete in changes.deletes {
            let id = ObjectIdentifier(delete.entity)
            guard let row = tables[id]?[delete.key], row.version == delete.expectedVersion else {
                throw conflict(delete.entity, delete.key)
            }
            tables[id]?[delete.key] = nil
            for (table, column) in schema.joinTables(involving: delete.entity) {
                links[table.name] = links[table.name]?.filter { (column == JoinTable.sourceColumn ? $0.source : $0.target) != delete.key }
            }
        }
        for update in changes.updates {
            let id = ObjectIdentifier(update.entity)
            guard var row = tables[id]?[update.key], row.version == update.expectedVersion else {
                throw conflict(update.entity, update.key)
            }
            for change in update.changes { row.values[change.index] = change.value }
            row.version += 1
            tables[id]?[update.key] = row
        }
        for insert in changes.inserts {
            let id = ObjectIdentifier(insert.entity)
            if tables[id]?[insert.key] != nil {
                throw LoomError(.storeFailure, "\(insert.entity.name) key \(insert.key) is already used.", entity: insert.entity.name)
            }
            tables[id, default: [:]][insert.key] = StoreRow(key: insert.key, version: 1, values: insert.values)
        }
        for link in changes.linkDeletes { links[link.table.name]?.remove(Link(source: link.source, target: link.target)) }
        for link in changes.linkInserts { links[link.table.name, default: []].insert(Link(source: link.source, target: link.target)) }
        // Uniqueness, checked on the result as SQLite's unique indexes would.
        var touched: Set<ObjectIdentifier> = []
        for i in changes.inserts { touched.insert(ObjectIdentifier(i.entity)) }
        for u in changes.updates { touched.insert(ObjectIdentifier(u.entity)) }
        for entity in schema.entities where touched.contains(ObjectIdentifier(entity)) {
            try checkUniqueness(entity, tables[ObjectIdentifier(entity)] ?? [:])
        }
        // A constraint declared on a parent holds across its sub-entities' tables.
        for constraint in schema.hierarchyConstraints where constraint.members.contains(where: { touched.contains(ObjectIdentifier($0)) }) {
            try checkUniqueness(constraint, tables)
        }
        state.tables = tables
        state.links = links
    }

    private func conflict(_ entity: EntityDescription, _ key: Int64) -> LoomError {
        LoomError(.versionConflict, "\(entity.name)/\(key) was changed or deleted in the store since it was read.", entity: entity.name,
                  objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: key))
    }

    private func checkUniqueness(_ entity: EntityDescription, _ table: [Int64: StoreRow]) throws(LoomError) {
        for constraint in entity.uniquenessConstraints {
            let indexes = constraint.compactMap { entity.storedValueIndex(named: $0) }
            var seen: Set<[StoredValue]> = []
            for row in table.values {
                let values = indexes.map { row.values[$0] }
                if values.contains(where: \.isNull) { continue }
                if !seen.insert(values).inserted {
                    throw LoomError(.uniquenessViolation, "Another \(entity.name) already has the same \(constraint.joined(separator: ", ")), which must be unique.", entity: entity.name, attributes: constraint,
                                    objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: row.key))
                }
            }
        }
    }

    private func checkUniqueness(_ constraint: HierarchyConstraint, _ tables: [ObjectIdentifier: [Int64: StoreRow]]) throws(LoomError) {
        var seen: Set<[StoredValue]> = []
        for member in constraint.members {
            let indexes = constraint.attributes.compactMap { member.storedValueIndex(named: $0) }
            for row in (tables[ObjectIdentifier(member)] ?? [:]).values {
                let values = indexes.map { row.values[$0] }
                if values.contains(where: \.isNull) { continue }
                if !seen.insert(values).inserted {
                    throw LoomError(.uniquenessViolation, "Another \(constraint.owner.name) already has the same \(constraint.attributes.joined(separator: ", ")), which must be unique across \(constraint.owner.name)'s sub-entities.", entity: member.name, attributes: constraint.attributes,
                                    objectID: AnyObjectID(storeIdentifier: identifier, entityName: member.name, primaryKey: row.key))
                }
            }
        }
    }

    @_spi(LoomStore) public func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> {
        try write { state throws(LoomError) -> Range<Int64> in
            // One key space per hierarchy: a key is unique among its entities' objects.
            let id = ObjectIdentifier(entity.rootEntity)
            let start = state.nextKeys[id] ?? 1
            state.nextKeys[id] = start + Int64(count)
            return start..<(start + Int64(count))
        }
    }

    @_spi(LoomStore) public func close() throws(LoomError) {
        writeScope.close {}
    }
}
