public import Foundation
import GRDB
@_spi(LoomStore) public import LoomCore
import LoomSQL

/// Applies an inferred ``SchemaMigration`` in SQLite's DDL, inside the caller's transaction (the
/// one that opens the store, `BEGIN IMMEDIATE`): all of it or, on any failure, none of it.
///
/// Renamed columns and new optional ones are changed in place (`ALTER TABLE … RENAME COLUMN` and
/// `ADD COLUMN`, which do not touch the rows); every other change to a table rebuilds it: a new table made from the model, filled
/// with one `INSERT … SELECT` from the saved one, which then goes, and the new one takes its
/// name and indexes. SQLite's own DDL is transactional, so a failure or a crash leaves the
/// store as it was.
extension SQLiteStore {
    /// What opening the store at `url` with `schema` would migrate, one sentence per change
    /// ("rename Note.title to heading", "add entity Folder", …), read without changing the file:
    /// empty when the store already has this model or does not exist yet.
    ///
    /// Whether the saved data fits the new model (no NULLs in a newly required attribute without
    /// a default, no duplicates under a new uniqueness constraint) is only known when the
    /// migration runs.
    ///
    /// - Throws: ``LoomError/Code/schemaMismatch`` naming the change that cannot be inferred, and
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
        // With a progress report: the rows every rebuild copies, for the fraction done.
        var copying: RebuildProgress?
        if let progress {
            var total = 0
            for case .rebuild(_, _, let from) in migration.tables {
                total += try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(SQLGenerator.quote(from))") ?? 0
            }
            copying = RebuildProgress(report: progress, total: total)
        }
        // One-to-many become many-to-many: read the saved keys before their tables change.
        for fill in migration.filledJoinTables {
            for statement in sql.createJoinTable(fill.to) { try db.execute(sql: statement) }
            let (source, target) = (SQLGenerator.quote(fill.sourceFrom), SQLGenerator.quote(fill.targetFrom))
            try db.execute(sql: """
                INSERT INTO \(SQLGenerator.quote(fill.to.name)) (\(SQLGenerator.quote(JoinTable.sourceColumn)), \(SQLGenerator.quote(JoinTable.targetColumn))) \
                SELECT \(source), \(target) FROM \(SQLGenerator.quote(fill.from)) WHERE \(source) IS NOT NULL AND \(target) IS NOT NULL
                """)
        }
        for change in migration.tables {
            switch change {
            case .create(let entity):
                try db.execute(sql: sql.createTable(entity))
                for statement in sql.uniqueIndexStatements(entity) { try db.execute(sql: statement) }
            case .drop(let name):
                try db.execute(sql: "DROP TABLE \(SQLGenerator.quote(name))")
                try db.execute(sql: "DELETE FROM loom_keys WHERE entity = ?", arguments: [name])
            case .alter(let entity, let renames, let slots):
                for rename in renames {
                    try db.execute(sql: "ALTER TABLE \(SQLGenerator.quote(entity.name)) RENAME COLUMN \(SQLGenerator.quote(rename.from)) TO \(SQLGenerator.quote(rename.to))")
                }
                for slot in slots {
                    try db.execute(sql: "ALTER TABLE \(SQLGenerator.quote(entity.name)) ADD COLUMN \(sql.columnDefinition(entity, slot))")
                }
            case .rebuild(let entity, let sources, let from):
                try rebuild(db, entity, sources, from: from, sql: sql, path: path, progress: &copying)
                if from != entity.name {
                    try db.execute(sql: "UPDATE loom_keys SET entity = ? WHERE entity = ?", arguments: [entity.name, from])
                }
            }
        }
        // A copied table may keep its name (a changed owning side): the saved one moves aside.
        for copy in migration.copiedJoinTables where copy.from == copy.to.name {
            try db.execute(sql: "ALTER TABLE \(SQLGenerator.quote(copy.from)) RENAME TO \(SQLGenerator.quote("loom_migrating_\(copy.from)"))")
            try db.execute(sql: "DROP INDEX IF EXISTS \(SQLGenerator.quote("loom_join_\(copy.from)_target"))")
        }
        for table in migration.createdJoinTables {
            for statement in sql.createJoinTable(table) { try db.execute(sql: statement) }
        }
        for copy in migration.copiedJoinTables {
            let from = copy.from == copy.to.name ? "loom_migrating_\(copy.from)" : copy.from
            try db.execute(sql: """
                INSERT INTO \(SQLGenerator.quote(copy.to.name)) (\(SQLGenerator.quote(JoinTable.sourceColumn)), \(SQLGenerator.quote(JoinTable.targetColumn))) \
                SELECT \(SQLGenerator.quote(copy.sourceFrom)), \(SQLGenerator.quote(copy.targetFrom)) FROM \(SQLGenerator.quote(from))
                """)
            if copy.from == copy.to.name { try db.execute(sql: "DROP TABLE \(SQLGenerator.quote(from))") }
        }
        for name in migration.droppedJoinTables where !migration.copiedJoinTables.contains(where: { $0.from == name && $0.to.name == name }) {
            try db.execute(sql: "DROP TABLE \(SQLGenerator.quote(name))")
        }
        for statement in sql.indexStatements() { try db.execute(sql: statement) }
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

    /// Makes `entity`'s table anew and fills it from the saved one.
    /// Rows copied so far by the rebuilds of one migration, and where to report them.
    struct RebuildProgress {
        let report: TableMigrationProgress
        let total: Int
        var copied = 0
        /// Rows per `INSERT … SELECT`: about 1% of the migration, at least 10,000.
        var chunk: Int { max(10_000, total / 100) }
    }

