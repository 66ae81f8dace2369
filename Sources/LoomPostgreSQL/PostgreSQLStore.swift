public import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
public import PostgresNIO
import Synchronization

/// A store in a PostgreSQL database, on postgres-nio: the same object graph as a SQLite store,
/// shared by several app servers (processes, coordinators) on one database.
///
/// ```swift
/// let store = try PostgreSQLStore(
///     configuration: .init(url: "postgres://app@db.internal:5432/library"), schema: try Schema(Book.self))
/// let container = PersistentContainer(store: store)
/// ```
///
/// The layout is SQLite's, in one PostgreSQL schema (``Configuration/schemaName``): a table per
/// entity (`Z_PK`, the optimistic-locking version `Z_OPT`, a column per attribute: `BIGINT`,
/// `DOUBLE PRECISION`, `TEXT COLLATE "C"` or `BYTEA`, an indexed foreign-key column per to-one),
/// a join table per many-to-many relationship, unique indexes for uniqueness constraints, and
/// Loom's `loom_metadata` (store UUID, saved schema, version hash), `loom_keys` (the key
/// allocator) and `loom_history` tables. Queries answer as on SQLite (see `PostgreSQLDialect`).
///
/// Every call waits for the server on the calling thread (a context's queue, or the main actor
/// for the view context): a fault that fires costs one round trip. Prefetch relationships
/// (`relationshipKeyPathsForPrefetching`), fetch in batches, and keep slow work on background
/// contexts. Saves of different servers run in parallel: each takes the store's write lock (an
/// advisory lock) shared, and conflicts are caught by row versions and unique indexes; only
/// the history row and the `COMMIT` take turns (the commit lock), so that history numbers
/// follow commit order across every server. An exclusive write
/// (`PersistentContainer/performExclusiveWrite(_:)`) takes the write lock alone: no other
/// server's save runs meanwhile. A save that changes each table once (a single-object save, say)
/// is one round trip: one statement that takes the locks, changes the rows, writes the history
/// row and commits (see `applyInOneStatement(_:)`).
///
/// A server that goes away makes calls throw `LoomError/Code/storeFailure` at once (a closed
/// connection) or after ``Configuration/responseTimeout`` (a silent one), never hang; a failed
/// save leaves its context unchanged, and the store opens new connections by itself once the
/// server answers again. A connection lost after `COMMIT` was sent throws
/// `LoomError/Code/commitOutcomeUnknown`; if the server did commit, the store's listener finds
/// the commit in the history and merges it into the container's contexts once, as it merges
/// another server's (and `PersistentStoreCoordinator/remoteChanges()` reports it).
///
/// Isolation: every method may be called from any thread, as the store protocol requires.
public final class PostgreSQLStore: PersistentStore {
    /// Where the server is, who connects, and the PostgreSQL schema the store lives in.
    public struct Configuration: Sendable {
        /// How to reach the server.
        public enum Endpoint: Sendable, Equatable {
            case tcp(host: String, port: Int)
            /// The socket file itself (`/run/postgresql/.s.PGSQL.5432`).
            case unixSocket(path: String)
        }

