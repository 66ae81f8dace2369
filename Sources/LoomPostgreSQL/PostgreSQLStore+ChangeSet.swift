import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQL
import PostgresNIO

/// How a change set becomes statements on PostgreSQL: set-based, because postgres-nio does not
/// pipeline and every statement is a round trip. Each entity's deletes are one `DELETE … USING
/// unnest(keys, versions)`, each shape of update (an entity and the columns it sets) one
/// `UPDATE … FROM unnest(…)`, each entity's inserts one `INSERT … SELECT … FROM unnest(…)` per
/// 10,000 rows (``insertChunk``), each join table's removed and added links one statement each:
/// a save of 1,000 changed objects of one entity is one statement.
///
/// The order is the shared plan's (``SQLGenerator/statements(for:)``): deletes with their join
/// rows, updates, inserts, removed links, added links. Deletes and updates return the keys they
/// changed; a key missing is a row changed or deleted since it was read (a version conflict).
/// ``ChangeStatements`` builds them; they run one after the other in a transaction
/// (``applyStatements(_:)``), or together as one statement (``applyInOneStatement(_:)``).
extension PostgreSQLStore {
    /// Applies `changes` statement by statement inside the open write transaction, then writes
    /// its history row.
    func applyStatements(_ changes: StoreChangeSet) throws(LoomError) {
        var sent: [(pending: PGConnection.PendingStatement, statement: ChangeStatement)] = []
        /// Waits for every statement sent without waiting; the first failure is the one thrown.
        func waitForSent() throws(LoomError) {
            var failure: LoomError?
            for (pending, statement) in sent {
                do {
                    try pending.wait()
                } catch {
                    if failure == nil { failure = translate(error, entity: statement.entity, key: statement.insertedKey) }
                }
            }
            sent = []
            if let failure { throw failure }
        }
        do throws(LoomError) {
            var statements = ChangeStatements(store: self, lock: nil)
            try statements.build(changes) { (statement) throws(LoomError) -> Bool in
                if statement.kind == .insertRows {
                    // Sent without waiting: the next chunk is encoded while the server inserts
                    // this one (postgres-nio runs them in order on the writer).
                    sent.append((writer.send(statement.text, statement.bindings), statement))
                } else {
                    try waitForSent()
                    try run(statement)
                }
                return true
            }
            try waitForSent()
        } catch {
            // Every statement sent is waited for, so that the caller's ROLLBACK comes after them.
            _ = try? waitForSent()
            throw error
        }
        configuration.insideSaveTransaction?(.beforeHistory)
        if configuration.recordsHistory, !changes.isEmpty { try writeHistory(changes) }
        configuration.insideSaveTransaction?(.beforeCommit)
    }

    /// Runs one statement on the writer; one that checks row versions throws a version conflict
    /// naming the first of its keys it did not change.
    private func run(_ statement: ChangeStatement) throws(LoomError) {
        guard let expected = statement.expected, let entity = statement.entity else {
            do {
                try writer.query(statement.text, statement.bindings)
            } catch {
                throw translate(error, entity: statement.entity)
            }
            return
        }
        let changed: Set<Int64>
        do {
            changed = Set(try writer.query(statement.text, statement.bindings).map { PostgreSQLValues.int64($0.first { _ in true }!) })
        } catch {
            throw translate(error, entity: entity)
        }
        guard changed.count < expected.count else { return }
        let key = expected.first { !changed.contains($0) } ?? expected[0]
        throw versionConflict(entity, key: key)
    }

