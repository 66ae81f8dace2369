public import Foundation
import GRDB
@_spi(LoomStore) import LoomCore

extension SQLiteStore {
    /// Reads a SQLite pragma (`synchronous`, `journal_mode`, `page_size`…) on the writer
    /// connection, the one whose settings decide how commits are made: an `Int`, `Double`,
    /// `String`, `Data` or `nil`. For diagnostics and tests.
    public func unsafePragma(_ name: String) throws -> (any Sendable)? {
        guard name.allSatisfy({ $0.isLetter || $0 == "_" }) else { return nil }
        return try writeScope.exclusively { () throws -> (any Sendable)? in
            try pool.writeWithoutTransaction { db -> (any Sendable)? in
                switch try DatabaseValue.fetchOne(db, sql: "PRAGMA \(name)")?.storage ?? .null {
                case .null: return nil
                case .int64(let v): return Int(v)
                case .double(let v): return v
                case .string(let v): return v
                case .blob(let v): return v
                }
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

    /// Everything a store file holds, as lines: each schema object's SQL, then every row of every
    /// table, sorted. Read-only; for tests that check a failed operation left a store as it was
    /// (the file's bytes may differ after a checkpoint while its content does not). The rows of
    /// the history tables are left out: they hold commit times and process numbers.
    package static func contentDump(at url: URL) throws -> [String] {
        let queue = try readOnlyQueue(path: url.path)
        defer { try? queue.close() }
        return try queue.read { db in
            var lines: [String] = []
            for row in try Row.fetchAll(db, sql: "SELECT type, name, sql FROM sqlite_master ORDER BY type, name") {
                lines.append("\(row[0] as String? ?? "") \(row[1] as String? ?? ""): \(row[2] as String? ?? "")")
            }
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            // History rows hold times and process numbers, which differ from run to run.
            for table in tables where !table.hasPrefix("loom_history") {
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM \"\(table.replacingOccurrences(of: "\"", with: "\"\""))\"").map { "\(table) \($0)" }
                lines += rows.sorted()
            }
            return lines
        }
    }
}