        public var endpoint: Endpoint
        public var username: String
        /// The password, if the server asks for one. `nil` (or empty): as libpq, the store takes
        /// `PGPASSWORD` from the environment, else the first matching line of the password
        /// file (``passwordFile``), each time it connects, so that the password need not be in
        /// the code or on a command line. It appears in no message, log line or description.
        public var password: String?
        public var database: String?
        /// Whether and how the connection is encrypted, as libpq's `sslmode`: ``SSLMode/prefer``
        /// by default (as libpq: TLS when the server offers it, unverified). Use
        /// ``SSLMode/verifyFull`` with ``sslRootCertificate`` on any network you do not own.
        /// A Unix socket is never encrypted (PostgreSQL has no TLS there), whatever the mode.
        public var sslMode: SSLMode = .prefer
        /// libpq's `sslrootcert`: a PEM file of the certificate authorities that may sign the
        /// server's certificate, or `"system"` for the system's trusted authorities (which
        /// needs ``SSLMode/verifyFull``). `nil`: `~/.postgresql/root.crt` when it exists, as
        /// libpq. Given (or found) with ``SSLMode/require``, the chain is verified as with
        /// ``SSLMode/verifyCA`` (libpq's rule).
        public var sslRootCertificate: String?
        /// libpq's `passfile`: the password file read when ``password`` is `nil`, lines of
        /// `host:port:database:user:password` (`*` matches anything, `\` escapes `:` and `\`).
        /// `nil`: `PGPASSFILE` from the environment, else `~/.pgpass`. As libpq, a file that its
        /// group or others may read is ignored (the error of a refused login then says so).
        public var passwordFile: String?
        /// The PostgreSQL schema (namespace) holding the store's tables, created if missing:
        /// several stores can share one database under different names.
        public var schemaName: String
        /// How many connections may read at once (besides the writer and the listener): a read
        /// beyond it waits for one to come back. 4 by default. Opened when first needed and kept;
        /// one the server closed is replaced at its next use.
        public var maximumReaderCount: Int = 4
        /// How long the store waits for each statement's answer before it takes the connection
        /// as lost (30 seconds by default; opening one is bounded by ``connectTimeout``). A lost
        /// connection makes the call throw `LoomError/Code/storeFailure` (a commit whose answer
        /// never came: `LoomError/Code/commitOutcomeUnknown`) and is closed; the next call opens
        /// another, so the store works again by itself once the server is back. A connection the
        /// server closes (it stopped, restarted or ended the session) fails at once, or within a
        /// third of a second for a statement sent just as it closed, without waiting this long. A statement that runs longer than this (a very large fetch or
        /// batch) needs a longer timeout.
        public var responseTimeout: Duration = .seconds(30)
        /// How long opening a connection may take (10 seconds by default, as postgres-nio's
        /// pool): the TCP or socket connection, TLS and the login. An unreachable server makes
        /// the call that needed the connection throw `LoomError/Code/storeFailure` past it.
        public var connectTimeout: Duration = .seconds(10)
        /// The server's `statement_timeout` for the store's sessions: a statement that runs
        /// longer is cancelled by the server, which answers SQLSTATE 57014 (the call throws
        /// `LoomError/Code/storeFailure` with that `LoomError.storeCode`) and keeps the
        /// connection, unlike ``responseTimeout``, which gives up on the connection. It also
        /// bounds waits for locks held by other servers (the write lock an exclusive write holds).
        /// `nil` (the default) leaves the server's own setting, usually none; below a second it is
        /// rounded up to whole milliseconds. Keep it shorter than ``responseTimeout``.
        public var statementTimeout: Duration?
        /// The `application_name` of every session the store opens (`pg_stat_activity` shows it),
        /// "loom" by default: name each app server's stores to tell their sessions apart.
        public var applicationName: String = "loom"
        /// How the listener that brings other servers' commits (see
        /// `PersistentStoreCoordinator/remoteChanges()`) connects again after it lost its connection.
        public var listenerReconnection = ListenerReconnection()
        /// Whether every save also records a history transaction (on by default). Off, other
        /// coordinators do not learn of this store's saves.
        public var recordsHistory: Bool = true
        /// Whether a save sent as one statement is a named prepared statement of its connection
        /// (on by default): the server parses and plans each shape of save (the same entities
        /// and columns) once per connection instead of at every save. Turn it off behind a pooler
        /// that hands one client's statements to different server sessions (PgBouncer in
        /// transaction mode before 1.21), where a statement prepared on one session is unknown
        /// to the next.
        public var preparesSaveStatements: Bool = true
        /// Called with the SQL of every statement the store runs, on the calling thread, for
        /// diagnostics and tests that count round trips. Values are not included.
        public var trace: (@Sendable (String) -> Void)?
        /// Called on the saving thread inside every save's transaction, at the given point: tests
        /// make transactions slow there to show which parts of saves overlap.
        /// (A save with it set goes statement by statement, so that it can be called between them.)
        @_spi(LoomTesting) public var insideSaveTransaction: (@Sendable (SaveTransactionPoint) -> Void)?
        /// Asked on the saving thread, for a save sent as one statement, how many seconds the
        /// server sleeps inside its transaction at the given point: tests make such saves slow
        /// there to show which parts of them overlap.
        @_spi(LoomTesting) public var pauseInsideOneStatementSave: (@Sendable (SaveTransactionPoint) -> Double)?
        /// Called on the listener's thread each time it opened a connection, before it listens on
        /// it: tests end that session there, to lose the connection as the `LISTEN` is requested.
        @_spi(LoomTesting) public var listenerConnected: (@Sendable () -> Void)?
        /// Called on the listener's thread each time it reads the history: tests count reads.
        @_spi(LoomTesting) public var listenerReadHistory: (@Sendable () -> Void)?
        /// Called on the listener's thread each time it moved over notifications of the
        /// instance's own commits without reading the history for them (at a poll it still reads
        /// what came after them): tests count them.
        @_spi(LoomTesting) public var listenerSkippedRead: (@Sendable () -> Void)?
        /// SQL logging as the store found it when it opened (``LoomLogging``), for every
        /// connection it opens later; `nil` before (a connection then reads the current setting).
        var sqlLog: SQLStatementLog??

        public init(endpoint: Endpoint, username: String, password: String? = nil, database: String? = nil, schemaName: String = "public") {
            self.endpoint = endpoint
            self.username = username
            self.password = password
            self.database = database
            self.schemaName = schemaName
        }

        /// Reads `postgres://user:password@host:port/database?schema=name`; a `host` parameter
        /// that is a folder means a Unix socket there (`postgres://app@localhost:5432/db?host=/run/postgresql`).
        ///
        /// libpq's parameters for security are read too: `sslmode` (``SSLMode``, else
        /// `PGSSLMODE` from the environment), `sslrootcert` (``sslRootCertificate``, else
        /// `PGSSLROOTCERT`), `password` and `passfile` (``passwordFile``):
        /// `postgres://app@db.internal/library?sslmode=verify-full&sslrootcert=/etc/loom/ca.pem`.
        /// Leave the password out of the URL: the store reads `PGPASSWORD` or the password file
        /// when it connects (see ``password``).
        ///
        /// - Throws: `LoomError/Code/invalidRequest` naming what is wrong with the URL (never
        ///   showing its password).
        public init(url text: String) throws(LoomError) {
            try self.init(url: text, environment: ProcessInfo.processInfo.environment)
        }

