public import Foundation
import GRDB
@_spi(LoomStore) public import LoomCore
import LoomSQL

/// Applies an inferred ``SchemaMigration`` (the statements LoomSQL makes of it, shared with the
/// PostgreSQL store) inside the caller's transaction (the one that opens the store, `BEGIN
/// IMMEDIATE`): all of it or, on any failure, none of it. SQLite's own DDL is transactional, so
/// a failure or a crash leaves the store as it was.
extension SQLiteStore {
    /// What opening the store at `url` with `schema` would migrate, one sentence per change
    /// ("rename Note.title to heading", "add entity Folder", …), read without changing the file:
    /// empty when the store already has this model or does not exist yet.
    ///
    /// Whether the saved data fits the new model (no NULLs in a newly required attribute without
    /// a default, no duplicates under a new uniqueness constraint) is only known when the
    /// migration runs.
    ///
    /// - Throws: `LoomError/Code/schemaMismatch` naming the change that cannot be inferred, and
    ///   the errors of ``init(url:schema:options:)`` for a file that is not a Loom store.
    public static func requiredMigration(forStoreAt url: URL, schema: Schema) throws(LoomError) -> [String] {
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
        guard size > 0 else { return [] }
        let saved = try savedRecord(at: url)
        if saved.versionHash == schema.versionHash { return [] }
        return try SchemaMigration.infer(from: saved, to: schema, path: url.path).summary
    }

