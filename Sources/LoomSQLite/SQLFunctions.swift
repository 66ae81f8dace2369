import Foundation
package import GRDB
import GRDBSQLite
@_spi(LoomStore) import LoomCore

/// SQL functions that give SQLite the exact string semantics of Loom's in-memory evaluator
/// (``LoomStringFunctions``), registered on every connection.
///
/// Registered with SQLite's C API rather than GRDB's `DatabaseFunction`, which reads text
/// arguments as C strings: a string holding a NUL character must be compared whole.
package enum SQLFunctions {
    static let operators: [PredicateNode.StringOperator] = [.contains, .hasPrefix, .hasSuffix, .containsIgnoringCaseAndDiacritics]

    static func name(of op: PredicateNode.StringOperator) -> String {
        switch op {
        case .contains: "loom_contains"
        case .hasPrefix: "loom_has_prefix"
        case .hasSuffix: "loom_has_suffix"
        case .containsIgnoringCaseAndDiacritics: "loom_contains_ci"
        }
    }

    package static func register(in db: Database) {
        guard let connection = db.sqliteConnection else { return }
        register(on: connection)
    }

    /// Registers the functions on a connection of SQLite's C API.
    static func register(on connection: OpaquePointer) {
        let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC
        for (i, op) in operators.enumerated() {
            // The operator travels as the function's user data: its position, plus one.
            sqlite3_create_function_v2(connection, name(of: op), 2, flags, UnsafeMutableRawPointer(bitPattern: i + 1), { context, _, arguments in
                let op = SQLFunctions.operators[Int(bitPattern: sqlite3_user_data(context)) - 1]
                guard let arguments, case .text(let a) = SQLFunctions.value(arguments[0]), case .text(let b) = SQLFunctions.value(arguments[1]) else {
                    return sqlite3_result_null(context)
                }
                sqlite3_result_int64(context, LoomStringFunctions.evaluate(op, a, b) ? 1 : 0)
            }, nil, nil, nil)
        }
        sqlite3_create_function_v2(connection, "loom_lower", 1, flags, nil, { context, _, arguments in
            guard let arguments, case .text(let a) = SQLFunctions.value(arguments[0]) else { return sqlite3_result_null(context) }
            SQLFunctions.result(.text(LoomStringFunctions.lowercase(a)), context)
        }, nil, nil, nil)
        sqlite3_create_function_v2(connection, "loom_length", 1, flags, nil, { context, _, arguments in
            guard let arguments else { return sqlite3_result_null(context) }
            SQLFunctions.result(LoomStringFunctions.length(SQLFunctions.value(arguments[0])), context)
        }, nil, nil, nil)
    }

    /// A function argument as a stored value, text read with its length.
    static func value(_ value: OpaquePointer?) -> StoredValue {
        switch sqlite3_value_type(value) {
        case SQLITE_INTEGER: return .integer(sqlite3_value_int64(value))
        case SQLITE_FLOAT: return .real(sqlite3_value_double(value))
        case SQLITE_TEXT:
            guard let text = sqlite3_value_text(value) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value))), as: UTF8.self))
        case SQLITE_BLOB:
            guard let bytes = sqlite3_value_blob(value) else { return .blob(Data()) }
            return .blob(Data(bytes: bytes, count: Int(sqlite3_value_bytes(value))))
        default: return .null
        }
    }

    /// Sets a function's result.
    static func result(_ value: StoredValue, _ context: OpaquePointer?) {
        switch value {
        case .null: sqlite3_result_null(context)
        case .integer(let v): sqlite3_result_int64(context, v)
        case .real(let v): sqlite3_result_double(context, v)
        case .text(var v):
            v.withUTF8 { bytes in
                guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_result_text(context, "", 0, nil) }
                base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_result_text64(context, $0, sqlite3_uint64(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self), UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let v):
            v.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress, bytes.count > 0 {
                    sqlite3_result_blob64(context, base, sqlite3_uint64(bytes.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
                } else {
                    sqlite3_result_zeroblob(context, 0)
                }
            }
        }
    }
}
