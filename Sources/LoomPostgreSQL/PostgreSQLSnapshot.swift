import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL

/// A query generation on PostgreSQL: one connection of its own inside a `REPEATABLE READ READ
/// ONLY` transaction, whose snapshot is taken by its first statement. Every read sees the
/// database as of that moment, whatever commits after it. Reads from several threads take turns.
///
/// `@unchecked Sendable`: the connection is only used with `lock` held.
final class PostgreSQLSnapshot: StoreSnapshot, @unchecked Sendable {
    let schema: Schema
    private let sql: SQLGenerator
    private let lock = NSLock()
    private var connection: PGConnection?
    private let location: String

    init(store: PostgreSQLStore) throws(LoomError) {
        schema = store.schema
        sql = store.sql
        location = store.configuration.description
        do {
            let connection = try PGConnection.open(store.configuration)
            do {
                try connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try connection.query("SELECT 1 FROM loom_metadata LIMIT 1")
            } catch {
                connection.close()
                throw error
            }
            self.connection = connection
        } catch {
            throw store.translate(error, entity: nil)
        }
    }

    /// PostgreSQL keeps the row versions a snapshot may read (vacuum waits); nothing to count here.
    var retainedBytes: Int { 0 }

    func close() {
        let connection = lock.withLock { () -> PGConnection? in
            defer { self.connection = nil }
            return self.connection
        }
        if let connection {
            _ = try? connection.query("ROLLBACK")
            connection.close()
        }
    }

    private func read<T>(_ body: (PGConnection) throws -> T) throws(LoomError) -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else {
            throw LoomError(.closed, "The query generation of the PostgreSQL store at \(location) was released; read the current data instead.")
        }
        do {
            return try body(connection)
        } catch let error as LoomError {
            throw error
        } catch where PGConnection.isLost(error) {
            // The snapshot lived in the lost session's transaction: it cannot be taken again.
            throw LoomError(.storeFailure, "The query generation of the PostgreSQL store at \(location) lost its connection (\(PostgreSQLStore.describe(error))), and with it its snapshot; read the current data, or pin a new generation.", underlying: error)
        } catch {
            throw LoomError(.storeFailure, "A read of a query generation of the PostgreSQL store at \(location) failed: \(PostgreSQLStore.describe(error)).", underlying: error)
        }
    }

    func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] { try read { try PostgreSQLReads.fetch(query, sql, $0) } }
    func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (Int64, Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try read { try PostgreSQLReads.fetch(query, sql, $0, skippingValuesOf: isKnown) }
    }
    func count(_ query: StoreQuery) throws(LoomError) -> Int { try read { try PostgreSQLReads.count(query, sql, $0) } }
    func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        if keys.isEmpty { return [] }
        return try read { try PostgreSQLReads.rows(of: entity, keys: keys, sql, $0) }
    }
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        if keys.isEmpty { return [] }
        return try read { try PostgreSQLReads.related(relationship, keys: keys, sql, $0) }
    }
    func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] { try read { try PostgreSQLReads.aggregate(query, sql, $0) } }
    func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] { try read { try PostgreSQLReads.keys(query, sql, $0) } }
}

extension PostgreSQLStore {
    @_spi(LoomStore) public func openSnapshot() throws(LoomError) -> any StoreSnapshot {
        if isClosed { throw closedError() }
        let snapshot = try PostgreSQLSnapshot(store: self)
        snapshots.withLock { list in
            list.removeAll { $0.isClosed }
            list.append(snapshot)
        }
        return snapshot
    }
}

extension PostgreSQLSnapshot {
    var isClosed: Bool { lock.withLock { connection == nil } }
}
