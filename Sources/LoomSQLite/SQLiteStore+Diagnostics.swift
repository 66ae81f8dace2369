public import Foundation
import GRDB

extension SQLiteStore {
    /// Reads a SQLite pragma (`synchronous`, `journal_mode`, `page_size`…) on the writer
    /// connection, the one whose settings decide how commits are made: an `Int`, `Double`,
    /// `String`, `Data` or `nil`. For diagnostics and tests.
    public func unsafePragma(_ name: String) throws -> (any Sendable)? {
        guard name.allSatisfy({ $0.isLetter || $0 == "_" }) else { return nil }
        writeGate.lock()
        defer { writeGate.unlock() }
        return try pool.writeWithoutTransaction { db -> (any Sendable)? in
            switch try DatabaseValue.fetchOne(db, sql: "PRAGMA \(name)")?.storage ?? .null {
            case .null: return nil
            case .int64(let v): return Int(v)
            case .double(let v): return v
            case .string(let v): return v
            case .blob(let v): return v
            }
        }
    }

    /// Runs raw SQL on a database file, bypassing every check Loom makes. Changing a Loom
    /// store this way can break it; meant for tests that simulate damage, and for repairs.
    public static func unsafeExecuteRawSQL(_ sql: String, at url: URL) throws {
        let queue = try DatabaseQueue(path: url.path)
        try queue.write { try $0.execute(sql: sql) }
        try queue.close()
    }
}
