@_spi(LoomStore) import LoomCore
import LoomSQL
import GRDB

/// What runs a SQLite store's reads: the store itself, on its reader connections, or a
/// ``SQLiteSnapshot``, on the one connection whose read transaction pins a query generation.
/// The statements, their binding and the decoding of rows are the same for both.
protocol SQLiteReader: AnyObject {
    /// The store whose file is read: its SQL generator, and its translation of errors.
    var store: SQLiteStore { get }
    /// Throws ``LoomError/Code/closed`` when nothing can be read any more.
    func checkReadable() throws(LoomError)
    /// Runs one statement, errors untranslated.
    func readStatement<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws -> T
}

extension SQLiteStore {
    var store: SQLiteStore { self }

    func checkReadable() throws(LoomError) {
        if isClosed { throw closedError() }
    }
}

extension SQLiteReader {
    /// Runs one read statement with SQLite errors translated.
    func read<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws(LoomError) -> T {
        try checkReadable()
        do {
            return try readStatement(sql, body)
        } catch let error as LoomError {
            throw error
        } catch {
            throw store.translate(error, entity: nil)
        }
    }

    func sqlFetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        let (text, arguments) = store.sql.select(query)
        let width = query.entity.storedValueCount
        return try read(text) { statement in
            try statement.bind(arguments)
            var rows: [StoreRow] = []
            while try statement.step() {
                if rows.isEmpty { rows.reserveCapacity(firstRowsCapacity(limit: query.fetchLimit)) }
                let key = statement.int64(0), version = statement.int64(1)
                rows.append(isKnown(key, version) ? StoreRow(key: key, version: version, values: []) : statement.row(key: key, version: version, width: width))
            }
            return rows
        }
    }

    func sqlCount(_ query: StoreQuery) throws(LoomError) -> Int {
        let (text, arguments) = store.sql.count(query)
        return try read(text) { statement in
            try statement.bind(arguments)
            return try statement.step() ? Int(statement.int64(0)) : 0
        }
    }

    /// One row by key: a lookup by ID, without JSON and without arrays.
    func sqlRow(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow? {
        let width = entity.storedValueCount
        return try read(store.sql.selectByKey(entity)) { statement in
            try statement.bind(key, at: 1)
            return try statement.step() ? statement.row(width: width) : nil
        }
    }

    func sqlRows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        if keys.isEmpty { return [] }
        if keys.count == 1 { return try sqlRow(of: entity, key: keys[0]).map { [$0] } ?? [] }
        let width = entity.storedValueCount
        return try read(store.sql.selectByKeys(entity)) { statement in
            try statement.bind(.text(SQLiteStore.jsonArray(keys)), at: 1)
            return try statement.rows(width: width)
        }
    }

    func sqlFetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        if keys.isEmpty { return [] }
        if relationship.leadsToSubentities {
            var related: [RelatedRow] = []
            for narrowed in relationship.concreteDestinations(in: store.schema) { related += try sqlFetchRelated(narrowed, keys: keys) }
            return related.sorted(by: RelatedRow.storeOrder)
        }
        if case .foreignKey = relationship.storage {
            throw LoomError(.storeFailure, "\(relationship.reference) is a to-one relationship, read from its foreign key.")
        }
        let width = relationship.destination.storedValueCount
        let oneOwner = keys.count == 1
        return try read(oneOwner ? store.sql.selectRelatedToOwner(relationship) : store.sql.selectRelated(relationship)) { statement in
            if oneOwner {
                try statement.bind(keys[0], at: 1)
            } else {
                try statement.bind(.text(SQLiteStore.jsonArray(keys)), at: 1)
            }
            var related: [RelatedRow] = []
            while try statement.step() {
                if related.isEmpty { related.reserveCapacity(firstRowsCapacity(limit: nil)) }
                related.append(RelatedRow(owner: statement.int64(0), row: statement.row(width: width, offset: 1)))
            }
            return related
        }
    }

    /// A values or aggregate query as one SQL statement (see ``AggregateQuery``).
    func sqlAggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        try checkReadable()
        let (text, arguments) = store.sql.aggregate(query)
        let width = query.columns.count
        do {
            return try readStatement(text) { statement in
                try statement.bind(arguments)
                var rows: [[StoredValue]] = []
                while try statement.step() {
                    rows.append((0..<Int32(width)).map(statement.column))
                }
                return rows
            }
        } catch let error as DatabaseError where error.message == "integer overflow" {
            throw LoomError(.integerOverflow, "A sum over \(query.entity.name) does not fit in a 64-bit integer (SQLite: integer overflow); narrow the predicate, or sum a Double attribute.",
                            entity: query.entity.name, underlying: error, storeCode: SQLiteStore.storeCode(of: error))
        } catch let error as LoomError {
            throw error
        } catch {
            throw store.translate(error, entity: query.entity)
        }
    }

    /// The primary keys a query matches, in order, without their values.
    func sqlFetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        try checkReadable()
        let (text, arguments) = store.sql.selectKeys(query)
        do {
            return try readStatement(text) { statement in
                try statement.bind(arguments)
                var keys: [Int64] = []
                while try statement.step() { keys.append(statement.int64(0)) }
                return keys
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw store.translate(error, entity: query.entity)
        }
    }
}

/// Room for a result's rows once its first row is read: most results have more than one, and
/// an array grown from one element by doubling was reallocated five times for a to-many
/// fault's ten rows, copying the rows so far each time.
@inline(__always)
private func firstRowsCapacity(limit: Int?) -> Int {
    if let limit, limit > 0 { return min(limit, 16) }
    return 16
}