    /// The error of a save refused because `entity`'s row `key` changed since it was read.
    func versionConflict(_ entity: EntityDescription, key: Int64) -> LoomError {
        LoomError(.versionConflict, "\(entity.name)/\(key) was changed or deleted in the store since it was read.", entity: entity.name,
                  objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: key))
    }

    /// Rows of one entity per `INSERT`: a statement's arrays stay a few megabytes, and the
    /// server runs one while the next is encoded.
    static let insertChunk = 10_000

    /// Binds one column's values as an array, naming the attribute and the object of a value
    /// PostgreSQL cannot store (`keys` is made only then).
    fileprivate func bindColumn<C: Collection>(_ values: C, kind: ColumnKind, entity: EntityDescription, slot: Int, keys: @autoclosure () -> [Int64], to bindings: inout PostgresBindings) throws(LoomError) where C.Element == StoredValue {
        do {
            try PostgreSQLValues.bindArray(values, as: kind, to: &bindings)
        } catch {
            let name = entity.storedValueName(at: slot)
            let index = Array(values).firstIndex { value in
                var scratch = PostgresBindings()
                return (try? PostgreSQLValues.bind(value, as: kind, to: &scratch)) == nil
            }
            let key = index.map { keys()[$0] }
            throw LoomError(
                .invalidRequest,
                "\(entity.name).\(name)\(key.map { " of \(entity.name)/\($0)" } ?? "") cannot be saved in PostgreSQL: \(error.reason). Nothing was saved.",
                entity: entity.name, attributes: [name],
                objectID: key.map { AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: $0) })
        }
    }
}

/// One statement of a change set.
struct ChangeStatement {
    enum Kind {
        case deleteRows, deleteLinksOfRows, updateRows, insertRows, deleteLinks, insertLinks
    }

    let kind: Kind
    /// The table it changes.
    let table: String
    let text: String
    /// Its values (empty when every statement binds into ``ChangeStatements/bindings``).
    let bindings: PostgresBindings
    /// The entity errors name (`nil` for a join table's statements).
    let entity: EntityDescription?
    /// The keys the statement must change, for a statement that checks row versions (it
    /// returns the keys it changed); `nil` for one that does not (it returns nothing, or a row
    /// per row changed when built for one statement).
    let expected: [Int64]?
    /// The key of the only row of a one-row insert, for errors.
    let insertedKey: Int64?
}

/// Builds the statements of a change set in the order they run, each with its own values
/// (`lock` nil), or all numbering their parameters in one ``bindings`` and joining the common
/// table expression `lock` (the write lock taken first), to run as one statement.
struct ChangeStatements {
    let store: PostgreSQLStore
    let lock: String?
    /// The values bound so far: of the statement being built, or of every statement.
    private(set) var bindings = PostgresBindings()

    init(store: PostgreSQLStore, lock: String?) {
        self.store = store
        self.lock = lock
    }

    /// Binds a value first: the parameters are numbered on after it.
    mutating func append(_ value: Int64) {
        bindings.append(value)
    }

    /// The next parameter's placeholder (`$n`).
    private var nextParameter: String { "$\(bindings.count + 1)" }

    /// Joined by every statement (`lock, `), so that none changes a row before the lock is held.
    private var lockJoin: String { lock.map { "\($0), " } ?? "" }

    /// What ends a statement that checks no row version: built for one statement, it returns
    /// a row per row it changed (a common table expression is read only through its rows).
    private var returning: String { lock == nil ? "" : " RETURNING 1" }

