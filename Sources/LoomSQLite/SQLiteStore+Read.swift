import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
package import GRDB

/// Reading: the store SPI's reads, on the reader connections (or on the writer connection for
/// the thread that holds the write transaction).
extension SQLiteStore {
    @_spi(LoomStore) public func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        try sqlFetch(query) { _, _ in false }
    }

    @_spi(LoomStore) public func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try sqlFetch(query, skippingValuesOf: isKnown)
    }

    @_spi(LoomStore) public func count(_ query: StoreQuery) throws(LoomError) -> Int { try sqlCount(query) }

    @_spi(LoomStore) public func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        try sqlRows(of: entity, keys: keys)
    }

    @_spi(LoomStore) public func row(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow? {
        try sqlRow(of: entity, key: key)
    }

    @_spi(LoomStore) public func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        try sqlFetchRelated(relationship, keys: keys)
    }

    /// Keys as one JSON array parameter, read back with `json_each`.
    static func jsonArray(_ keys: [Int64]) -> String {
        var text = "["
        text.reserveCapacity(keys.count * 8 + 2)
        for (i, key) in keys.enumerated() {
            if i > 0 { text += "," }
            text += String(key)
        }
        return text + "]"
    }

    /// Runs one read statement on one of the store's reader connections (see
    /// ``ReaderConnections``), errors untranslated; on the thread that holds the write
    /// transaction, on the writer connection instead, so that it sees the transaction.
    ///
    /// No transaction around it: every read here is a single SQL statement, which SQLite runs
    /// on one snapshot by itself.
    func readStatement<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        if writeScope.isHeldByCurrentThread {
            return try pool.writeWithoutTransaction { db in try RawStatement.with(db, sql, body) }
        }
        return try readers.read(sql, body)
    }

    /// Runs `body` on one of the store's GRDB read connections, outside any transaction (`body`
    /// begins and ends its own, e.g. one snapshot for all of a tool's checks), with errors
    /// untranslated. For the `loom` tool's reads of a store it opened with
    /// ``init(readingAt:options:)``, which read what the store SPI does not carry (a dump's raw
    /// bytes, the layout a verification checks).
    ///
    /// Not isolated: blocks the calling thread while `body` runs.
    package func withReadConnection<T>(_ body: (Database) throws -> T) throws -> T {
        if isClosed { throw closedError() }
        return try pool.unsafeRead(body)
    }
}
