public import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
package import GRDB
import Synchronization

/// A store in a SQLite file, on GRDB's `DatabasePool`: WAL mode, many concurrent readers and
/// one writer, every save one transaction.
///
/// ```swift
/// let store = try SQLiteStore(url: URL(filePath: "Library.loom"), schema: try Schema(Book.self))
/// let container = PersistentContainer(store: store)
/// ```
///
/// The file holds one table per entity (primary key `Z_PK`, optimistic-locking version
/// `Z_OPT`, one column per attribute, an indexed `Z_<name>` foreign-key column per to-one
/// relationship, a `Z_<name>_ORDER` column per ordered to-many), one join table per
/// many-to-many relationship (`Z_<Entity>_<relationship>`, indexed both ways), unique indexes
/// for uniqueness constraints, and Loom's own tables: `loom_metadata` (store UUID, saved schema, version hash) and `loom_keys` (the
/// primary-key allocator).
public final class SQLiteStore: PersistentStore, SQLiteReader {
    /// How durable a commit is.
    public enum Synchronous: String, Sendable {
        /// Durable against a process crash; a power loss may lose the last commits (never
        /// corrupts). The default, and GRDB's and Core Data's WAL default.
        case normal = "NORMAL"
        /// Durable against power loss too, at the cost of a sync per commit.
        case full = "FULL"
    }

    /// Options for opening a store.
    public struct Options: Sendable {
        public var synchronous: Synchronous = .normal
        /// How many connections may read at once.
        public var maximumReaderCount: Int = 4
        /// Called with the SQL of every statement the store runs, on the connection's thread,
        /// for diagnostics and tests that count queries. Parameters are not expanded: values
        /// can be personal data.
        ///
        /// ```swift
        /// var options = SQLiteStore.Options()
        /// options.trace = { sql in print(sql) }
        /// ```
        public var trace: (@Sendable (String) -> Void)?
        /// Whether every save also records a history transaction (on by default; see
        /// `ManagedObjectContext/fetchHistory(_:)`). Off, saves record nothing, and a
        /// consumer of the history misses them.
        public var recordsHistory: Bool = true
        public init(synchronous: Synchronous = .normal, maximumReaderCount: Int = 4, trace: (@Sendable (String) -> Void)? = nil, recordsHistory: Bool = true) {
            self.synchronous = synchronous
            self.maximumReaderCount = maximumReaderCount
            self.trace = trace
            self.recordsHistory = recordsHistory
        }
    }

    public let identifier: UUID
    public let schema: Schema
    /// Where the store lives.
    public let url: URL
    let pool: DatabasePool
    /// The connections reads run on (writes go through `pool`'s writer).
    let readers: ReaderConnections
    let sql: SQLGenerator
    /// ``Options/recordsHistory``.
    let recordsHistory: Bool
    /// Held by every use of the writer connection (a change set, a key reservation, a write
    /// transaction, closing) for its whole length: GRDB's writer runs one access at a time,
    /// but a write transaction spans several accesses, which nothing else may come between.
    /// The thread holding it reads on the writer connection, so that it sees its transaction.
    @_spi(LoomStore) public let writeScope: WriteScope
    /// The receipt of the migration this instance made to the model when it opened the store:
    /// its first commit. `nil` when it migrated nothing (a new store, one already on the model,
    /// or one another process migrated while this one waited).
    @_spi(LoomStore) public let migrationReceipt: CommitReceipt?
    /// What this instance's history rows carry in `origin`: its watcher skips them.
    let origin = Int64.random(in: 1...Int64.max)
    /// The history rows' INSERT and buffers, and what the writer tells the watcher of its
    /// commits; used with the ``writeScope`` held.
    let historyWriter = HistoryWriter()
    /// The thread that finds other instances' commits, once ``observeRemoteCommits(_:)`` started it.
    let watcher = Mutex<RemoteCommitWatcher?>(nil)
    /// The query-generation snapshots taken on this store (``openSnapshot()``), closed with it.
    let snapshots = SnapshotList()