    /// Builds every statement of `changes` in order and hands each to `sink`, until it returns
    /// false.
    mutating func build(_ changes: StoreChangeSet, _ sink: (ChangeStatement) throws(LoomError) -> Bool) throws(LoomError) {
        let schema = store.schema
        // A deleted object's join rows all go with it (below), so a removed link of a deleted
        // object needs no statement of its own: leaving it out keeps the join table to one
        // statement, and the save to one.
        var deletedKeys: [String: Set<Int64>] = [:]
        for (entity, deletes) in groupedByEntity(changes.deletes, \.entity) {
            if !changes.linkDeletes.isEmpty { deletedKeys[entity.name] = Set(deletes.lazy.map(\.key)) }
            guard try sink(deleteRows(entity, deletes)) else { return }
            for join in schema.joinTables(involving: entity) {
                guard try sink(deleteLinks(of: deletes, in: join.table.name, column: join.column)) else { return }
            }
        }
        var order: [Shape] = []
        var byShape: [Shape: [StoreChangeSet.Update]] = [:]
        for update in changes.updates {
            let shape = Shape(entity: ObjectIdentifier(update.entity), columns: update.changes.map(\.index))
            if byShape[shape] == nil { order.append(shape) }
            byShape[shape, default: []].append(update)
        }
        for shape in order {
            guard try sink(updateRows(byShape[shape]!, columns: shape.columns)) else { return }
        }
        if !changes.inserts.isEmpty {
            // Most saves insert objects of one entity: no grouping (which copies every insert).
            let first = changes.inserts[0].entity
            let groups = changes.inserts.allSatisfy({ $0.entity === first })
                ? [(entity: first, items: changes.inserts)] : groupedByEntity(changes.inserts, \.entity)
            for (entity, inserts) in groups {
                var start = inserts.startIndex
                while start < inserts.endIndex {
                    let chunk = inserts[start..<min(start + PostgreSQLStore.insertChunk, inserts.endIndex)]
                    start = chunk.endIndex
                    guard try sink(insertRows(chunk, of: entity)) else { return }
                }
            }
        }
        let linkDeletes = deletedKeys.isEmpty ? changes.linkDeletes : changes.linkDeletes.filter { link in
            !(deletedKeys[link.table.sourceEntityName]?.contains(link.source) ?? false)
                && !(deletedKeys[link.table.targetEntityName]?.contains(link.target) ?? false)
        }
        for (links, insert) in [(linkDeletes, false), (changes.linkInserts, true)] {
            var tables: [String] = []
            var byTable: [String: [StoreChangeSet.LinkChange]] = [:]
            for link in links {
                if byTable[link.table.name] == nil { tables.append(link.table.name) }
                byTable[link.table.name, default: []].append(link)
            }
            for name in tables {
                guard try sink(changeLinks(byTable[name]!, in: name, insert: insert)) else { return }
            }
        }
    }

    /// An UPDATE statement's identity: the entity and the columns it sets.
    private struct Shape: Hashable {
        let entity: ObjectIdentifier
        let columns: [Int]
    }

    private mutating func statement(_ kind: ChangeStatement.Kind, _ table: String, _ text: String, entity: EntityDescription?, expected: [Int64]? = nil, insertedKey: Int64? = nil) -> ChangeStatement {
        defer { if lock == nil { bindings = PostgresBindings() } }
        return ChangeStatement(kind: kind, table: table, text: text, bindings: lock == nil ? bindings : PostgresBindings(), entity: entity, expected: expected, insertedKey: insertedKey)
    }

    private mutating func keys<C: Collection>(_ keys: C) -> String where C.Element == Int64 {
        let placeholder = nextParameter
        PostgreSQLValues.bindKeys(keys, to: &bindings)
        return placeholder + "::int8[]"
    }

    private mutating func deleteRows(_ entity: EntityDescription, _ deletes: [StoreChangeSet.Delete]) -> ChangeStatement {
        let k = keys(deletes.lazy.map(\.key)), v = keys(deletes.lazy.map(\.expectedVersion))
        return statement(.deleteRows, entity.name, """
            DELETE FROM \(SQLGenerator.quote(entity.name)) AS t USING \(lockJoin)unnest(\(k), \(v)) AS u(k, v) \
            WHERE t."Z_PK" = u.k AND t."Z_OPT" = u.v RETURNING t."Z_PK"
            """, entity: entity, expected: deletes.map(\.key))
    }

    /// The join rows of deleted objects. Built for one statement, a call of `loom_unlink`
    /// (``PostgreSQLStore/unlinkFunction``), whose `DELETE` reads a snapshot taken once the
    /// write lock is held: it sees a link an exclusive write added before it let the save run.
    private mutating func deleteLinks(of deletes: [StoreChangeSet.Delete], in table: String, column: String) -> ChangeStatement {
        guard let lock else {
            let k = keys(deletes.lazy.map(\.key))
            return statement(.deleteLinksOfRows, table, "DELETE FROM \(SQLGenerator.quote(table)) WHERE \(SQLGenerator.quote(column)) = ANY(\(k))", entity: nil)
        }
        let t = nextParameter
        bindings.append(table)
        let c = nextParameter
        bindings.append(column)
        let k = keys(deletes.lazy.map(\.key))
        return statement(.deleteLinksOfRows, table, "SELECT loom_unlink(\(t)::text, \(c)::text, \(k)) FROM \(lock)", entity: nil)
    }

