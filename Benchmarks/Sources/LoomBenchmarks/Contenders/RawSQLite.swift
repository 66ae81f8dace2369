import Foundation
import GRDBSQLite

/// SQLite's "copy the value now" destructor for bound text.
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// An error from the SQLite C API, with the statement or step that failed.
struct RawSQLiteError: Error, CustomStringConvertible {
    var code: Int32
    var message: String
    var description: String { "SQLite error \(code): \(message)" }
}

/// A connection through the SQLite C API, opened the way GRDB opens its own (read-write,
/// create, the library's default threading mode) and set up like every contender's.
///
/// `@unchecked Sendable`: a connection is used by one thread at a time; it is handed to a
/// worker thread before the thread starts, and the thread is joined before anyone else uses it.
final class RawDatabase: @unchecked Sendable {
    let handle: OpaquePointer

    /// Opens (creating if needed) the file at `path` in WAL mode with the benchmark's settings.
    init(path: String, synchronous: String = "NORMAL") throws {
        var db: OpaquePointer?
        let code = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        guard code == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw RawSQLiteError(code: code, message: message)
        }
        handle = db
        sqlite3_busy_timeout(db, 5_000)
        for pragma in BenchSettings.pragmas(synchronous: synchronous) { try execute(pragma) }
    }

    deinit { sqlite3_close_v2(handle) }

    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &error)
        if code != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "?"
            sqlite3_free(error)
            throw RawSQLiteError(code: code, message: "\(message) in \(sql)")
        }
    }

    func prepare(_ sql: String) throws -> RawStatement {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw RawSQLiteError(code: code, message: "\(String(cString: sqlite3_errmsg(handle))) in \(sql)")
        }
        return RawStatement(handle: statement, database: self)
    }

    /// The single value of a one-row, one-column query, as text.
    func scalar(_ sql: String) throws -> String? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.isNull(0) ? nil : statement.text(0)
    }
}

/// A prepared statement: bind, step, read columns, reset. Finalized when released.
final class RawStatement {
    let handle: OpaquePointer
    /// Keeps the connection open while the statement lives.
    let database: RawDatabase

    init(handle: OpaquePointer, database: RawDatabase) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    @inline(__always) func bind(_ value: Int64, at index: Int32) { sqlite3_bind_int64(handle, index, value) }
    @inline(__always) func bind(_ value: Int, at index: Int32) { sqlite3_bind_int64(handle, index, Int64(value)) }
    @inline(__always) func bind(_ value: Double, at index: Int32) { sqlite3_bind_double(handle, index, value) }
    @inline(__always) func bind(_ value: String, at index: Int32) { sqlite3_bind_text(handle, index, value, -1, SQLITE_TRANSIENT) }
    @inline(__always) func bind(_ value: Double?, at index: Int32) {
        if let value { sqlite3_bind_double(handle, index, value) } else { sqlite3_bind_null(handle, index) }
    }

    /// Steps once: `true` when a row is available, `false` when done.
    @inline(__always) func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw RawSQLiteError(code: code, message: String(cString: sqlite3_errmsg(database.handle)))
        }
    }

    /// Steps a statement that returns no rows, then resets it for the next use.
    @inline(__always) func run() throws {
        defer { sqlite3_reset(handle) }
        _ = try step()
    }

    @inline(__always) func reset() { sqlite3_reset(handle) }

    @inline(__always) func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    @inline(__always) func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }
    @inline(__always) func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    @inline(__always) func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    @inline(__always) func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
}

extension RawStatement {
    /// Binds an item to the 10 parameters of ``ItemSQL/insert``.
    @inline(__always) func bindItem(_ item: ItemData) {
        bind(item.id, at: 1)
        bind(item.serial, at: 2)
        bind(item.category, at: 3)
        bind(item.quantity, at: 4)
        bind(item.score, at: 5)
        bind(item.price, at: 6)
        bind(item.title, at: 7)
        bind(item.notes, at: 8)
        bind(item.createdAt.timeIntervalSinceReferenceDate, at: 9)
        bind(item.rating, at: 10)
    }

    /// Decodes the current row of a statement selecting ``ItemSQL/columns``.
    @inline(__always) func item() -> ItemData {
        ItemData(
            id: int64(0), serial: int(1), category: int(2), quantity: int(3),
            score: double(4), price: double(5), title: text(6), notes: text(7),
            createdAt: Date(timeIntervalSinceReferenceDate: double(8)),
            rating: isNull(9) ? nil : double(9))
    }

    /// Every row of the statement as items, then resets it.
    func items() throws -> [ItemData] {
        defer { reset() }
        var items: [ItemData] = []
        while try step() { items.append(item()) }
        return items
    }

    /// Runs ``ItemSQL/selectRange`` with a query's parameters and returns the items.
    func items(matching query: RangeQuery) throws -> [ItemData] {
        bind(query.category, at: 1)
        bind(query.low, at: 2)
        bind(query.high, at: 3)
        return try items()
    }
}

extension RawDatabase {
    /// Inserts items in one transaction.
    func insert(_ items: some Sequence<ItemData>) throws {
        try execute("BEGIN IMMEDIATE")
        let statement = try prepare(ItemSQL.insert)
        for item in items {
            statement.bindItem(item)
            try statement.run()
        }
        try execute("COMMIT")
    }

    /// Creates the Item table and its index.
    func createSchema() throws {
        try execute(ItemSQL.createTable)
        try execute(ItemSQL.createIndex)
    }

    /// The version of the SQLite library this process runs.
    static var libraryVersion: String { String(cString: sqlite3_libversion()) }

}