        /// ``init(url:)`` with `environment` in place of the process's (tests).
        init(url text: String, environment: [String: String]) throws(LoomError) {
            guard let components = URLComponents(string: text), let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme) else {
                throw LoomError(.invalidRequest, "\"\(CredentialRedaction.redacting(text))\" is not a PostgreSQL URL: write postgres://user@host:port/database.")
            }
            let items = components.queryItems ?? []
            func item(_ name: String) -> String? { items.first { $0.name == name }?.value }
            let port = components.port ?? 5432
            let database = components.path.split(separator: "/").first.map(String.init)
            let username = components.user ?? environment["USER"] ?? "postgres"
            let endpoint: Endpoint
            if let socketFolder = item("host"), socketFolder.hasPrefix("/") {
                endpoint = .unixSocket(path: socketFolder + "/.s.PGSQL.\(port)")
            } else if let host = components.host, !host.isEmpty {
                endpoint = .tcp(host: host, port: port)
            } else {
                endpoint = .unixSocket(path: "/var/run/postgresql/.s.PGSQL.\(port)")
            }
            let password = components.password ?? item("password")
            self.init(endpoint: endpoint, username: username, password: password, database: database, schemaName: item("schema") ?? "public")
            sslRootCertificate = item("sslrootcert") ?? environment["PGSSLROOTCERT"].flatMap { $0.isEmpty ? nil : $0 }
            if let mode = item("sslmode") ?? environment["PGSSLMODE"].flatMap({ $0.isEmpty ? nil : $0 }) {
                sslMode = try SSLMode(parsing: mode, in: item("sslmode") == nil ? "PGSSLMODE" : "the URL's sslmode")
            } else if sslRootCertificate == "system" {
                // libpq: the system's authorities make verify-full the default.
                sslMode = .verifyFull
            }
            passwordFile = item("passfile")
        }

        /// The postgres-nio configuration of the store's own connections (its schema first on the
        /// search path, then `public`), for an application's own connections to the same server:
        /// the same encryption (``sslMode``) and password (``password``, `PGPASSWORD` or the
        /// password file). A value: use it from any thread. Each read reads the certificate
        /// authorities' file and the password file again.
        ///
        /// - Throws: `LoomError/Code/invalidRequest` when ``sslRootCertificate`` cannot be read
        ///   or the TLS settings contradict each other.
        public var connectionConfiguration: PostgresConnection.Configuration {
            get throws(LoomError) { try makeConnectionConfiguration(environment: ProcessInfo.processInfo.environment).configuration }
        }

        /// The postgres-nio configuration, and why the password file was not read when it was
        /// ignored (for the message of a refused login).
        func makeConnectionConfiguration(environment: [String: String]) throws(LoomError) -> (configuration: PostgresConnection.Configuration, passwordNote: String?) {
            let password = PostgreSQLPassword.resolve(self, environment: environment)
            var configuration = switch endpoint {
            case .tcp(let host, let port):
                PostgresConnection.Configuration(host: host, port: port, username: username, password: password.value, database: database,
                                                 tls: try PostgreSQLTLS.mode(for: self, environment: environment))
            case .unixSocket(let path):
                PostgresConnection.Configuration(unixSocketPath: path, username: username, password: password.value, database: database)
            }
            // The store's schema first; `public` for the unaccent extension's function.
            configuration.options.additionalStartupParameters = [
                ("search_path", "\(SQLGenerator.quote(schemaName)), public"), ("application_name", applicationName),
            ] + (statementTimeout.map { [("statement_timeout", "\(Self.milliseconds($0))")] } ?? [])
            return (configuration, password.note)
        }

        /// Whole milliseconds, at least 1, for a server setting.
        static func milliseconds(_ duration: Duration) -> Int64 {
            Int64(min(max(1, (duration / .milliseconds(1)).rounded(.up)), 1e15))
        }

