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
        /// Whether the store is opened read-only: an existing store on the model it is opened
        /// with, read without writing anything to its file (no schema, no migration, no
        /// checkpoint when it closes) through read-only connections. Every write throws
        /// `LoomError/Code/invalidRequest`. See ``init(readingAt:options:)``.
        @_spi(LoomStore) public var isReadOnly: Bool = false
        /// How large the write-ahead log may grow, in bytes (64 MiB by default), before a save
        /// starts it over. SQLite can start the log over only at a moment when no reader uses
        /// it, which a store read without pause never has: past this size, the save that
        /// committed waits up to 100 milliseconds for the readers of the old log, then empties
        /// it. A reader that keeps an old snapshot (a pinned query generation) makes it give up
        /// and try again later, so the log can pass the bound while that snapshot lasts (see
        /// `QueryGenerationLimit`).
        public var maximumWALSize: Int = 64 << 20
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
    /// ``Options/isReadOnly``.
    @_spi(LoomStore) public let isReadOnly: Bool
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
    /// Keeps the write-ahead log within ``Options/maximumWALSize`` (`nil`: read-only).
    let walBound: WALBound?

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
    ///
    /// With `options.isReadOnly` (store SPI) it opens an existing store as
    /// `init(readingAt:options:)` does: a file that is missing or empty is
    /// `LoomError/Code/storeFailure`, one that needs a migration to `schema` is
    /// `LoomError/Code/schemaMismatch`, and nothing is created or migrated.
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
        self.isReadOnly = options.isReadOnly
        let path = url.path
        let scope = WriteScope { SQLiteStore.closedError(path: path) }
        self.writeScope = scope
        try SQLiteStore.checkHeader(path: path)
        if options.isReadOnly {
            let id = try SQLiteStore.preflightReadOnly(path: path, schema: schema)
            var configuration = Configuration()
            configuration.readonly = true
            configuration.maximumReaderCount = max(1, options.maximumReaderCount)
            configuration.busyMode = .timeout(SQLiteStore.busyTimeout)
            let tracer = SQLTracer.make(path: path, trace: options.trace)
            configuration.prepareDatabase { db in
                SQLFunctions.register(in: db)
                if let tracer, let connection = db.sqliteConnection { tracer.install(on: connection) }
            }
            do {
                pool = try DatabasePool(path: path, configuration: configuration)
            } catch {
                throw SQLiteStore.openError(error, path: path)
            }
            identifier = id
            migrationReceipt = nil
            walBound = nil
            readers = ReaderConnections(path: path, maximum: configuration.maximumReaderCount, tracer: tracer)
            return
        }
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
        let walBound = WALBound(maximumSize: options.maximumWALSize)
        self.walBound = walBound
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            try walBound.install(on: db)
            SQLFunctions.register(in: db)
            if let tracer, let connection = db.sqliteConnection { tracer.install(on: connection) }
        }
        var migration: CommitReceipt?
        let origin = self.origin
        if migrates {
            let sql = self.sql
            migration = try scope.opening { () throws(LoomError) in
                try SQLiteStore.migrateBeforeOpening(
                    path: path, schema: schema, sql: sql, configuration: configuration, metadata: metadata, progress: migrationProgress,
                    history: (origin, scope.receiptOfOpenTransaction.sequence))
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
                try SQLiteStore.bootstrap(
                    pool, schema: schema, sql: sql, path: path, metadata: metadata, progress: migrationProgress,
                    history: (origin, scope.receiptOfOpenTransaction.sequence))
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
            if let across = sql.hierarchyViolation(inTable: detail.components(separatedBy: ".").first, entity: entity, key: key, store: identifier, underlying: db, storeCode: storeCode) {
                return across
            }
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

    deinit {
        // A store dropped without close(): its watcher thread ends with it.
        watcher.withLock { $0?.stop() }
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
