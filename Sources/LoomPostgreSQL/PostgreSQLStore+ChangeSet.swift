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
extension PostgreSQLStore {
    func applyStatements(_ changes: StoreChangeSet) throws(LoomError) {
        try applyDeletes(changes)
        try applyUpdates(changes)
        try applyInserts(changes)
        try applyLinks(changes.linkDeletes, insert: false)
        try applyLinks(changes.linkInserts, insert: true)
        configuration.insideSaveTransaction?(.beforeHistory)
        if configuration.recordsHistory, !changes.isEmpty { try writeHistory(changes) }
        configuration.insideSaveTransaction?(.beforeCommit)
    }

    /// Runs a statement that returns the keys it changed, and throws a version conflict naming
    /// the first of `expected` it did not change.
    private func runChecked(_ text: String, _ bindings: PostgresBindings, entity: EntityDescription, expected: [Int64]) throws(LoomError) {
        let changed: Set<Int64>
        do {
            changed = Set(try writer.query(text, bindings).map { PostgreSQLValues.int64($0.first { _ in true }!) })
        } catch {
            throw translate(error, entity: entity)
        }
        guard changed.count < expected.count else { return }
        let key = expected.first { !changed.contains($0) } ?? expected[0]
        throw LoomError(.versionConflict, "\(entity.name)/\(key) was changed or deleted in the store since it was read.", entity: entity.name,
                        objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: key))
    }

    private func applyDeletes(_ changes: StoreChangeSet) throws(LoomError) {
        for (entity, deletes) in groupedByEntity(changes.deletes, \.entity) {
            var bindings = PostgresBindings()
            PostgreSQLValues.bindKeys(deletes.lazy.map(\.key), to: &bindings)
            PostgreSQLValues.bindKeys(deletes.lazy.map(\.expectedVersion), to: &bindings)
            let table = SQLGenerator.quote(entity.name)
            try runChecked(
                "DELETE FROM \(table) AS t USING unnest($1::int8[], $2::int8[]) AS u(k, v) WHERE t.\"Z_PK\" = u.k AND t.\"Z_OPT\" = u.v RETURNING t.\"Z_PK\"",
                bindings, entity: entity, expected: deletes.map(\.key))
            for join in schema.joinTables(involving: entity) {
                var keys = PostgresBindings()
                PostgreSQLValues.bindKeys(deletes.lazy.map(\.key), to: &keys)
                try onWriter("DELETE FROM \(SQLGenerator.quote(join.table.name)) WHERE \(SQLGenerator.quote(join.column)) = ANY($1::int8[])", keys)
            }
        }
    }

    /// An UPDATE statement's identity: the entity and the columns it sets.
    private struct Shape: Hashable {
        let entity: ObjectIdentifier
        let columns: [Int]
    }

    private func applyUpdates(_ changes: StoreChangeSet) throws(LoomError) {
        var order: [Shape] = []
        var byShape: [Shape: [StoreChangeSet.Update]] = [:]
        for update in changes.updates {
            let shape = Shape(entity: ObjectIdentifier(update.entity), columns: update.changes.map(\.index))
            if byShape[shape] == nil { order.append(shape) }
            byShape[shape, default: []].append(update)
        }
        for shape in order {
            let updates = byShape[shape]!
            let entity = updates[0].entity
            var bindings = PostgresBindings()
            PostgreSQLValues.bindKeys(updates.lazy.map(\.key), to: &bindings)
            PostgreSQLValues.bindKeys(updates.lazy.map(\.expectedVersion), to: &bindings)
            var arrays = ["$1::int8[]", "$2::int8[]"], names = ["k", "v"], sets: [String] = []
            for (position, slot) in shape.columns.enumerated() {
                let kind = ColumnKind.of(entity, slot)
                try bindColumn(updates.map { $0.changes[position].value }, kind: kind, entity: entity, slot: slot, keys: updates.map(\.key), to: &bindings)
                arrays.append("$\(position + 3)::\(kind.arrayName)")
                names.append("c\(position)")
                sets.append("\(sql.column(entity, slot)) = u.c\(position)")
            }
            sets.append("\"Z_OPT\" = t.\"Z_OPT\" + 1")
            try runChecked(
                "UPDATE \(SQLGenerator.quote(entity.name)) AS t SET \(sets.joined(separator: ", ")) FROM unnest(\(arrays.joined(separator: ", "))) AS u(\(names.joined(separator: ", "))) WHERE t.\"Z_PK\" = u.k AND t.\"Z_OPT\" = u.v RETURNING t.\"Z_PK\"",
                bindings, entity: entity, expected: updates.map(\.key))
        }
    }

    /// Rows of one entity per `INSERT`: a statement's arrays stay a few megabytes, and the
    /// server runs one while the next is encoded.
    static let insertChunk = 10_000

    /// Each entity's inserts as `INSERT … SELECT … FROM unnest(…)` statements of at most
    /// ``insertChunk`` rows, sent without waiting: the next chunk is encoded while the server
    /// inserts the previous one (postgres-nio runs them in order on the writer). Every statement
    /// sent is waited for before this returns or throws, so the caller's `ROLLBACK` comes after
    /// them; the first failure is the one reported.
    private func applyInserts(_ changes: StoreChangeSet) throws(LoomError) {
        guard !changes.inserts.isEmpty else { return }
        var sent: [(statement: PGConnection.PendingStatement, entity: EntityDescription, key: Int64?)] = []
        var failure: LoomError?
        func send(_ inserts: ArraySlice<StoreChangeSet.Insert>, of entity: EntityDescription) throws(LoomError) {
            let text = insertStatement(entity)
            var start = inserts.startIndex
            while start < inserts.endIndex {
                let chunk = inserts[start..<min(start + Self.insertChunk, inserts.endIndex)]
                start = chunk.endIndex
                sent.append((writer.send(text, try insertBindings(chunk, of: entity)), entity, chunk.count == 1 ? chunk.first!.key : nil))
            }
        }
        do throws(LoomError) {
            // Most saves insert objects of one entity: no grouping (which copies every insert).
            let first = changes.inserts[0].entity
            if changes.inserts.allSatisfy({ $0.entity === first }) {
                try send(changes.inserts[...], of: first)
            } else {
                for (entity, inserts) in groupedByEntity(changes.inserts, \.entity) { try send(inserts[...], of: entity) }
            }
        } catch {
            failure = error
        }
        for (statement, entity, key) in sent {
            do {
                try statement.wait()
            } catch {
                if failure == nil { failure = translate(error, entity: entity, key: key) }
            }
        }
        if let failure { throw failure }
    }

    /// An entity's `INSERT` of rows bound as arrays (``insertBindings(_:of:)``).
    private func insertStatement(_ entity: EntityDescription) -> String {
        var arrays = ["$1::int8[]"], names = ["k"], columns = ["\"Z_PK\""]
        for slot in 0..<entity.storedValueCount {
            arrays.append("$\(slot + 2)::\(ColumnKind.of(entity, slot).arrayName)")
            names.append("c\(slot)")
            columns.append(sql.column(entity, slot))
        }
        return "INSERT INTO \(SQLGenerator.quote(entity.name)) (\(columns.joined(separator: ", ")), \"Z_OPT\") SELECT \(names.joined(separator: ", ")), 1 FROM unnest(\(arrays.joined(separator: ", "))) AS u(\(names.joined(separator: ", ")))"
    }

    /// The keys and each column's values of `inserts`, as arrays.
    private func insertBindings(_ inserts: ArraySlice<StoreChangeSet.Insert>, of entity: EntityDescription) throws(LoomError) -> PostgresBindings {
        var bindings = PostgresBindings()
        PostgreSQLValues.bindKeys(inserts.lazy.map(\.key), to: &bindings)
        for slot in 0..<entity.storedValueCount {
            try bindColumn(inserts.map { $0.values[slot] }, kind: ColumnKind.of(entity, slot), entity: entity, slot: slot, keys: inserts.map(\.key), to: &bindings)
        }
        return bindings
    }

    /// Binds one column's values as an array, naming the attribute and the object of a value
    /// PostgreSQL cannot store (`keys` is made only then).
    private func bindColumn<C: Collection>(_ values: C, kind: ColumnKind, entity: EntityDescription, slot: Int, keys: @autoclosure () -> [Int64], to bindings: inout PostgresBindings) throws(LoomError) where C.Element == StoredValue {
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

    private func applyLinks(_ links: [StoreChangeSet.LinkChange], insert: Bool) throws(LoomError) {
        var order: [String] = []
        var byTable: [String: [StoreChangeSet.LinkChange]] = [:]
        for link in links {
            if byTable[link.table.name] == nil { order.append(link.table.name) }
            byTable[link.table.name, default: []].append(link)
        }
        for name in order {
            let links = byTable[name]!
            var bindings = PostgresBindings()
            PostgreSQLValues.bindKeys(links.lazy.map(\.source), to: &bindings)
            PostgreSQLValues.bindKeys(links.lazy.map(\.target), to: &bindings)
            let table = SQLGenerator.quote(name)
            if insert {
                try onWriter("INSERT INTO \(table) (\"Z_SOURCE\", \"Z_TARGET\") SELECT s, t FROM unnest($1::int8[], $2::int8[]) AS u(s, t) ON CONFLICT DO NOTHING", bindings)
            } else {
                try onWriter("DELETE FROM \(table) AS j USING unnest($1::int8[], $2::int8[]) AS u(s, t) WHERE j.\"Z_SOURCE\" = u.s AND j.\"Z_TARGET\" = u.t", bindings)
            }
        }
    }
}