        /// Where the store is, for messages: `host:port/database, schema name` (no password).
        public var description: String {
            "\(endpointDescription)/\(database ?? username), schema \(schemaName)"
        }
    }

    /// Where, inside a save's transaction, ``Configuration/insideSaveTransaction`` is called.
    @_spi(LoomTesting) public enum SaveTransactionPoint: Sendable {
        /// After the save's statements, before its history row: saves of other servers may run
        /// here at the same time.
        case beforeHistory
        /// After the history row, just before `COMMIT`: saves of other servers wait here for the
        /// commit lock.
        case beforeCommit
    }

    public let identifier: UUID
    public let schema: Schema
    public let configuration: Configuration
    let sql: SQLGenerator
    /// The connection every write runs on, guarded by ``writeScope``; `begin()` replaces it when
    /// it was lost.
    var writer: PGConnection { writerSlot.withLock { $0 } }
    private let writerSlot: Mutex<PGConnection>
    let readers: PGConnectionPool
    /// Held by every use of the writer (a change set, a write transaction, closing); the thread
    /// holding it reads on the writer, so that it sees its transaction.
    @_spi(LoomStore) public let writeScope: WriteScope
    /// The receipt of the migration this instance made to the model when it opened the store:
    /// its first commit. `nil` when it migrated nothing (a new store, one already on the model,
    /// or one another server migrated while this one waited).
    @_spi(LoomStore) public let migrationReceipt: CommitReceipt?
    /// What this instance's history rows carry in `origin`: its listener skips them.
    let origin = Int64.random(in: 1...Int64.max)
    /// The advisory lock every write takes: one per store (schema) in the database, shared by
    /// saves, alone by write transactions (exclusive writes, batch requests, history deletion)
    /// and migrations.
    let writeLockKey: Int64
    /// The advisory lock a save holds from its history row to its `COMMIT` (see
    /// ``writeHistory(_:)``); a write transaction needs none, holding the write lock alone.
    let commitLockKey: Int64
    /// Whether the store's schema has `loom_record_commit`, with which a save that changes each
    /// table once is one statement (see ``applyInOneStatement(_:)``).
    let savesInOneStatement: Bool
    /// Whether the open write transaction holds the write lock shared (a save) rather than alone.
    let writeLockShared = Mutex<Bool>(false)
    /// The channel `NOTIFY` wakes listeners on.
    let channel: String
    let listener = Mutex<PostgreSQLListener?>(nil)
    /// This instance's commits that ended `LoomError/Code/commitOutcomeUnknown`: its listener
    /// hands them on if the server made them.
    let unacknowledgedCommits = UnacknowledgedCommits()
    let snapshots = Mutex<[PostgreSQLSnapshot]>([])
    /// The history row written last in the open write transaction (`nil`: none yet), and the
    /// change sets that continue its history transaction
    /// (``StoreChangeSet/continuesHistoryTransaction``), written over it by `finishHistory()`.
    let historyRowInTransaction = Mutex<ContinuedHistoryRow?>(nil)

    /// Opens (creating when the schema holds no store) the store in `configuration`'s schema.
    ///
    /// - Throws: `LoomError` with code `LoomError/Code/storeFailure` when the server cannot be
    ///   reached, `LoomError/Code/notALoomStore` when the schema holds tables Loom did not make,
    ///   `LoomError/Code/schemaMismatch` when the store was saved with a model the new one
    ///   cannot be migrated from by inference, `LoomError/Code/migrationFailed` when the saved
    ///   data does not fit the new model (the store is then unchanged). A store saved with an
    ///   earlier model is migrated as on SQLite, once however many servers open it together.
    public convenience init(configuration: Configuration, schema: Schema) throws(LoomError) {
        try self.init(configuration: configuration, schema: schema, metadata: [:], migrationProgress: nil)
    }

    /// Opens the store as ``init(configuration:schema:)`` does, writing `metadata` (a `nil`
    /// value removes its key) in the transaction that creates, checks or migrates it, and
    /// reporting the tables a migration rebuilds to `migrationProgress` (versioned opening).
    init(configuration: Configuration, schema: Schema, metadata: [String: String?], migrationProgress: TableMigrationProgress?) throws(LoomError) {
        var configuration = configuration
        configuration.sqlLog = .some(configuration.sqlLog ?? LoomLogging.sqlLog(store: configuration.description))
        self.configuration = configuration
        self.schema = schema
        let location = configuration.description
        let scope = WriteScope { PostgreSQLStore.closedError(location: location) }
        self.writeScope = scope
        self.sql = SQLGenerator(schema: schema, dialect: PostgreSQLDialect())
        self.writeLockKey = Self.writeLockKey(configuration)
        self.commitLockKey = Self.lockKey("loom-commit:" + configuration.schemaName)
        let writer: PGConnection
        do {
            writer = try PGConnection.open(configuration)
        } catch {
            throw Self.openError(error, configuration)
        }
        writerSlot = Mutex(writer)
        do {
            let (sql, origin) = (self.sql, self.origin)
            let opened = try scope.opening { () throws(LoomError) in
                try Self.bootstrap(
                    writer, schema: schema, sql: sql, configuration: configuration, metadata: metadata, progress: migrationProgress,
                    history: (origin, scope.receiptOfOpenTransaction.sequence))
            }
            identifier = opened.value.id
            savesInOneStatement = opened.value.savesInOneStatement
            migrationReceipt = opened.migration
        } catch {
            writer.close()
            throw error
        }
        channel = Self.channel(of: identifier)
        readers = PGConnectionPool(configuration, maximum: configuration.maximumReaderCount)
    }

    /// The advisory lock every write to the store in `configuration`'s schema takes (shared by saves).
    static func writeLockKey(_ configuration: Configuration) -> Int64 { lockKey("loom-write:" + configuration.schemaName) }

    /// A 64-bit advisory lock key for a name (FNV-1a: stable across processes and releases).
    static func lockKey(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    static func openError(_ error: any Error, _ configuration: Configuration) -> LoomError {
        if let error = error as? LoomError { return error }
        return LoomError(.storeFailure, "The PostgreSQL store at \(configuration.description) could not be opened: \(describe(error)).",
                         underlying: error, storeCode: storeCode(of: error))
    }

    /// The server's SQLSTATE of an error, if it came from the server.
    static func sqlState(of error: any Error) -> String? {
        serverField(.sqlState, of: error)
    }

    /// A field of the server's error response, whichever way postgres-nio reported it:
    /// `PSQLError` from its queries, `PostgresError.server` from its prepared queries
    /// (``PGConnection/runPrepared(_:_:)``).
    static func serverField(_ field: ServerErrorField, of error: any Error) -> String? {
        if let psql = error as? PSQLError { return psql.serverInfo?[field.names.current] }
        if case .server(let response)? = error as? PostgresError { return response.fields[field.names.legacy] }
        return nil
    }

    /// Whether the server ended the transaction to break a deadlock (SQLSTATE 40P01): saves
    /// that run in parallel and change the same rows in different orders.
    static func isDeadlock(_ error: LoomError) -> Bool {
        error.underlying.flatMap(sqlState(of:)) == "40P01"
    }

    /// The server's SQLSTATE of an error as a store code, if it came from the server.
    static func storeCode(of error: any Error) -> StoreErrorCode? {
        sqlState(of: error).map(StoreErrorCode.init(sqlState:))
    }

    /// The server's message, or the error's description.
    static func describe(_ error: any Error) -> String {
        if let message = serverField(.message, of: error) { return message }
        if let psql = error as? PSQLError { return "\(psql.code)" }
        return "\(error)"
    }

    // MARK: Creating and checking the store

    static let metadataStatements = [
        "CREATE TABLE loom_metadata (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)",
        "CREATE TABLE loom_keys (entity TEXT PRIMARY KEY NOT NULL, next BIGINT NOT NULL)",
    ]

    /// Creates Loom's tables in an empty schema, or checks an existing store against the model,
    /// under an advisory lock so that servers starting together do it once. Returns the store's
    /// UUID and whether it was migrated. A migration's history row is marked as the instance's
    /// commit in `history` (its origin, the commit's number).
    private static func bootstrap(
        _ connection: PGConnection, schema: Schema, sql: SQLGenerator, configuration: Configuration, metadata: [String: String?],
        progress: TableMigrationProgress?, history: (origin: Int64, commit: UInt64)
    ) throws(LoomError) -> (value: (id: UUID, savesInOneStatement: Bool), migrated: Bool) {
        let name = configuration.schemaName
        do {
            try connection.query("BEGIN")
            do {
                var bindings = PostgresBindings()
                bindings.append(lockKey("loom-bootstrap:" + name))
                try connection.query("SELECT pg_advisory_xact_lock($1)", bindings)
                try connection.query("CREATE SCHEMA IF NOT EXISTS \(SQLGenerator.quote(name))")
                // `unaccent` (diacritic-insensitive matching) lives in public, for every store.
                try connection.query("SAVEPOINT loom_extension")
                do {
                    try connection.query("CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public")
                    try connection.query("RELEASE SAVEPOINT loom_extension")
                } catch {
                    try connection.query("ROLLBACK TO SAVEPOINT loom_extension")
                }
                var tablesBindings = PostgresBindings()
                tablesBindings.append(name)
                let tables = try connection.query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1", tablesBindings)
                    .map { try $0.decode(String.self) }
                let id: UUID
                var migrated = false
                if tables.contains("loom_metadata") {
                    let existing = try checkExisting(connection, schema: schema, sql: sql, configuration: configuration, progress: progress)
                    id = existing.id
                    migrated = existing.migrated
                    if migrated { try recordMigrationCommit(connection, history) }
                } else if !tables.isEmpty {
                    throw LoomError(.notALoomStore, "The PostgreSQL schema \(name) at \(configuration.description) holds tables Loom did not create (\(tables.sorted().prefix(5).joined(separator: ", "))) and no loom_metadata; Loom does not open foreign schemas. Choose another schemaName.")
                } else {
                    id = UUID()
                    for statement in metadataStatements + sql.createStatements() + historyStatements(channel: channel(of: id)) {
                        try connection.query(statement)
                    }
                    let record = String(decoding: try JSONEncoder().encode(schema.record), as: UTF8.self)
                    var bindings = PostgresBindings()
                    bindings.append(id.uuidString)
                    bindings.append(record)
                    bindings.append(schema.versionHash)
                    try connection.query("INSERT INTO loom_metadata (key, value) VALUES ('storeIdentifier', $1), ('schema', $2), ('versionHash', $3), ('formatVersion', '1')", bindings)
                }
                for (key, value) in metadata.sorted(by: { $0.key < $1.key }) { try setMetadata(value, forKey: key, on: connection) }
                try installNotifyFunction(connection, schemaName: name, channel: channel(of: id))
                let savesInOneStatement = try installSaveFunctions(connection, schemaName: name)
                try connection.query("COMMIT")
                return ((id, savesInOneStatement), migrated)
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        } catch {
            throw openError(error, configuration)
        }
    }

    /// Checks an existing store against the model, migrating it when it was saved with an
    /// earlier one; returns its UUID and whether it was migrated.
    private static func checkExisting(
        _ connection: PGConnection, schema: Schema, sql: SQLGenerator, configuration: Configuration, progress: TableMigrationProgress?
    ) throws -> (id: UUID, migrated: Bool) {
        var metadata: [String: String] = [:]
        for row in try connection.query("SELECT key, value FROM loom_metadata") {
            let (key, value) = try row.decode((String, String).self)
            metadata[key] = value
        }
        guard let idText = metadata["storeIdentifier"], let id = UUID(uuidString: idText), let recordText = metadata["schema"],
              let saved = try? JSONDecoder().decode(SchemaRecord.self, from: Data(recordText.utf8)) else {
            throw LoomError(.notALoomStore, "The PostgreSQL schema \(configuration.schemaName) at \(configuration.description) has a loom_metadata table but no readable store identifier or schema.")
        }
        let migrated = metadata["versionHash"] != schema.versionHash
        if migrated { try migrate(connection, from: saved, to: schema, sql: sql, configuration: configuration, progress: progress) }
        try mergeKeySpaces(connection, sql: sql)
        return (id, migrated)
    }

    /// Gives each hierarchy one key space (see `SQLGenerator.KeySpace`): a store saved before
    /// had a counter per entity; its root's counter now starts past every key of the hierarchy.
    private static func mergeKeySpaces(_ connection: PGConnection, sql: SQLGenerator) throws {
        for space in sql.sharedKeySpaces {
            guard let marks = try connection.query(space.marksQuery).first(where: { _ in true }) else { continue }
            let (next, rootNext, subentityRows) = try marks.decode((Int64?, Int64?, Int64).self)
            for statement in space.mergeStatements(next: next, rootNext: rootNext, subentityRows: subentityRows) { try connection.query(statement) }
        }
    }

    // MARK: Reads

    /// Whether ``close()`` was called.
    var isClosed: Bool { writeScope.isClosed }

    func closedError() -> LoomError { writeScope.closed() }

    static func closedError(location: String) -> LoomError {
        LoomError(.closed, "The PostgreSQL store at \(location) was closed; open it again to read or save.")
    }

    /// Runs `body` on the connection the calling thread reads from: the writer inside a write
    /// transaction (its reads see its writes), else a connection of the pool.
    func withReadConnection<T>(_ body: (PGConnection) throws -> T) throws(LoomError) -> T {
        if isClosed { throw closedError() }
        do {
            if writeScope.isHeldByCurrentThread { return try body(writer) }
            return try readers.withConnection(body)
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: nil)
        }
    }

    @_spi(LoomStore) public func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        try withReadConnection { try PostgreSQLReads.fetch(query, sql, $0) }
    }

    @_spi(LoomStore) public func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (Int64, Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try withReadConnection { try PostgreSQLReads.fetch(query, sql, $0, skippingValuesOf: isKnown) }
    }

    @_spi(LoomStore) public func count(_ query: StoreQuery) throws(LoomError) -> Int {
        try withReadConnection { try PostgreSQLReads.count(query, sql, $0) }
    }

    @_spi(LoomStore) public func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        if keys.isEmpty { return [] }
        return try withReadConnection { try PostgreSQLReads.rows(of: entity, keys: keys, sql, $0) }
    }

    @_spi(LoomStore) public func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        if keys.isEmpty { return [] }
        return try withReadConnection { try PostgreSQLReads.related(relationship, keys: keys, sql, $0) }
    }

    @_spi(LoomStore) public func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        try withReadConnection { try PostgreSQLReads.aggregate(query, sql, $0) }
    }

    @_spi(LoomStore) public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        try withReadConnection { try PostgreSQLReads.keys(query, sql, $0) }
    }

    // MARK: Writes

    /// Runs a statement on the writer, errors translated.
    func onWriter(_ sql: String, _ bindings: PostgresBindings = PostgresBindings()) throws(LoomError) {
        do {
            try writer.query(sql, bindings)
        } catch {
            throw translate(error, entity: nil)
        }
    }

    /// `BEGIN`, then the store's write lock: alone (`shared` false), no other instance writes
    /// until the commit; shared (a save), other saves run alongside, and only an exclusive
    /// write waits for it. A writer found lost (the server restarted, or ended its session) is
    /// replaced first: nothing was under way on it.
    func begin(shared: Bool = false) throws(LoomError) {
        historyRowInTransaction.withLock { $0 = nil }
        unacknowledgedCommits.beginTransaction()
        writeLockShared.withLock { $0 = shared }
        if writer.isClosed { try reopenWriter() }
        do {
            try onWriter("BEGIN")
        } catch where PGConnection.isLost(error.underlying ?? error) && !(error.underlying is PGConnectionLost) {
            // Closed by the server while idle, unnoticed until now: BEGIN did nothing.
            try reopenWriter()
            try onWriter("BEGIN")
        }
        var bindings = PostgresBindings()
        bindings.append(writeLockKey)
        do {
            try onWriter(shared ? "SELECT pg_advisory_xact_lock_shared($1)" : "SELECT pg_advisory_xact_lock($1)", bindings)
        } catch {
            _ = try? writer.query("ROLLBACK")
            throw error
        }
    }

    /// Records that the open transaction's `COMMIT` (or one-statement save) ended with its
    /// outcome unknown, and wakes the listener: a notification of that commit may have come
    /// already, and the listener lets its own instance's notifications wait for the next wake-up.
    /// The listener is woken outside the mutex, which ``close()`` holds while the listener stops.
    func commitOutcomeUnknown() {
        unacknowledgedCommits.outcomeUnknown(commit: writeScope.receiptOfOpenTransaction.sequence)
        listener.withLock { $0 }?.wakeUp()
    }

    /// A new writer in place of a lost one (the write scope held).
    func reopenWriter() throws(LoomError) {
        var opened: PGConnection
        do {
            opened = try PGConnection.open(configuration)
        } catch {
            throw translate(error, entity: nil)
        }
        writerSlot.withLock { swap(&$0, &opened) }
        opened.close()
    }

    /// `COMMIT`. A connection lost before the server answered leaves the outcome unknown, unless
    /// it was known closed before the statement went out (then nothing was committed).
    func commit() throws(LoomError) {
        let connection = writer
        let sentOnOpenConnection = !connection.isClosed
        do {
            try connection.query("COMMIT")
        } catch {
            guard sentOnOpenConnection, PGConnection.isLost(error) else { throw translate(error, entity: nil) }
            commitOutcomeUnknown()
            throw LoomError(
                .commitOutcomeUnknown,
                "The connection to the PostgreSQL store at \(configuration.description) was lost after COMMIT was sent (\(Self.describe(error))): the save may have been committed or not. Fetch what it changed to find out before saving again.",
                underlying: error)
        }
    }

    @discardableResult
    @_spi(LoomStore) public func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        try writeScope.write { () throws(LoomError) -> CommitReceipt in
            if writeScope.isHeldByCurrentThread {
                // Inside the caller's transaction: atomic on its own, committed with it.
                try applyUnderSavepoint(changes)
                return writeScope.receiptOfOpenTransaction
            }
            return try writeScope.asOwner { () throws(LoomError) -> CommitReceipt in try applyAlone(changes) }
        }
    }

    /// Applies `changes` and commits them, in one statement when it can
    /// (``applyInOneStatement(_:)``), else in a transaction statement by statement. The write
    /// lock is shared: saves of other servers run alongside, up to their history rows (see
    /// ``writeHistory(_:)``).
    private func applyAlone(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        do {
            if let receipt = try applyInOneStatement(changes) { return receipt }
            return try inSaveTransaction { () throws(LoomError) in try applyStatements(changes) }
        } catch where error.code == .versionConflict || error.code == .uniquenessViolation || Self.isDeadlock(error) {
        }
        // Refused: apply again under a savepoint, so that the conflicts are read in the
        // transaction that refused it, at least as new as the refusal. (A deadlock with another
        // server's save on the same rows, in another order, is tried once more too.)
        return try inSaveTransaction { () throws(LoomError) in try applyUnderSavepoint(changes) }
    }

    /// Begins a transaction holding the write lock shared, runs `body` and commits; rolls back
    /// when either throws.
    private func inSaveTransaction(_ body: () throws(LoomError) -> Void) throws(LoomError) -> CommitReceipt {
        try begin(shared: true)
        do {
            try body()
            try commit()
            return writeScope.commit()
        } catch {
            _ = try? writer.query("ROLLBACK")
            throw error
        }
    }

    /// Applies a change set inside the open transaction under a savepoint; a refusal leaves none
    /// of it and carries the conflicts read in the transaction.
    private func applyUnderSavepoint(_ changes: StoreChangeSet) throws(LoomError) {
        try onWriter("SAVEPOINT loom_apply")
        let historyRow = historyRowInTransaction.withLock { $0 }
        do {
            try applyStatements(changes)
            try onWriter("RELEASE SAVEPOINT loom_apply")
        } catch {
            // A history row written under the savepoint is gone with it.
            historyRowInTransaction.withLock { $0 = historyRow }
            try onWriter("ROLLBACK TO SAVEPOINT loom_apply")
            try onWriter("RELEASE SAVEPOINT loom_apply")
            guard error.code == .versionConflict || error.code == .uniquenessViolation else { throw error }
            var refused = error
            refused.storeConflicts = try changes.conflicts(in: self)
            throw refused
        }
    }

    @_spi(LoomStore) public func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) {
        try writeScope.transaction(
            begin: { () throws(LoomError) in try begin() },
            body,
            commit: {
                try finishHistory()
                try commit()
            },
            rollBack: { _ = try? writer.query("ROLLBACK") })
    }

    /// Reserves `count` keys with one statement on a connection of its own (outside any write
    /// transaction: a reservation is never undone, so keys are never handed out twice, even by
    /// servers racing). Every entity of a hierarchy reserves from its root's row: a key is
    /// unique within a hierarchy.
    @_spi(LoomStore) public func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> {
        if isClosed { throw closedError() }
        do {
            return try readers.withConnection { connection in
                var bindings = PostgresBindings()
                bindings.append(entity.rootEntity.name)
                bindings.append(Int64(count))
                let rows = try connection.query(
                    "INSERT INTO loom_keys (entity, next) VALUES ($1, 1 + $2) ON CONFLICT (entity) DO UPDATE SET next = loom_keys.next + $2 RETURNING next", bindings)
                let end = try rows.first?.decode(Int64.self) ?? (1 + Int64(count))
                return (end - Int64(count))..<end
            }
        } catch {
            throw translate(error, entity: entity)
        }
    }

    // MARK: Errors

    /// A server error as a LoomError naming the entity and attributes, keeping the error as
    /// ``LoomError/underlying`` and its SQLSTATE as ``LoomError/storeCode``.
    func translate(_ error: any Error, entity: EntityDescription?, key: Int64? = nil) -> LoomError {
        if let error = error as? LoomError { return error }
        let code = Self.storeCode(of: error)
        if isClosed || error is PoolClosed {
            var closed = closedError()
            closed.underlying = error
            closed.storeCode = code
            return closed
        }
        if PGConnection.isLost(error) {
            return LoomError(
                .storeFailure,
                "The PostgreSQL store at \(configuration.description) lost its connection to the server (\(Self.describe(error))); the store connects again at the next call, once the server answers.",
                underlying: error, storeCode: code)
        }
        if code == .postgresUniqueViolation {
            // The unique index's name says the entity and the attributes.
            let constraint = Self.serverField(.constraintName, of: error) ?? ""
            let tableName = Self.serverField(.tableName, of: error)
            let described = entity ?? tableName.flatMap(schema.entity(named:))
            let entityName = described?.name ?? tableName ?? "?"
            var attributes: [String] = []
            if let across = sql.hierarchyViolation(inTable: tableName, entity: entity, key: key, store: identifier, underlying: error, storeCode: code) {
                return across
            }
            if let described {
                if let unique = described.uniquenessConstraints.first(where: { "loom_unique_\(described.name)_\($0.joined(separator: "_"))" == constraint }) {
                    attributes = unique
                } else if constraint.hasSuffix("_pkey") {
                    attributes = ["Z_PK"]
                }
            }
            return LoomError(
                .uniquenessViolation,
                "Another \(entityName) already has the same \(attributes.isEmpty ? constraint : attributes.joined(separator: ", ")), which must be unique.",
                entity: entityName, attributes: attributes,
                objectID: key.map { AnyObjectID(storeIdentifier: identifier, entityName: entityName, primaryKey: $0) },
                underlying: error, storeCode: code)
        }
        return LoomError(.storeFailure, "The PostgreSQL store at \(configuration.description) failed: \(Self.describe(error)).", underlying: error, storeCode: code)
    }

    deinit {
        // A store released without close(): its listener, snapshots and connections end with it.
        listener.withLock { $0?.stop() }
        if !isClosed {
            for snapshot in snapshots.withLock({ $0 }) { snapshot.close() }
            readers.close()
        }
    }

    /// Closes the store: every later call throws `LoomError/Code/closed`. Closing again does nothing.
    /// A save under way is waited for, at most ``Configuration/responseTimeout`` per statement
    /// when the server went silent. Any thread.
    public func close() throws(LoomError) {
        listener.withLock { listener in
            listener?.stop()
            listener = nil
        }
        writeScope.close {
            for snapshot in snapshots.withLock({ $0 }) { snapshot.close() }
            readers.close()
            writer.close()
        }
    }
}

