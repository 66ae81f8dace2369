package import Foundation
@_spi(LoomStore) package import LoomCore
@_spi(LoomStore) import LoomSQLite
import LoomSQL
import GRDB

/// A Loom store opened by a tool, without the application's model, to read: the schema saved in
/// it, and its objects for a ``TextQuery``.
///
/// A SQLite store is opened read-only (``SQLiteStore/init(readingAt:options:)``): nothing in the
/// file changes (not even a checkpoint), and it reads while another process has the store open
/// and writes (WAL readers do not block writers). A PostgreSQL store is opened as the store
/// does. Both are read through the store SPI, except a SQLite query's rows, which are streamed
/// from the store's read connection.
///
/// ```swift
/// let store = try ReadOnlyStore(location: "Library.loom")
/// let query = try TextQuery(parsing: "Book where pages > 300", schema: store.schema)
/// try store.forEachRow(of: query) { row in print(row.key) }
/// ```
///
/// Use it from one thread at a time.
package final class ReadOnlyStore {
    /// The schema saved in the store.
    package let schema: Schema
    /// The store's identifier, the host of its object URIs.
    package let storeIdentifier: UUID
    private let store: any PersistentStore
    /// A SQLite store and the SQL of its saved schema, whose query rows are streamed.
    private let sqlite: (store: SQLiteStore, sql: SQLGenerator)?

    /// Opens a SQLite store file, or a PostgreSQL store given as a URL
    /// (`postgres://user@host:port/db?schema=name`).
    ///
    /// - Throws: `LoomError` when there is no store there (``LoomError/Code/storeFailure``), the
    ///   file is not a Loom store (``LoomError/Code/notADatabase``,
    ///   ``LoomError/Code/notALoomStore``), or it cannot be read.
    package init(location: String) throws(LoomError) {
        if PostgreSQLLocation.isURL(location) {
            let store = try PostgreSQLLocation.openExisting(location)
            schema = store.schema
            storeIdentifier = store.identifier
            self.store = store
            sqlite = nil
            return
        }
        let url = URL(filePath: location)
        let state = try SQLiteStore.savedState(at: url)
        schema = try Schema(record: state.record)
        guard let identifier = state.metadata["storeIdentifier"].flatMap(UUID.init(uuidString:)) else {
            throw LoomError(.notALoomStore, "\(location) has no readable store identifier; the file is damaged or was not made by Loom.", path: url.path)
        }
        storeIdentifier = identifier
        var options = SQLiteStore.Options(maximumReaderCount: 1)
        options.isReadOnly = true
        let store = try SQLiteStore(url: url, schema: schema, options: options)
        self.store = store
        sqlite = (store, SQLGenerator(schema: schema, dialect: SQLiteDialect()))
    }

    deinit {
        try? store.close()
    }

    /// Runs the query and calls `body` with each matching row, in the query's order. A SQLite
    /// store streams the rows from one read transaction (constant memory, one snapshot).
    ///
    /// - Throws: `LoomError` when the store cannot be read; what `body` throws.
    package func forEachRow(of query: TextQuery, _ body: (_ key: Int64, _ values: [StoredValue]) throws -> Void) throws {
        guard let (sqliteStore, sql) = sqlite else {
            for row in try store.fetch(query.storeQuery) { try body(row.key, row.values) }
            return
        }
        let (text, arguments) = sql.select(query.storeQuery)
        let width = query.entity.storedValueCount
        // One statement: SQLite reads it on one snapshot.
        try sqliteStore.withReadConnection { db in
            // Loom's own statement reading: text is read with its length, so a string holding
            // a NUL character comes out whole (GRDB's rows read C strings).
            try RawStatement.with(db, text) { statement in
                try statement.bind(arguments)
                while try statement.step() {
                    let row = statement.row(width: width)
                    try body(row.key, row.values)
                }
            }
        }
    }

    /// How many objects of `entity` the store holds.
    ///
    /// - Throws: `LoomError` when the store cannot be read.
    package func count(of entity: EntityDescription) throws -> Int {
        try store.count(StoreQuery(entity: entity))
    }

    /// The history transactions `descriptor` selects, oldest first (``HistoryTransaction``).
    ///
    /// - Throws: `LoomError` when the store cannot be read, or a token of the descriptor was
    ///   purged (``LoomError/Code/historyTokenExpired``), is another store's, is past the
    ///   store's last transaction (``LoomError/Code/historyTokenAhead``) or names a transaction
    ///   the store does not hold (``LoomError/Code/historyTokenMismatch``).
    package func fetchHistory(_ descriptor: HistoryDescriptor) throws -> [HistoryTransaction] {
        try store.fetchHistory(descriptor)
    }
}
