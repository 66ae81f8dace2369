@_spi(LoomStore) import LoomCore
import LoomSQL
import PostgresNIO

/// The reads of a PostgreSQL store, on any connection: the store's pool, its writer inside a
/// write transaction, or a snapshot's connection. The statements are ``SQLGenerator``'s in
/// ``PostgreSQLDialect``, the same shapes as SQLite's.
enum PostgreSQLReads {
    /// Binds a statement's arguments at their natural types.
    static func bindings(_ arguments: [StoredValue]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: arguments.count)
        for argument in arguments {
            do {
                try PostgreSQLValues.bind(argument, to: &bindings)
            } catch {
                throw LoomError(.invalidRequest, "A query's constant cannot be sent to PostgreSQL: \(error.reason).")
            }
        }
        return bindings
    }

    /// A row's `Z_PK`, `Z_OPT` and values, from column `offset` on.
    static func row(_ row: PostgresRow, width: Int, offset: Int = 0) throws -> StoreRow {
        var key: Int64 = 0, version: Int64 = 0
        var values: [StoredValue] = []
        values.reserveCapacity(width)
        for (i, cell) in row.enumerated() where i >= offset {
            switch i - offset {
            case 0: key = PostgreSQLValues.int64(cell)
            case 1: version = PostgreSQLValues.int64(cell)
            default: values.append(try PostgreSQLValues.value(cell))
            }
        }
        return StoreRow(key: key, version: version, values: values)
    }

    static func fetch(_ query: StoreQuery, _ sql: SQLGenerator, _ connection: PGConnection) throws -> [StoreRow] {
        let (text, arguments) = sql.select(query)
        let width = query.entity.storedValueCount
        return try connection.query(text, try bindings(arguments)).map { try row($0, width: width) }
    }

    /// ``fetch(_:_:_:)``, leaving out the values of the rows whose key and version `isKnown`
    /// (objects a context has registered at that version): they are not decoded.
    static func fetch(_ query: StoreQuery, _ sql: SQLGenerator, _ connection: PGConnection,
                      skippingValuesOf isKnown: (Int64, Int64) -> Bool) throws -> [StoreRow] {
        let (text, arguments) = sql.select(query)
        let width = query.entity.storedValueCount
        return try connection.query(text, try bindings(arguments)).map { cells in
            var iterator = cells.makeIterator()
            if let keyCell = iterator.next(), let versionCell = iterator.next() {
                let key = PostgreSQLValues.int64(keyCell), version = PostgreSQLValues.int64(versionCell)
                if isKnown(key, version) { return StoreRow(key: key, version: version, values: []) }
            }
            return try row(cells, width: width)
        }
    }

    static func count(_ query: StoreQuery, _ sql: SQLGenerator, _ connection: PGConnection) throws -> Int {
        let (text, arguments) = sql.count(query)
        let rows = try connection.query(text, try bindings(arguments))
        return rows.first.flatMap { $0.first.map(PostgreSQLValues.int64) }.map(Int.init) ?? 0
    }

    static func rows(of entity: EntityDescription, keys: [Int64], _ sql: SQLGenerator, _ connection: PGConnection) throws -> [StoreRow] {
        let width = entity.storedValueCount
        var bindings = PostgresBindings()
        if keys.count == 1 {
            bindings.append(keys[0])
            return try connection.query(sql.selectByKey(entity), bindings).map { try row($0, width: width) }
        }
        PostgreSQLValues.bindKeys(keys, to: &bindings)
        return try connection.query(sql.selectByKeys(entity), bindings).map { try row($0, width: width) }
    }

    static func related(_ relationship: ResolvedRelationship, keys: [Int64], _ sql: SQLGenerator, _ connection: PGConnection) throws -> [RelatedRow] {
        if relationship.leadsToSubentities {
            return try relationship.concreteDestinations(in: sql.schema).flatMap { try related($0, keys: keys, sql, connection) }.sorted(by: RelatedRow.storeOrder)
        }
        if case .foreignKey = relationship.storage {
            throw LoomError(.storeFailure, "\(relationship.reference) is a to-one relationship, read from its foreign key.")
        }
        let width = relationship.destination.storedValueCount
        var bindings = PostgresBindings()
        let text: String
        if keys.count == 1 {
            bindings.append(keys[0])
            text = sql.selectRelatedToOwner(relationship)
        } else {
            PostgreSQLValues.bindKeys(keys, to: &bindings)
            text = sql.selectRelated(relationship)
        }
        return try connection.query(text, bindings).map { r in
            RelatedRow(owner: PostgreSQLValues.int64(r.first { _ in true }!), row: try row(r, width: width, offset: 1))
        }
    }

    static func aggregate(_ query: AggregateQuery, _ sql: SQLGenerator, _ connection: PGConnection) throws -> [[StoredValue]] {
        let (text, arguments) = sql.aggregate(query)
        do {
            return try connection.query(text, try bindings(arguments)).map { row in try row.map(PostgreSQLValues.value) }
        } catch is NumericOverflow {
            throw LoomError(.integerOverflow, "A sum over \(query.entity.name) does not fit in a 64-bit integer; narrow the predicate, or sum a Double attribute.",
                            entity: query.entity.name)
        } catch let error as PSQLError where PostgreSQLStore.storeCode(of: error) == .postgresNumericValueOutOfRange {
            throw LoomError(.integerOverflow, "A value computed over \(query.entity.name) does not fit in a 64-bit integer (PostgreSQL: \(error.serverInfo?[.message] ?? "out of range")).",
                            entity: query.entity.name, underlying: error, storeCode: .postgresNumericValueOutOfRange)
        }
    }

    static func keys(_ query: StoreQuery, _ sql: SQLGenerator, _ connection: PGConnection) throws -> [Int64] {
        let (text, arguments) = sql.selectKeys(query)
        return try connection.query(text, try bindings(arguments)).map { PostgreSQLValues.int64($0.first { _ in true }!) }
    }
}
