import Foundation
import Loom

/// Makes and changes SQLite files behind Loom's back, for bad-input tests, through the sqlite3
/// command-line shell-free path: Loom's own SQLite store module exposes a raw SQL hook for tests.
enum ForeignDatabase {
    static func create(at url: URL) throws {
        try SQLiteStore.unsafeExecuteRawSQL("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('Ann');", at: url)
    }

    static func execute(_ sql: String, at url: URL) throws {
        try SQLiteStore.unsafeExecuteRawSQL(sql, at: url)
    }
}

extension SQLiteStore {
    func pragma<T>(_ name: String) throws -> T? {
        try unsafePragma(name) as? T
    }
}
