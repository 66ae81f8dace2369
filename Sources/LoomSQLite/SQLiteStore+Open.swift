public import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
package import GRDB

/// Opening a store file: checking it before anything writes to it, creating or migrating it,
/// and closing it.
extension SQLiteStore {
    /// Opens the existing store at `url` read-only, with the schema saved in it: for tools that
    /// read or check a store they were not compiled against, without changing its file.
    ///
    /// ```swift
    /// let store = try SQLiteStore(readingAt: URL(filePath: "Library.loom"))
    /// let state = try store.maintenanceState()
    /// ```
    ///
    /// Nothing is written to the file: no schema, no migration, no WAL set-up, no checkpoint
    /// when it closes; its reads run on read-only connections, one snapshot each, while other
    /// processes keep writing. Every write throws `LoomError/Code/invalidRequest`.
    /// `options.isReadOnly` is set whatever it was.
    ///
    /// Not isolated: call it from any thread; it blocks that thread while it opens the file.
    ///
    /// - Throws: `LoomError` with code `LoomError/Code/storeFailure` when there is no store at
    ///   `url` or it cannot be opened, `LoomError/Code/notADatabase` when the file is not SQLite,
    ///   `LoomError/Code/notALoomStore` when it is a SQLite database without Loom's saved schema
    ///   (named as ``maintenanceState()`` names it).
    @_spi(LoomStore) public convenience init(readingAt url: URL, options: Options = Options()) throws(LoomError) {
        var options = options
        options.isReadOnly = true
        let state = try SQLiteStore.maintenanceState(at: url.path)
        try self.init(url: url, schema: Schema(record: state.schemaRecord), options: options, metadata: [:])
    }

    /// ``maintenanceState()`` of the store file at `path`, read before a store is opened on it.
    static func maintenanceState(at path: String) throws(LoomError) -> StoreMaintenanceState {
        try readExistingFile(at: path) { db in try maintenanceState(in: db, path: path) }
    }

    /// Runs `body` in one read of the existing file at `path`, on a read-only connection of its
    /// own: what is read from a store file before, or without, opening a store on it.
    ///
    /// - Throws: `LoomError` with code `LoomError/Code/storeFailure` when there is no file or it
    ///   cannot be read, `LoomError/Code/notADatabase` when it is not SQLite; what `body` throws
    ///   as a `LoomError`.
    static func readExistingFile<T>(at path: String, _ body: (Database) throws -> T) throws(LoomError) -> T {
        guard FileManager.default.fileExists(atPath: path) else {
            throw LoomError(.storeFailure, "There is no store at \(path).", path: path)
        }
        try checkHeader(path: path)
        do {
            let queue = try readOnlyQueue(path: path)
            defer { try? queue.close() }
            return try queue.read(body)
        } catch let error as LoomError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }

