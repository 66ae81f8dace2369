package import Foundation
package import GRDB
import GRDBSQLite
@_spi(LoomStore) package import LoomCore

/// SQLite's "copy the value now" destructor for bound text and blobs.
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One of GRDB's cached prepared statements, bound, stepped and read through SQLite's C API.
///
/// The store's hot paths (saves, fetches, lookups) go through here rather than through GRDB's
/// `Row` and `StatementArguments`:
/// - values go straight between ``StoredValue`` and the statement, with no `DatabaseValue`,
///   no argument validation and no generic decoding per column (the benchmarks' profile);
/// - text is bound and read with its byte length, so a string holding NUL characters
///   round-trips exactly (GRDB binds and reads text as C strings, which would truncate it).
///
/// Use it only inside one GRDB database access, like the `Database` it came from. Every use
/// starts from a reset statement and leaves it reset.
package struct RawStatement {
    package let handle: OpaquePointer
    package let sql: String

    /// Wraps a prepared statement that stays alive (a GRDB `Statement`) for as long as this is used.
    package init(handle: OpaquePointer, sql: String) {
        self.handle = handle
        self.sql = sql
    }

    /// Runs `body` with the cached statement for `sql`, reset and with no bindings, and resets
    /// it afterwards (so no read stays open after the access).
    package static func with<T>(_ db: Database, _ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        try with(try db.cachedStatement(sql: sql).sqliteStatement, sql, body)
    }

    /// Runs `body` with a prepared statement, reset and with no bindings, and resets it
    /// afterwards.
    static func with<T>(_ handle: OpaquePointer, _ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        let statement = RawStatement(handle: handle, sql: sql)
        sqlite3_reset(statement.handle)
        defer {
            sqlite3_reset(statement.handle)
            sqlite3_clear_bindings(statement.handle)
        }
        return try body(statement)
    }

    // MARK: Binding

    /// Binds `value` to the 1-based parameter `index`.
    package func bind(_ value: StoredValue, at index: Int32) throws {
        let code: Int32
        switch value {
        case .null:
            code = sqlite3_bind_null(handle, index)
        case .integer(let v):
            code = sqlite3_bind_int64(handle, index, v)
        case .real(let v):
            code = sqlite3_bind_double(handle, index, v)
        case .text(var v):
            code = v.withUTF8 { bytes in
                // An empty buffer may have no address, which SQLite would bind as NULL.
                guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_bind_text(handle, index, "", 0, nil) }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text64(handle, index, $0, sqlite3_uint64(bytes.count), SQLITE_TRANSIENT, UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let v):
            code = v.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_bind_zeroblob(handle, index, 0) }
                return sqlite3_bind_blob64(handle, index, base, sqlite3_uint64(bytes.count), SQLITE_TRANSIENT)
            }
        }
        if code != SQLITE_OK { throw error(code) }
    }

    /// Binds `values` to consecutive parameters, the first at `index`.
    package func bind<C: Collection<StoredValue>>(_ values: C, from index: Int32 = 1) throws {
        var i = index
        for value in values {
            try bind(value, at: i)
            i += 1
        }
    }

    /// Binds the values of a row being written to consecutive parameters, the first at
    /// `index`, as ``bind(_:from:)`` does, but refuses a NaN: SQLite binds one as NULL, so the
    /// row would lose it (or a required column refuse it with a message that does not say why).
    ///
    /// - Throws: ``NotANumber`` with the NaN's position among `values`; what SQLite returns.
    package func bindWritten<C: Collection<StoredValue>>(_ values: C, from index: Int32 = 1) throws {
        var i = index
        for value in values {
            if case .real(let v) = value, v.isNaN { throw NotANumber(offset: Int(i - index)) }
            try bind(value, at: i)
            i += 1
        }
    }

    /// A NaN among the values of a row being written (``bindWritten(_:from:)``).
    package struct NotANumber: Error {
        /// The NaN's position among the values bound.
        package let offset: Int

        /// The error of a write refused for it: the NaN is the value of `slot` of the `entity`
        /// object `key` (of the store `store`, when known).
        package func refusal(_ entity: EntityDescription, slot: Int, key: Int64, store: UUID?) -> LoomError {
            let name = entity.storedValueName(at: slot)
            return LoomError(
                .unsupportedValue,
                "\(entity.name).\(name) is NaN in \(entity.name)/\(key), which a SQLite store cannot hold (SQLite stores NaN as NULL); nothing was written. Store a number, or nil in an optional attribute.",
                entity: entity.name, attributes: [name],
                objectID: store.map { AnyObjectID(storeIdentifier: $0, entityName: entity.name, primaryKey: key) })
        }
    }

    /// Binds `bytes` as text to the 1-based parameter `index`, as they are: text that is not
    /// valid UTF-8, which a `String` cannot hold (`loom load` writing back what `loom dump` read
    /// with ``nonUTF8Text(_:)``).
    package func bindText(bytes: Data, at index: Int32) throws {
        let code = bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return sqlite3_bind_text(handle, index, "", 0, nil) }
            return sqlite3_bind_text64(handle, index, base.assumingMemoryBound(to: CChar.self), sqlite3_uint64(buffer.count), SQLITE_TRANSIENT, UInt8(SQLITE_UTF8))
        }
        if code != SQLITE_OK { throw error(code) }
    }

    package func bind(_ value: Int64, at index: Int32) throws {
        let code = sqlite3_bind_int64(handle, index, value)
        if code != SQLITE_OK { throw error(code) }
    }

    // MARK: Stepping

    /// Makes the statement ready to run again; bindings are kept until bound anew.
    package func reset() {
        sqlite3_reset(handle)
    }

    /// Advances to the next row: `true` when there is one, `false` when the statement is done.
    package func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw error(code)
        }
    }

    /// Runs the statement to completion.
    package func execute() throws {
        while try step() {}
    }

    /// Every row as a ``StoreRow`` whose key, version and `width` values start at column
    /// `offset`; `owner` reads an extra leading column (see ``StoreRow``'s use in
    /// `fetchRelated`).
    func rows(width: Int, offset: Int32 = 0) throws -> [StoreRow] {
        var rows: [StoreRow] = []
        while try step() { rows.append(row(width: width, offset: offset)) }
        return rows
    }

    /// The current row as a ``StoreRow`` read from column `offset` on.
    package func row(width: Int, offset: Int32 = 0) -> StoreRow {
        row(key: sqlite3_column_int64(handle, offset), version: sqlite3_column_int64(handle, offset + 1), width: width, offset: offset)
    }

    /// The current row as a ``StoreRow`` whose key and version (columns `offset` and
    /// `offset + 1`) the caller has already read.
    package func row(key: Int64, version: Int64, width: Int, offset: Int32 = 0) -> StoreRow {
        // Reserved and appended rather than `init(unsafeUninitializedCapacity:)`, whose buffer
        // comes from the standard library's unspecialized allocator: it looks the storage
        // class's generic metadata up for every row, which the specialized allocation does
        // not.
        var values: [StoredValue] = []
        values.reserveCapacity(width)
        for i in 0..<width { values.append(column(offset + 2 + Int32(i))) }
        return StoreRow(key: key, version: version, values: values)
    }

    /// The value of column `index` (0-based) of the current row.
    ///
    /// Read through the column's `sqlite3_value`: each `sqlite3_column_*` call finds the
    /// column and checks for an allocation failure again, so a type test and a read cost two
    /// of those for every column. The value is "unprotected"
    /// (SQLite does not lock the connection's mutex around the `sqlite3_value_*` calls), which is
    /// safe here: a statement's connection is used by one thread at a time, the one reading it.
    package func column(_ index: Int32) -> StoredValue {
        guard let value = sqlite3_column_value(handle, index) else { return .null }
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT:
            return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let text = sqlite3_value_text(value) else { return .text("") }
            let count = Int(sqlite3_value_bytes(value))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            guard let bytes = sqlite3_value_blob(value) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: Int(sqlite3_value_bytes(value))))
        default:
            return .null
        }
    }

    package func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

    /// The bytes of column `index` (0-based) of the current row, as stored, when it is text that
    /// is not valid UTF-8; `nil` for any other value.
    ///
    /// ``column(_:)``, like every read of the store, repairs such text (each bad sequence becomes
    /// U+FFFD); the tools that must see or keep the stored bytes (`loom verify`, `loom dump`) ask
    /// for them here.
    package func nonUTF8Text(_ index: Int32) -> Data? {
        guard sqlite3_column_type(handle, index) == SQLITE_TEXT, let text = sqlite3_column_text(handle, index) else { return nil }
        let bytes = UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, index)))
        // ASCII, the common case, without building a string.
        if bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil { return nil }
        return Data(buffer: bytes)
    }

    /// A GRDB error for a failed call, with SQLite's extended code and message, so that the
    /// store's error translation treats it like any other.
    package func error(_ code: Int32) -> DatabaseError {
        let connection = sqlite3_db_handle(handle)
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        let message = connection.map { String(cString: sqlite3_errmsg($0)) }
        return DatabaseError(resultCode: ResultCode(rawValue: extended), message: message, sql: sql)
    }
}