    private static func rebuild(
        _ db: Database, _ entity: EntityDescription, _ sources: [SchemaMigration.ColumnSource], from: String, sql: SQLGenerator, path: String,
        progress: inout RebuildProgress?
    ) throws {
        let table = SQLGenerator.quote(from), building = SQLGenerator.quote("loom_migrating_\(entity.name)")
        try db.execute(sql: sql.createTable(entity, named: "loom_migrating_\(entity.name)"))
        var columns = ["\"Z_PK\"", "\"Z_OPT\""], selected = ["\"Z_PK\"", "\"Z_OPT\""]
        var arguments: [DatabaseValue] = []
        for (slot, source) in sources.enumerated() {
            columns.append(sql.column(entity, slot))
            switch source {
            case .column(let name):
                selected.append(SQLGenerator.quote(name))
            case .columnOrValue(let name, let value):
                selected.append("COALESCE(\(SQLGenerator.quote(name)), ?)")
                arguments.append(value.databaseValue)
            case .value(let value):
                selected.append("?")
                arguments.append(value.databaseValue)
            }
        }
        let copy = "INSERT INTO \(building) (\(columns.joined(separator: ", "))) SELECT \(selected.joined(separator: ", ")) FROM \(table)"
        do {
            if var report = progress {
                // In key order, a chunk at a time, reporting after each.
                let rows = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
                var done = 0, last: Int64 = 0
                report.report(entity.name, 0, rows, report.total == 0 ? 1 : Double(report.copied) / Double(report.total))
                while done < rows {
                    try db.execute(sql: copy + " WHERE \"Z_PK\" > ? ORDER BY \"Z_PK\" LIMIT ?", arguments: StatementArguments(arguments + [last.databaseValue, report.chunk.databaseValue]))
                    let changed = db.changesCount
                    if changed == 0 { break }
                    done += changed
                    report.copied += changed
                    last = try Int64.fetchOne(db, sql: "SELECT MAX(\"Z_PK\") FROM \(building)") ?? last
                    report.report(entity.name, done, rows, report.total == 0 ? 1 : Double(report.copied) / Double(report.total))
                }
                progress = report
            } else {
                try db.execute(sql: copy, arguments: StatementArguments(arguments))
            }
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_NOTNULL {
            throw try missingValues(db, entity, sources, table: table, path: path, underlying: error)
        }
        try db.execute(sql: "DROP TABLE \(table)")
        try db.execute(sql: "ALTER TABLE \(building) RENAME TO \(SQLGenerator.quote(entity.name))")
        for (statement, constraint) in zip(sql.uniqueIndexStatements(entity), entity.uniquenessConstraints) {
            do {
                try db.execute(sql: statement)
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
                throw try duplicates(db, entity, constraint, sql: sql, path: path, underlying: error)
            }
        }
    }

    /// The error for a required column left without a value: names the attribute and counts
    /// the rows that hold no value for it.
    private static func missingValues(
        _ db: Database, _ entity: EntityDescription, _ sources: [SchemaMigration.ColumnSource], table: String, path: String, underlying: DatabaseError
    ) throws -> LoomError {
        for (slot, source) in sources.enumerated() {
            guard case .attribute(let attribute) = entity.storedValue(at: slot), !attribute.isOptional else { continue }
            let empty: Int
            switch source {
            case .column(let name):
                empty = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table) WHERE \(SQLGenerator.quote(name)) IS NULL") ?? 0
            case .value(.null):
                empty = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
            default:
                continue
            }
            if empty > 0 {
                return LoomError(
                    .migrationFailed,
                    "The store at \(path) cannot be migrated: \(entity.name).\(attribute.name) is required in the model, but \(empty) saved \(entity.name) row\(empty == 1 ? " has" : "s have") no value for it. Give the attribute a default value, or keep it optional. The store was not changed.",
                    entity: entity.name, attributes: [attribute.name], path: path, underlying: underlying, storeCode: storeCode(of: underlying))
            }
        }
        return LoomError(.migrationFailed, "The store at \(path) cannot be migrated: a required value of \(entity.name) is missing. The store was not changed.",
                         entity: entity.name, path: path, underlying: underlying, storeCode: storeCode(of: underlying))
    }

    /// The error for a uniqueness constraint the saved rows break: names one duplicated value.
    private static func duplicates(
        _ db: Database, _ entity: EntityDescription, _ constraint: [String], sql: SQLGenerator, path: String, underlying: DatabaseError
    ) throws -> LoomError {
        let columns = sql.constraintColumns(entity, constraint)
        let row = try Row.fetchOne(db, sql: "SELECT \(columns), COUNT(*) FROM \(SQLGenerator.quote(entity.name)) GROUP BY \(columns) HAVING COUNT(*) > 1 LIMIT 1")
        let key = row.map { row in
            (0..<constraint.count).map { i in "\(constraint[i]) = \(row[i] as DatabaseValue)" }.joined(separator: ", ")
        } ?? "?"
        let count: Int = row.map { $0[constraint.count] } ?? 0
        return LoomError(
            .migrationFailed,
            "The store at \(path) cannot be migrated: the model makes \(entity.name)'s \(constraint.joined(separator: ", ")) unique, but \(count) saved rows share \(key). Remove the duplicates with the previous model first. The store was not changed.",
            entity: entity.name, attributes: constraint, path: path, underlying: underlying, storeCode: storeCode(of: underlying))
    }
}