    static func migrate(
        _ db: Database, _ migration: SchemaMigration, to schema: Schema, sql: SQLGenerator, path: String, progress: TableMigrationProgress? = nil
    ) throws {
        let statements = sql.migrationStatements(migration)
        // With a progress report: the rows every rebuild copies, for the fraction done.
        var copying: RebuildProgress?
        if let progress {
            var total = 0
            for case .copyRows(_, _, let table, _, _, _) in statements {
                total += try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(SQLGenerator.quote(table))") ?? 0
            }
            copying = RebuildProgress(report: progress, total: total)
        }
        for statement in statements {
            switch statement {
            case .execute(let text, let arguments):
                try db.execute(sql: text, arguments: StatementArguments(arguments.map(\.databaseValue)))
            case .copyRows(let entity, let sources, let table, let building, let copy, let arguments):
                do {
                    try copyRows(db, entity.name, copy, StatementArguments(arguments.map(\.databaseValue)), table: table, building: building, progress: &copying)
                } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_NOTNULL {
                    throw try missingValues(db, entity, sources, table: table, sql: sql, path: path, underlying: error)
                }
            case .uniqueIndex(let entity, let constraint, let text, let query):
                do {
                    try db.execute(sql: text)
                } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
                    throw try duplicates(db, entity, constraint, query: query, path: path, underlying: error)
                }
            }
        }
        let record = try JSONEncoder().encode(schema.record)
        try db.execute(sql: "UPDATE loom_metadata SET value = ? WHERE key = 'schema'", arguments: [record])
        try db.execute(sql: "UPDATE loom_metadata SET value = ? WHERE key = 'versionHash'", arguments: [schema.versionHash])
        try expireHistory(db)
    }

    /// After a schema change, the history before it names entities and properties of another
    /// model, and does not say what the migration changed: it is ended by an empty transaction
    /// of the migration's, and every token before that one is ``LoomError/Code/historyTokenExpired``
    /// (a consumer refreshes everything and starts again from `currentHistoryToken()`); a
    /// coordinator watching the file refreshes its contexts whole.
    static func expireHistory(_ db: Database) throws {
        guard try db.tableExists("loom_history") else { return }
        try upgradeHistoryTable(db)
        try db.execute(
            sql: "INSERT INTO loom_history (timestamp, author, process, processName, entities, changes) VALUES (?, 'Loom migration', ?, ?, ',', NULL)",
            arguments: [Date().timeIntervalSince1970, ProcessInfo.processInfo.processIdentifier, ProcessInfo.processInfo.processName])
        let number = db.lastInsertedRowID
        try db.execute(sql: "DELETE FROM loom_history WHERE number < ?", arguments: [number])
        try db.execute(sql: "INSERT OR REPLACE INTO loom_metadata (key, value) VALUES (?, ?)", arguments: [historyDeletedKey, String(number)])
    }

    /// Marks the history row that ends the history at a migration (``expireHistory(_:)``) as
    /// commit `history.commit` of the store instance `history.origin`, in the migration's
    /// transaction: the migration takes its place among the instance's commits in the history,
    /// as a save's row does, with the number its receipt reports.
    static func recordMigrationCommit(_ db: Database, _ history: (origin: Int64, commit: UInt64)) throws {
        guard try db.tableExists("loom_history") else { return }
        try db.execute(
            sql: "UPDATE loom_history SET origin = ?, originCommit = ? WHERE number = (SELECT MAX(number) FROM loom_history) AND author = 'Loom migration'",
            arguments: [history.origin, Int64(history.commit)])
    }

    /// Rows copied so far by the rebuilds of one migration, and where to report them.
    struct RebuildProgress {
        let report: TableMigrationProgress
        let total: Int
        var copied = 0
        /// Rows per `INSERT … SELECT`: about 1% of the migration, at least 10,000.
        var chunk: Int { max(10_000, total / 100) }
    }

    /// Runs a rebuilt table's copy: whole, or with a progress report in key order, a chunk at a
    /// time, reporting after each.
    private static func copyRows(
        _ db: Database, _ entityName: String, _ copy: String, _ arguments: StatementArguments, table: String, building: String,
        progress: inout RebuildProgress?
    ) throws {
        guard var report = progress else {
            try db.execute(sql: copy, arguments: arguments)
            return
        }
        let rows = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(SQLGenerator.quote(table))") ?? 0
        var done = 0, last: Int64 = 0
        report.report(entityName, 0, rows, report.total == 0 ? 1 : Double(report.copied) / Double(report.total))
        while done < rows {
            try db.execute(sql: copy + " WHERE \"Z_PK\" > ? ORDER BY \"Z_PK\" LIMIT ?", arguments: arguments + [last, report.chunk])
            let changed = db.changesCount
            if changed == 0 { break }
            done += changed
            report.copied += changed
            last = try Int64.fetchOne(db, sql: "SELECT MAX(\"Z_PK\") FROM \(SQLGenerator.quote(building))") ?? last
            report.report(entityName, done, rows, report.total == 0 ? 1 : Double(report.copied) / Double(report.total))
        }
        progress = report
    }

    /// The error for a required column left without a value: names the attribute and counts
    /// the rows that hold no value for it.
    private static func missingValues(
        _ db: Database, _ entity: EntityDescription, _ sources: [SchemaMigration.ColumnSource], table: String, sql: SQLGenerator, path: String,
        underlying: DatabaseError
    ) throws -> LoomError {
        for (attribute, query) in sql.missingValueQueries(entity, sources, table: table) {
            let empty = try Int.fetchOne(db, sql: query) ?? 0
            if empty > 0 {
                return MigrationErrors.missingValues(entity.name, attribute: attribute, count: empty, location: path, underlying: underlying, storeCode: storeCode(of: underlying))
            }
        }
        return MigrationErrors.missingValues(entity.name, attribute: nil, count: 0, location: path, underlying: underlying, storeCode: storeCode(of: underlying))
    }

    /// The error for a uniqueness constraint the saved rows break: names one duplicated value.
    private static func duplicates(
        _ db: Database, _ entity: EntityDescription, _ constraint: [String], query: String, path: String, underlying: DatabaseError
    ) throws -> LoomError {
        let row = try Row.fetchOne(db, sql: query)
        let key = row.map { row in
            (0..<constraint.count).map { i in "\(constraint[i]) = \(row[i] as DatabaseValue)" }.joined(separator: ", ")
        } ?? "?"
        let count: Int = row.map { $0[constraint.count] } ?? 0
        return MigrationErrors.duplicates(entity.name, constraint: constraint, key: key, count: count, location: path, underlying: underlying, storeCode: storeCode(of: underlying))
    }
}