extension PostgreSQLStore {
    /// The schema saved in a store and its metadata, read without the model it was made with
    /// (what `loom inspect` shows). Changes nothing.
    ///
    /// - Throws: ``LoomError/Code/notALoomStore`` when the schema holds no Loom store,
    ///   ``LoomError/Code/storeFailure`` when the server cannot be reached.
    @_spi(LoomStore) public static func savedState(configuration: Configuration) throws(LoomError) -> (record: SchemaRecord, metadata: [String: String]) {
        guard let state = try savedStateIfPresent(configuration: configuration) else {
            throw LoomError(.notALoomStore, "The PostgreSQL schema \(configuration.schemaName) at \(configuration.description) holds no Loom store (no loom_metadata table).")
        }
        return state
    }

    /// ``savedState(configuration:)``, or `nil` when the schema holds no Loom store (yet).
    static func savedStateIfPresent(configuration: Configuration) throws(LoomError) -> (record: SchemaRecord, metadata: [String: String])? {
        let connection: PGConnection
        do {
            connection = try PGConnection.open(configuration)
        } catch {
            throw openError(error, configuration)
        }
        defer { connection.close() }
        do {
            var bindings = PostgresBindings()
            bindings.append(configuration.schemaName)
            let exists = try connection.query("SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'loom_metadata'", bindings).count > 0
            guard exists else { return nil }
            var metadata: [String: String] = [:]
            for row in try connection.query("SELECT key, value FROM loom_metadata") {
                let (key, value) = try row.decode((String, String).self)
                metadata[key] = value
            }
            guard let text = metadata["schema"], let record = try? JSONDecoder().decode(SchemaRecord.self, from: Data(text.utf8)) else {
                throw LoomError(.notALoomStore, "The PostgreSQL store at \(configuration.description) has no readable saved schema.")
            }
            return (record, metadata)
        } catch {
            throw openError(error, configuration)
        }
    }
}

/// The fields of a server's error response that Loom reads (``PostgreSQLStore/serverField(_:of:)``).
enum ServerErrorField {
    case sqlState, message, detail, constraintName, tableName

    /// The field in postgres-nio's error of its queries, and in that of its prepared queries.
    var names: (current: PSQLError.ServerInfo.Field, legacy: PostgresMessage.Error.Field) {
        switch self {
        case .sqlState: (.sqlState, .sqlState)
        case .message: (.message, .message)
        case .detail: (.detail, .detail)
        case .constraintName: (.constraintName, .constraintName)
        case .tableName: (.tableName, .tableName)
        }
    }
}