    private mutating func updateRows(_ updates: [StoreChangeSet.Update], columns: [Int]) throws(LoomError) -> ChangeStatement {
        let entity = updates[0].entity
        var arrays = [keys(updates.lazy.map(\.key)), keys(updates.lazy.map(\.expectedVersion))], names = ["k", "v"], sets: [String] = []
        for (position, slot) in columns.enumerated() {
            let kind = ColumnKind.of(entity, slot)
            arrays.append("\(nextParameter)::\(kind.arrayName)")
            try store.bindColumn(updates.map { $0.changes[position].value }, kind: kind, entity: entity, slot: slot, keys: updates.map(\.key), to: &bindings)
            names.append("c\(position)")
            sets.append("\(store.sql.column(entity, slot)) = u.c\(position)")
        }
        sets.append("\"Z_OPT\" = t.\"Z_OPT\" + 1")
        return statement(.updateRows, entity.name, """
            UPDATE \(SQLGenerator.quote(entity.name)) AS t SET \(sets.joined(separator: ", ")) \
            FROM \(lockJoin)unnest(\(arrays.joined(separator: ", "))) AS u(\(names.joined(separator: ", "))) \
            WHERE t."Z_PK" = u.k AND t."Z_OPT" = u.v RETURNING t."Z_PK"
            """, entity: entity, expected: updates.map(\.key))
    }

    /// Rows of one entity, bound as an array per column.
    private mutating func insertRows(_ inserts: ArraySlice<StoreChangeSet.Insert>, of entity: EntityDescription) throws(LoomError) -> ChangeStatement {
        var arrays = [keys(inserts.lazy.map(\.key))], names = ["k"], columns = ["\"Z_PK\""]
        for slot in 0..<entity.storedValueCount {
            let kind = ColumnKind.of(entity, slot)
            arrays.append("\(nextParameter)::\(kind.arrayName)")
            try store.bindColumn(inserts.map { $0.values[slot] }, kind: kind, entity: entity, slot: slot, keys: inserts.map(\.key), to: &bindings)
            names.append("c\(slot)")
            columns.append(store.sql.column(entity, slot))
        }
        return statement(.insertRows, entity.name, """
            INSERT INTO \(SQLGenerator.quote(entity.name)) (\(columns.joined(separator: ", ")), "Z_OPT") \
            SELECT \(names.joined(separator: ", ")), 1 FROM \(lockJoin)unnest(\(arrays.joined(separator: ", "))) AS u(\(names.joined(separator: ", ")))\(returning)
            """, entity: entity, insertedKey: inserts.count == 1 ? inserts.first!.key : nil)
    }

    private mutating func changeLinks(_ links: [StoreChangeSet.LinkChange], in table: String, insert: Bool) -> ChangeStatement {
        let s = keys(links.lazy.map(\.source)), t = keys(links.lazy.map(\.target))
        let quoted = SQLGenerator.quote(table)
        if insert {
            return statement(.insertLinks, table, """
                INSERT INTO \(quoted) ("Z_SOURCE", "Z_TARGET") SELECT s, t FROM \(lockJoin)unnest(\(s), \(t)) AS u(s, t) ON CONFLICT DO NOTHING\(returning)
                """, entity: nil)
        }
        return statement(.deleteLinks, table, """
            DELETE FROM \(quoted) AS j USING \(lockJoin)unnest(\(s), \(t)) AS u(s, t) WHERE j."Z_SOURCE" = u.s AND j."Z_TARGET" = u.t\(returning)
            """, entity: nil)
    }
}