    /// Checks an existing store file for opening read-only, and returns its identifier: it must
    /// be a Loom store saved with `schema`, since a read-only store creates and migrates nothing.
    static func preflightReadOnly(path: String, schema: Schema) throws(LoomError) -> UUID {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        guard size > 0 else {
            throw LoomError(.storeFailure, "There is no store at \(path); a store opened read-only must exist.", path: path)
        }
        do {
            let queue = try readOnlyQueue(path: path)
            defer { try? queue.close() }
            return try queue.read { db in
                // A file without Loom's tables is named as the store SPI names it.
                _ = try maintenanceState(in: db, path: path)
                let existing = try checkExisting(db, schema: schema, path: path, readOnly: true)
                if existing.migrates {
                    throw LoomError(
                        .schemaMismatch,
                        "\(path) was saved with an older model and needs a migration, which a store opened read-only does not make; open it read-write once to migrate it.",
                        path: path)
                }
                return existing.id
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }

    /// Reads the first bytes of an existing file, so that a foreign file is reported before
    /// SQLite (or WAL set-up) touches it.
    static func checkHeader(path: String) throws(LoomError) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        if header.isEmpty { return }
        if header != Data("SQLite format 3\0".utf8) {
            throw LoomError(.notADatabase, "\(path) is not a SQLite database (its first bytes are not SQLite's header); open a Loom store, or choose another path.", path: path)
        }
    }

    /// Checks an existing, non-empty file read-only, so that a foreign database or a store
    /// made with another model is refused before anything (even WAL set-up) writes to it.
    /// Returns whether the store is to be migrated.
    static func preflight(path: String, schema: Schema) throws(LoomError) -> Bool {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        guard size > 0 else { return false }
        do {
            let queue = try readOnlyQueue(path: path)
            defer { try? queue.close() }
            return try queue.read { db in
                let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
                if tables.contains("loom_metadata") {
                    return try checkExisting(db, schema: schema, path: path, readOnly: true).migrates
                } else if !tables.isEmpty {
                    throw foreign(path: path, tables: tables)
                }
                return false
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }

    static func foreign(path: String, tables: [String]) -> LoomError {
        LoomError(.notALoomStore, "\(path) is a SQLite database that Loom did not create (it has tables \(tables.prefix(5).joined(separator: ", ")) and no loom_metadata); Loom does not open foreign databases.", path: path)
    }

    static func openError(_ error: any Error, path: String) -> LoomError {
        if let db = error as? DatabaseError, db.resultCode == .SQLITE_NOTADB {
            return LoomError(.notADatabase, "\(path) is not a SQLite database; open a Loom store, or choose another path.", path: path, underlying: db, storeCode: storeCode(of: db))
        }
        // A file cut short or overwritten fails here as SQLITE_CORRUPT: the same code as damage
        // found by a later read (`translate(_:entity:key:)`), with a message that says the file is damaged.
        if let db = error as? DatabaseError, db.resultCode == .SQLITE_CORRUPT {
            return LoomError(.notADatabase, "The store at \(path) is damaged (\(db.message ?? "database disk image is malformed")); run loom verify on it, or restore it from a backup.", path: path, underlying: db, storeCode: storeCode(of: db))
        }
        return LoomError(.storeFailure, "The store at \(path) could not be opened.", path: path, underlying: error, storeCode: (error as? DatabaseError).map(storeCode(of:)))
    }

    /// Migrates an existing store to `schema` on a connection of its own before the store's
    /// pool opens. GRDB's WAL set-up, when the pool opens a file whose `-wal` is missing or
    /// empty, commits a table made and dropped (its `grdb_issue_102`), which moves the file's
    /// change counter and leaves a free page: done before a migration that is then refused, it
    /// would change the file that the refusal promises to leave as it was. This connection does
    /// no such set-up (the file is in WAL mode already), so a refused migration rolls back and
    /// the file stays byte for byte the same.
    static func migrateBeforeOpening(
        path: String, schema: Schema, sql: SQLGenerator, configuration: Configuration, metadata: [String: String?], progress: TableMigrationProgress?,
        history: (origin: Int64, commit: UInt64)
    ) throws(LoomError) -> (value: UUID, migrated: Bool) {
        var configuration = configuration
        configuration.journalMode = .default
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw openError(error, path: path)
        }
        defer { try? queue.close() }
        return try bootstrap(queue, schema: schema, sql: sql, path: path, metadata: metadata, progress: progress, history: history)
    }

    /// Creates Loom's tables in a new file, or checks an existing store against the model and
    /// migrates it. Returns the store's UUID and whether it was migrated. A migration's history
    /// row is marked as the instance's commit in `history` (its origin, the commit's number).
    static func bootstrap(
        _ writer: some DatabaseWriter, schema: Schema, sql: SQLGenerator, path: String, metadata: [String: String?], progress: TableMigrationProgress?,
        history: (origin: Int64, commit: UInt64)
    ) throws(LoomError) -> (value: UUID, migrated: Bool) {
        do {
            // IMMEDIATE: of several processes opening an outdated store at once, one migrates
            // while the others wait for its commit, then find the store migrated.
            return try writer.writeWithoutTransaction { db -> (value: UUID, migrated: Bool) in
                var opened: (UUID, Bool)?
                try db.inTransaction(.immediate) {
                    opened = try bootstrap(db, schema: schema, sql: sql, path: path, progress: progress)
                    if opened?.1 == true { try recordMigrationCommit(db, history) }
                    try write(metadata, db)
                    return .commit
                }
                return opened!
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw openError(error, path: path)
        }
    }

    /// Writes the values that differ from those saved (`nil`: removes the key).
    static func write(_ metadata: [String: String?], _ db: Database) throws {
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            let saved = try DatabaseValue.fetchOne(db, sql: "SELECT value FROM loom_metadata WHERE key = ?", arguments: [key])
            let text = saved.flatMap { String.fromDatabaseValue($0) ?? Data.fromDatabaseValue($0).map { String(decoding: $0, as: UTF8.self) } }
            if text == value { continue }
            if let value {
                try db.execute(sql: "INSERT OR REPLACE INTO loom_metadata (key, value) VALUES (?, ?)", arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM loom_metadata WHERE key = ?", arguments: [key])
            }
        }
    }

    /// ``bootstrap(_:schema:sql:path:metadata:progress:history:)`` inside its transaction.
    private static func bootstrap(_ db: Database, schema: Schema, sql: SQLGenerator, path: String, progress: TableMigrationProgress?) throws -> (UUID, Bool) {
        let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        if tables.contains("loom_metadata") {
            return try checkExisting(db, schema: schema, path: path, progress: progress)
        }
        if !tables.isEmpty { throw foreign(path: path, tables: tables) }
        let id = UUID()
        try db.execute(sql: "CREATE TABLE loom_metadata (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL)")
        try db.execute(sql: "CREATE TABLE loom_keys (entity TEXT PRIMARY KEY NOT NULL, next INTEGER NOT NULL)")
        for statement in sql.createStatements() + historyStatements { try db.execute(sql: statement) }
        let record = try JSONEncoder().encode(schema.record)
        try db.execute(sql: "INSERT INTO loom_metadata (key, value) VALUES ('storeIdentifier', ?), ('schema', ?), ('versionHash', ?), ('formatVersion', 1)",
                       arguments: [id.uuidString, record, schema.versionHash])
        return (id, false)
    }

    /// Checks an existing store against the model and returns its UUID, and whether it was saved
    /// with another model. A store saved with an older model is migrated when the change can be
    /// inferred (``SchemaMigration``), unless `readOnly` (the preflight), which only checks that
    /// it can be.
    private static func checkExisting(
        _ db: Database, schema: Schema, path: String, readOnly: Bool = false, progress: TableMigrationProgress? = nil
    ) throws -> (id: UUID, migrates: Bool) {
        var metadata: [String: DatabaseValue] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT key, value FROM loom_metadata") {
            // A damaged file's NULL or number throws rather than traps (GRDB's subscripts trap).
            metadata[try row.decode(forColumn: "key")] = row["value"] as DatabaseValue
        }
        guard let idText = String.fromDatabaseValue(metadata["storeIdentifier"] ?? .null), let id = UUID(uuidString: idText),
              let recordData = Data.fromDatabaseValue(metadata["schema"] ?? .null) ?? String.fromDatabaseValue(metadata["schema"] ?? .null).map({ Data($0.utf8) }),
              let saved = try? JSONDecoder().decode(SchemaRecord.self, from: recordData) else {
            throw LoomError(.notALoomStore, "\(path) has a loom_metadata table but no readable store identifier or schema; the file is damaged or was not made by Loom.", path: path)
        }
        if saved.versionHash != schema.versionHash {
            let migration = try SchemaMigration.infer(from: saved, to: schema, path: path)
            if !readOnly { try migrate(db, migration, to: schema, sql: SQLGenerator(schema: schema, dialect: SQLiteDialect()), path: path, progress: progress) }
        }
        // Indexes may change without a migration: create those the model asks for; and the
        // history tables of a store made before Loom kept history.
        if !readOnly {
            for statement in historyStatements { try db.execute(sql: statement) }
            try upgradeHistoryTable(db)
            let sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
            for statement in sql.indexStatements() { try db.execute(sql: statement) }
            try mergeKeySpaces(db, sql: sql)
        }
        return (id, saved.versionHash != schema.versionHash)
    }

    /// Gives each hierarchy one key space (see `SQLGenerator.KeySpace`): a store saved before
    /// had a counter per entity; its root's counter now starts past every key of the hierarchy.
    private static func mergeKeySpaces(_ db: Database, sql: SQLGenerator) throws {
        for space in sql.sharedKeySpaces {
            guard let marks = try Row.fetchOne(db, sql: space.marksQuery) else { continue }
            let statements = space.mergeStatements(next: try marks.decode(atIndex: 0), rootNext: try marks.decode(atIndex: 1), subentityRows: try marks.decode(atIndex: 2))
            for statement in statements { try db.execute(sql: statement) }
        }
    }

    /// The schema saved inside a store file, without opening it with a model: for tools that
    /// open stores they were not compiled against.
    public static func savedSchema(at url: URL) throws(LoomError) -> Schema {
        try Schema(record: savedRecord(at: url))
    }

    /// The schema record saved inside a store file, read without changing the file.
    static func savedRecord(at url: URL) throws(LoomError) -> SchemaRecord {
        try savedState(at: url).record
    }

    /// A read-only connection to an existing file that waits for another process opening,
    /// migrating or recovering it, rather than failing with "database is locked".
    ///
    /// A file still in rollback-journal mode (a transform stage's copy of the old version before
    /// its first open, which switches it to WAL) that a killed process left with a hot journal
    /// cannot be read read-only (`SQLITE_READONLY_ROLLBACK`): a read-write connection, which
    /// changes nothing else, first rolls the interrupted transaction back, as any open would.
    ///
    /// Its statements are logged as a store's are (see ``tracedQueue(path:configuration:)``).
    package static func readOnlyQueue(path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(SQLiteStore.busyTimeout)
        do {
            return try tracedQueue(path: path, configuration: configuration)
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_READONLY_ROLLBACK {
            try rollBackHotJournal(path: path)
            return try tracedQueue(path: path, configuration: configuration)
        }
    }

    /// A connection to `path` whose statements SQL logging (``LoomLogging``, `LOOM_SQL_DEBUG`)
    /// shows, through the same ``SQLTracer`` as a store's own connections: every connection the
    /// `loom` verbs open is one of these, so that each verb shows the SQL it runs. With SQL
    /// logging off it is a plain connection, without a hook.
    package static func tracedQueue(path: String, configuration: Configuration) throws -> DatabaseQueue {
        var configuration = configuration
        if let tracer = SQLTracer.make(path: path, trace: nil) {
            // The configuration (so the queue) keeps the tracer as long as its connection lives.
            configuration.prepareDatabase { db in
                if let connection = db.sqliteConnection { tracer.install(on: connection) }
            }
        }
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// Opens `path` read-write in whatever journal mode it has and reads its schema, which makes
    /// SQLite roll back a hot rollback journal left by a killed process.
    static func rollBackHotJournal(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(SQLiteStore.busyTimeout)
        let queue = try tracedQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        try queue.inDatabase { db in _ = try Row.fetchOne(db, sql: "SELECT 1 FROM sqlite_master LIMIT 1") }
    }

    /// Closes the store: every later call (reads, saves, key reservations) throws
    /// `LoomError/Code/closed`. Closing again does nothing.
    public func close() throws(LoomError) {
        // The watcher first, outside the write gate: it may be handing commits on.
        watcher.withLock { watcher in
            watcher?.stop()
            watcher = nil
        }
        // Waits for a write in progress (a save, or an exclusive write) to finish.
        try writeScope.close { () throws(LoomError) in
            snapshots.closeAll()
            readers.close()
            // A statement left unfinalized would keep the writer connection from closing.
            historyWriter.close()
            // Everything into the file itself, so that the file alone is the whole store once
            // closed. SQLite does it when the last connection closes, except after another
            // connection (the watcher's) shared the WAL index, and when another process has the
            // file open; then this is the last chance before the other one's close. A read-only
            // store writes nothing, not even this.
            if !isReadOnly { _ = try? pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") } }
            do { try pool.close() } catch { throw translate(error, entity: nil) }
        }
    }
}