    /// Opens the store at `url`, creating it when the file does not exist or is empty, and
    /// migrating it when it was saved with an older model whose changes can be inferred
    /// (`SchemaMigration`), in one transaction, before it is used.
    ///
    /// - Throws: `LoomError` with code `LoomError/Code/notADatabase` when the file is not
    ///   SQLite, `LoomError/Code/notALoomStore` when it is a SQLite database Loom did not
    ///   create, `LoomError/Code/schemaMismatch` (naming the change and every difference) when
    ///   the store was made with another model and the change cannot be inferred,
    ///   `LoomError/Code/migrationFailed` when the saved data does not fit the new model (naming
    ///   the attribute and the rows), `LoomError/Code/storeFailure` when it cannot be opened.
    ///   Nothing in the file is changed in any of these cases.
    public convenience init(url: URL, schema: Schema, options: Options = Options()) throws(LoomError) {
        try self.init(url: url, schema: schema, options: options, metadata: [:])
    }

    /// Opens the store as ``init(url:schema:options:)`` does, and writes `metadata` into
    /// `loom_metadata` in the transaction that creates or migrates it (a `nil` value removes its
    /// key; a value already saved is not written again), reporting a migration's table rebuilds
    /// to `migrationProgress` as they fill.
    @_spi(LoomStore) public init(
        url: URL, schema: Schema, options: Options = Options(), metadata: [String: String?], migrationProgress: TableMigrationProgress? = nil
    ) throws(LoomError) {
        self.url = url
        self.schema = schema
        self.sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
        self.recordsHistory = options.recordsHistory
        let path = url.path
        let scope = WriteScope { SQLiteStore.closedError(path: path) }
        self.writeScope = scope
        try SQLiteStore.checkHeader(path: path)
        let migrates = try SQLiteStore.preflight(path: path, schema: schema)
        var configuration = Configuration()
        configuration.maximumReaderCount = max(1, options.maximumReaderCount)
        configuration.journalMode = .wal
        // A write transaction spans several writer accesses (see `withWriteTransaction`).
        configuration.allowsUnsafeTransactions = true
        // Another process (or another container on the file) writing: wait for it, rather than
        // fail at once with SQLITE_BUSY.
        configuration.busyMode = .timeout(SQLiteStore.busyTimeout)
        let synchronous = options.synchronous.rawValue
        // The configuration (so the pool) keeps the tracer as long as its connections live.
        let tracer = SQLTracer.make(path: path, trace: options.trace)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            SQLFunctions.register(in: db)
            if let tracer, let connection = db.sqliteConnection { tracer.install(on: connection) }
        }
        var migration: CommitReceipt?
        if migrates {
            let sql = self.sql
            migration = try scope.opening { () throws(LoomError) in
                try SQLiteStore.migrateBeforeOpening(path: path, schema: schema, sql: sql, configuration: configuration, metadata: metadata, progress: migrationProgress)
            }.migration
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB's WAL set-up resets the writer to NORMAL after prepareDatabase ran: say it
            // again on the writer, or `.full` would silently not sync every commit.
            try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        } catch {
            throw SQLiteStore.openError(error, path: path)
        }
        do {
            let (pool, sql) = (self.pool, self.sql)
            let opened = try scope.opening { () throws(LoomError) in
                try SQLiteStore.bootstrap(pool, schema: schema, sql: sql, path: path, metadata: metadata, progress: migrationProgress)
            }
            identifier = opened.value
            migrationReceipt = migration ?? opened.migration
        } catch {
            try? pool.close()
            throw error
        }
        readers = ReaderConnections(path: path, maximum: configuration.maximumReaderCount, tracer: tracer)
    }

    /// How long a write waits for another connection's write transaction before it fails.
    static let busyTimeout: TimeInterval = 10

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
        path: String, schema: Schema, sql: SQLGenerator, configuration: Configuration, metadata: [String: String?], progress: TableMigrationProgress?
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
        return try bootstrap(queue, schema: schema, sql: sql, path: path, metadata: metadata, progress: progress)
    }

    /// Creates Loom's tables in a new file, or checks an existing store against the model and
    /// migrates it. Returns the store's UUID and whether it was migrated.
    static func bootstrap(
        _ writer: some DatabaseWriter, schema: Schema, sql: SQLGenerator, path: String, metadata: [String: String?], progress: TableMigrationProgress?
    ) throws(LoomError) -> (value: UUID, migrated: Bool) {
        do {
            // IMMEDIATE: of several processes opening an outdated store at once, one migrates
            // while the others wait for its commit, then find the store migrated.
            return try writer.writeWithoutTransaction { db -> (value: UUID, migrated: Bool) in
                var opened: (UUID, Bool)?
                try db.inTransaction(.immediate) {
                    opened = try bootstrap(db, schema: schema, sql: sql, path: path, progress: progress)
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

    /// ``bootstrap(_:schema:sql:path:metadata:progress:)`` inside its transaction.
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
            metadata[row["key"]] = row["value"] as DatabaseValue
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
            for statement in SQLGenerator(schema: schema, dialect: SQLiteDialect()).indexStatements() { try db.execute(sql: statement) }
        }
        return (id, saved.versionHash != schema.versionHash)
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

    // MARK: Reading

    @_spi(LoomStore) public func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        try sqlFetch(query) { _, _ in false }
    }

    @_spi(LoomStore) public func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try sqlFetch(query, skippingValuesOf: isKnown)
    }

    @_spi(LoomStore) public func count(_ query: StoreQuery) throws(LoomError) -> Int { try sqlCount(query) }

    @_spi(LoomStore) public func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        try sqlRows(of: entity, keys: keys)
    }

    @_spi(LoomStore) public func row(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow? {
        try sqlRow(of: entity, key: key)
    }

    @_spi(LoomStore) public func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        try sqlFetchRelated(relationship, keys: keys)
    }

    /// Keys as one JSON array parameter, read back with `json_each`.
    static func jsonArray(_ keys: [Int64]) -> String {
        var text = "["
        text.reserveCapacity(keys.count * 8 + 2)
        for (i, key) in keys.enumerated() {
            if i > 0 { text += "," }
            text += String(key)
        }
        return text + "]"
    }

    /// Runs one read statement on one of the store's reader connections (see
    /// ``ReaderConnections``), errors untranslated; on the thread that holds the write
    /// transaction, on the writer connection instead, so that it sees the transaction.
    ///
    /// No transaction around it: every read here is a single SQL statement, which SQLite runs
    /// on one snapshot by itself.
    func readStatement<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        if writeScope.isHeldByCurrentThread {
            return try pool.writeWithoutTransaction { db in try RawStatement.with(db, sql, body) }
        }
        return try readers.read(sql, body)
    }

    // MARK: Writing

    /// Runs `body` on the writer connection, with errors translated.
    private func onWriter<T>(_ body: (Database) throws -> T) throws(LoomError) -> T {
        do {
            return try pool.writeWithoutTransaction(body)
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: nil)
        }
    }

    @_spi(LoomStore) public func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) {
        try writeScope.transaction(
            begin: {
                try onWriter { db in
                    try Self.control(db, "BEGIN IMMEDIATE TRANSACTION")
                    if recordsHistory { historyWriter.began(db) }
                }
            },
            body,
            commit: {
                try onWriter { db in
                    // A transaction of several change sets (a batch request's chunks) writes the
                    // history its last row continued now, once. `apply` alone applies one.
                    if recordsHistory { try historyWriter.finish(db) }
                    try Self.control(db, "COMMIT TRANSACTION")
                    if recordsHistory { historyWriter.committed(db, sequence: lastCommitSequence + 1) }
                }
            },
            rollBack: rollBack)
    }

    /// Ends the open transaction without writing it. Only on a path that already throws the
    /// error that made it fail: if the rollback fails too, SQLite has rolled back already (a
    /// failed COMMIT or an I/O error ends the transaction) or the connection is gone.
    private func rollBack() {
        _ = try? pool.writeWithoutTransaction { db in
            if db.isInsideTransaction { try db.execute(sql: "ROLLBACK TRANSACTION") }
        }
    }

    @discardableResult
    @_spi(LoomStore) public func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        try writeScope.write { () throws(LoomError) -> CommitReceipt in
            if writeScope.isHeldByCurrentThread {
                // Inside the caller's transaction: atomic on its own, committed with it.
                try applyInSavepoint(changes)
                return writeScope.receiptOfOpenTransaction
            }
            // Alone: one writer access that begins, applies and commits. Without a savepoint: in
            // WAL mode SQLite copies every existing page a savepoint's statements change into a
            // sub-journal, a large part of a save's cost. A refusal rolls back and applies again
            // under one, so that its conflicts are read in the transaction that refused it.
            return try writeScope.asOwner { () throws(LoomError) -> CommitReceipt in
                if try applyAlone(changes, underSavepoint: false) == nil { return writeScope.commit() }
                guard var refused = try applyAlone(changes, underSavepoint: true) else { return writeScope.commit() }
                defer { rollBack() }
                refused.storeConflicts = try changes.conflicts(in: self)
                throw refused
            }
        }
    }

    /// Begins a transaction, applies `changes` and commits, or returns the refusal (a version
    /// conflict or a uniqueness violation) that stopped it. Under a savepoint, a refusal leaves
    /// the transaction open with none of the changes in it, for the conflicts to be read; without
    /// one, it rolls the transaction back. Any other failure rolls back and throws.
    private func applyAlone(_ changes: StoreChangeSet, underSavepoint: Bool) throws(LoomError) -> LoomError? {
        try onWriter { db in
            try Self.control(db, "BEGIN IMMEDIATE TRANSACTION")
            if recordsHistory { historyWriter.began(db) }
            do {
                if underSavepoint {
                    try applyUnderSavepoint(changes, db)
                } else {
                    try applyStatements(changes, db)
                }
                try Self.control(db, "COMMIT TRANSACTION")
                if recordsHistory { historyWriter.committed(db, sequence: lastCommitSequence + 1) }
                return nil
            } catch let error as LoomError where error.code == .versionConflict || error.code == .uniquenessViolation {
                if !underSavepoint { try Self.control(db, "ROLLBACK TRANSACTION") }
                return error
            } catch {
                if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK TRANSACTION") }
                throw error
            }
        }
    }

    /// Applies a change set inside the open transaction, under a savepoint: on failure nothing
    /// of it remains, and a refusal carries the conflicts read inside the transaction.
    private func applyInSavepoint(_ changes: StoreChangeSet) throws(LoomError) {
        do {
            try onWriter { db in try applyUnderSavepoint(changes, db) }
        } catch where error.code == .versionConflict || error.code == .uniquenessViolation {
            var refused = error
            refused.storeConflicts = try changes.conflicts(in: self)
            throw refused
        }
    }

    /// Runs the statements of a change set in the open transaction, under a savepoint: if one
    /// fails, none of them has any effect and the transaction stays open (a refusal's conflicts
    /// are read in it).
    private func applyUnderSavepoint(_ changes: StoreChangeSet, _ db: Database) throws {
        try Self.control(db, "SAVEPOINT loom_apply")
        let history = historyWriter.mark
        do {
            try applyStatements(changes, db)
            try Self.control(db, "RELEASE SAVEPOINT loom_apply")
        } catch {
            // A history row written or continued under the savepoint is gone with it.
            historyWriter.restore(history)
            // An I/O error or a full disk can make SQLite roll the whole transaction back by
            // itself: the savepoint went with it, and that error is the one to report.
            guard db.isInsideTransaction else { throw error }
            // If the statements' effects cannot be undone, that failure is what the caller gets:
            // it ends the whole transaction instead of reading conflicts from a half-applied one.
            try Self.control(db, "ROLLBACK TO SAVEPOINT loom_apply")
            try Self.control(db, "RELEASE SAVEPOINT loom_apply")
            throw error
        }
    }

    /// Runs a transaction-control statement from GRDB's statement cache: preparing BEGIN,
    /// SAVEPOINT, RELEASE and COMMIT again for every save was a large part of a one-object
    /// save's time.
    private static func control(_ db: Database, _ sql: String) throws {
        try db.cachedStatement(sql: sql).execute()
    }

    /// Runs the statements of a change set on the writer connection, in the caller's
    /// transaction, in the order and shapes `LoomSQL` plans for every SQL store.
    private func applyStatements(_ changes: StoreChangeSet, _ db: Database) throws {
        // Consecutive statements of one text (a batch's thousands of DELETEs) reuse the
        // prepared statement without looking the text up in GRDB's cache again.
        var last: (sql: String, handle: OpaquePointer)?
        try sql.forEachStatement(of: changes) { (planned) throws in
            let handle: OpaquePointer
            if let last, last.sql == planned.sql {
                handle = last.handle
            } else {
                handle = try db.cachedStatement(sql: planned.sql).sqliteStatement
                last = (planned.sql, handle)
            }
            try RawStatement.with(handle, planned.sql) { statement in
                switch planned.step {
                case .delete(let i):
                    let delete = changes.deletes[i]
                    try statement.bind(delete.key, at: 1)
                    try statement.bind(delete.expectedVersion, at: 2)
                    try statement.execute()
                case .deleteLinks(let i):
                    try statement.bind(changes.deletes[i].key, at: 1)
                    try statement.execute()
                case .deleteKeys(let range), .deleteLinksOfKeys(let range):
                    for j in 0..<SQLGenerator.keysPerDelete {
                        try statement.bind(changes.deletes[min(range.lowerBound + j, range.upperBound - 1)].key, at: Int32(j + 1))
                    }
                    try statement.execute()
                case .update(let i):
                    let update = changes.updates[i]
                    try statement.bind(update.changes.lazy.map(\.value))
                    let next = Int32(update.changes.count) + 1
                    try statement.bind(update.key, at: next)
                    try statement.bind(update.expectedVersion, at: next + 1)
                    do {
                        try statement.execute()
                    } catch {
                        throw translate(error, entity: update.entity, key: update.key)
                    }
                case .insert(let rows):
                    for insert in changes.inserts[rows] {
                        statement.reset()
                        try statement.bind(insert.key, at: 1)
                        try statement.bind(insert.values, from: 2)
                        do {
                            try statement.execute()
                        } catch {
                            throw translate(error, entity: insert.entity, key: insert.key)
                        }
                    }
                case .deleteLink(let i):
                    try statement.bind(changes.linkDeletes[i].source, at: 1)
                    try statement.bind(changes.linkDeletes[i].target, at: 2)
                    try statement.execute()
                case .insertLink(let i):
                    try statement.bind(changes.linkInserts[i].source, at: 1)
                    try statement.bind(changes.linkInserts[i].target, at: 2)
                    try statement.execute()
                }
            }
            if let row = planned.step.rowThatMustChange(in: changes), db.changesCount != 1 {
                throw conflict(row.entity, row.key)
            }
            if let count = planned.step.rowsThatMustChange, db.changesCount != count, case .deleteKeys(let range) = planned.step {
                // Which rows are gone is read after the rollback (the refusal's conflicts).
                let entity = changes.deletes[range.lowerBound].entity
                throw LoomError(.versionConflict, "\(count - db.changesCount) of \(count) \(entity.name) rows were deleted in the store since they were read.", entity: entity.name)
            }
        }
        if recordsHistory, !changes.isEmpty { try writeHistory(changes, db) }
    }

    private func conflict(_ entity: EntityDescription, _ key: Int64) -> LoomError {
        LoomError(.versionConflict, "\(entity.name)/\(key) was changed or deleted in the store since it was read.", entity: entity.name,
                  objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: key))
    }

    /// Whether ``close()`` was called.
    var isClosed: Bool { writeScope.isClosed }

    func closedError() -> LoomError { writeScope.closed() }

    static func closedError(path: String) -> LoomError {
        LoomError(.closed, "The store at \(path) was closed; open it again to read or save.", path: path)
    }

    /// SQLite's primary and extended result codes of a GRDB error.
    static func storeCode(of error: DatabaseError) -> StoreErrorCode {
        StoreErrorCode(primary: error.resultCode.primaryResultCode.rawValue, extended: error.extendedResultCode.rawValue)
    }

    /// Turns a SQLite error into a LoomError that names the entity and attributes, keeping the
    /// SQLite error as ``LoomError/underlying`` and its result codes as ``LoomError/storeCode``.
    /// Any failure after ``close()`` (a read racing the close) is ``LoomError/Code/closed``.
    func translate(_ error: any Error, entity: EntityDescription?, key: Int64? = nil) -> LoomError {
        if isClosed {
            var closed = closedError()
            closed.underlying = error
            closed.storeCode = (error as? DatabaseError).map(SQLiteStore.storeCode)
            return closed
        }
        guard let db = error as? DatabaseError else {
            return LoomError(.storeFailure, "The store at \(url.path) failed.", path: url.path, underlying: error)
        }
        let storeCode = SQLiteStore.storeCode(of: db)
        if db.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE || db.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY {
            // "UNIQUE constraint failed: Book.isbn, Book.title"
            let detail = db.message?.components(separatedBy: "failed: ").last ?? ""
            let entityName = entity?.name ?? detail.components(separatedBy: ".").first ?? "?"
            // Columns back to property names: `Z_author` is the relationship `author`.
            let described = entity ?? schema.entity(named: entityName)
            let columns = detail.components(separatedBy: ", ").map { $0.components(separatedBy: ".").last ?? $0 }.map { column in
                guard let described else { return column }
                return (0..<described.storedValueCount).first { described.columnName(at: $0) == column }.map(described.storedValueName(at:)) ?? column
            }
            return LoomError(
                .uniquenessViolation,
                "Another \(entityName) already has the same \(columns.joined(separator: ", ")), which must be unique.",
                entity: entityName, attributes: columns,
                objectID: key.map { AnyObjectID(storeIdentifier: identifier, entityName: entityName, primaryKey: $0) },
                underlying: db, storeCode: storeCode)
        }
        if db.resultCode == .SQLITE_NOTADB || db.resultCode == .SQLITE_CORRUPT {
            return LoomError(.notADatabase, "The store at \(url.path) is damaged or not a database.", path: url.path, underlying: db, storeCode: storeCode)
        }
        return LoomError(.storeFailure, "The store at \(url.path) failed: \(db.message ?? "\(db.resultCode)").", path: url.path, underlying: db, storeCode: storeCode)
    }

    /// Reserves `count` keys with one statement (an upsert that returns the new next key), so
    /// that a reservation made in the background shows up in a statement trace as one write,
    /// never as a read.
    @_spi(LoomStore) public func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> {
        try writeScope.write { () throws(LoomError) -> Range<Int64> in
            do {
                // One statement: atomic by itself, inside the caller's write transaction or alone
                // (then it takes the write lock at once, so another process's reservation waits).
                return try pool.writeWithoutTransaction { db in
                    let end = try Int64.fetchOne(
                        db, sql: "INSERT INTO loom_keys (entity, next) VALUES (?, 1 + ?) ON CONFLICT(entity) DO UPDATE SET next = next + ? RETURNING next",
                        arguments: [entity.name, count, count]) ?? (1 + Int64(count))
                    return (end - Int64(count))..<end
                }
            } catch {
                throw translate(error, entity: entity)
            }
        }
    }

    deinit {
        // A store dropped without close(): its watcher thread ends with it.
        watcher.withLock { $0?.stop() }
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
            // file open; then this is the last chance before the other one's close.
            _ = try? pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            do { try pool.close() } catch { throw translate(error, entity: nil) }
        }
    }
}

extension StoredValue {
    package init(_ storage: DatabaseValue.Storage) {
        switch storage {
        case .null: self = .null
        case .int64(let v): self = .integer(v)
        case .double(let v): self = .real(v)
        case .string(let v): self = .text(v)
        case .blob(let v): self = .blob(v)
        }
    }

    package var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let v): v.databaseValue
        case .real(let v): v.databaseValue
        case .text(let v): v.databaseValue
        case .blob(let v): v.databaseValue
        }
    }
}
