import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
import PostgresNIO

/// Versioned opening on PostgreSQL: a store's schema as a ``MigratableStoreLocation``, for
/// ``MigrationPlanRunner``, so that SwiftData-style migration plans (lightweight and custom
/// stages, transform stages that read the old version) run here as on SQLite.
extension PostgreSQLStore {
    /// A store's PostgreSQL schema and how to reach it.
    @_spi(LoomStore) public struct Location: MigratableStoreLocation {
        public let configuration: Configuration
        public var path: String { configuration.description }

        public init(configuration: Configuration) { self.configuration = configuration }

        public func savedState() throws(LoomError) -> SavedStoreState? {
            try PostgreSQLStore.savedStateIfPresent(configuration: configuration).map { SavedStoreState(record: $0.record, metadata: $0.metadata) }
        }

        public func open(schema: Schema, metadata: [String: String?], progress: TableMigrationProgress?) throws(LoomError) -> any PersistentStore {
            try PostgreSQLStore(configuration: configuration, schema: schema, metadata: metadata, migrationProgress: progress)
        }

        public func counts(_ queries: [StoreQuery], savedWith schema: Schema) throws(LoomError) -> [Int] {
            let sql = SQLGenerator(schema: schema, dialect: PostgreSQLDialect())
            return try withConnection { connection in try queries.map { try PostgreSQLReads.count($0, sql, connection) } }
        }

        public func setMetadata(_ value: String?, forKey key: String, in store: any PersistentStore) throws(LoomError) {
            guard let store = store as? PostgreSQLStore else {
                throw LoomError(.storeFailure, "A PostgreSQL store location was asked to write into \(English.a(type(of: store))).", path: path)
            }
            do {
                try PostgreSQLStore.setMetadata(value, forKey: key, on: store.writer)
            } catch {
                throw store.translate(error, entity: nil)
            }
        }

        /// The schema next to the store's that a transform stage reads the old version from.
        var snapshotConfiguration: Configuration {
            var copy = configuration
            copy.schemaName = configuration.schemaName + "_migration_source"
            return copy
        }

        /// Every table of the store copied into ``snapshotConfiguration``'s schema in one
        /// `REPEATABLE READ` transaction: a consistent copy, and a killed process leaves either
        /// none or a whole one (PostgreSQL's DDL is transactional).
        public func makeSnapshot() throws(LoomError) -> any MigratableStoreLocation {
            let target = snapshotConfiguration.schemaName
            try withConnection { connection in
                try connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ")
                do {
                    try connection.query("DROP SCHEMA IF EXISTS \(SQLGenerator.quote(target)) CASCADE")
                    try connection.query("CREATE SCHEMA \(SQLGenerator.quote(target))")
                    for table in try tables(in: configuration.schemaName, on: connection) {
                        let source = "\(SQLGenerator.quote(configuration.schemaName)).\(SQLGenerator.quote(table))"
                        let copy = "\(SQLGenerator.quote(target)).\(SQLGenerator.quote(table))"
                        try connection.query("CREATE TABLE \(copy) (LIKE \(source) INCLUDING ALL)")
                        try connection.query("INSERT INTO \(copy) SELECT * FROM \(source)")
                    }
                    try connection.query("COMMIT")
                } catch {
                    _ = try? connection.query("ROLLBACK")
                    throw error
                }
            }
            return Location(configuration: snapshotConfiguration)
        }

        public var snapshot: (any MigratableStoreLocation)? {
            let snapshot = snapshotConfiguration
            return ((try? schemaHoldsStore(snapshot.schemaName)) ?? false) ? Location(configuration: snapshot) : nil
        }

        public func removeSnapshot() {
            let target = snapshotConfiguration.schemaName
            try? withConnection { connection in _ = try connection.query("DROP SCHEMA IF EXISTS \(SQLGenerator.quote(target)) CASCADE") }
        }

        /// A session advisory lock of the store's own (`loom-migration:<schema>`) on a connection
        /// of its own, tried every 20 ms so that a waiting open suspends instead of blocking its
        /// thread; released (the connection closed) when `body` ends. Servers on other machines
        /// take the same lock: one migrates, the others wait and then find the new version.
        public func withMigrationLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
            let connection: PGConnection
            do {
                connection = try PGConnection.open(configuration)
            } catch {
                throw PostgreSQLStore.openError(error, configuration)
            }
            defer { connection.close() }
            var key = PostgresBindings()
            key.append(PostgreSQLStore.lockKey("loom-migration:" + configuration.schemaName))
            func locked() throws(LoomError) -> Bool {
                do {
                    return try connection.query("SELECT pg_try_advisory_lock($1)", key).first?.decode(Bool.self) == true
                } catch {
                    throw PostgreSQLStore.openError(error, configuration)
                }
            }
            while try !locked() { try await Task.sleep(for: .milliseconds(20)) }
            return try await body()
        }

        /// Whether `schemaName` holds a Loom store (its `loom_metadata` table).
        private func schemaHoldsStore(_ schemaName: String) throws(LoomError) -> Bool {
            try withConnection { connection in
                var bindings = PostgresBindings()
                bindings.append(schemaName)
                return try connection.query(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'loom_metadata'", bindings
                ).count > 0
            }
        }

        private func tables(in schemaName: String, on connection: PGConnection) throws -> [String] {
            var bindings = PostgresBindings()
            bindings.append(schemaName)
            return try connection.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY 1", bindings
            ).map { try $0.decode(String.self) }
        }

        /// Runs `body` on a new connection of its own, closed after.
        private func withConnection<T>(_ body: (PGConnection) throws -> T) throws(LoomError) -> T {
            do {
                let connection = try PGConnection.open(configuration)
                defer { connection.close() }
                return try body(connection)
            } catch {
                throw PostgreSQLStore.openError(error, configuration)
            }
        }
    }
}

extension PostgreSQLStore {
    /// Drops the store in `configuration`'s PostgreSQL schema: the schema and everything in it,
    /// and a transform stage's copy of it if one was left (Core Data's
    /// `destroyPersistentStore(at:)`). Nothing happens when the schema does not exist. Close every
    /// container on the store first. Call from any thread; it waits for the server.
    ///
    /// - Throws: `LoomError/Code/storeFailure` when the server cannot be reached or refuses.
    public static func destroy(configuration: Configuration) throws(LoomError) {
        let location = Location(configuration: configuration)
        let copy = location.snapshotConfiguration.schemaName
        do {
            let connection = try PGConnection.open(configuration)
            defer { connection.close() }
            for name in [configuration.schemaName, copy] {
                try connection.query("DROP SCHEMA IF EXISTS \(SQLGenerator.quote(name)) CASCADE")
            }
        } catch {
            throw LoomError(.storeFailure, "The PostgreSQL store at \(configuration.description) could not be destroyed: \(describe(error)).",
                            underlying: error, storeCode: sqlState(of: error).map(StoreErrorCode.init(sqlState:)))
        }
    }
}

extension PersistentContainer {
    /// Which stages opening the PostgreSQL store in `configuration` with `version` and
    /// `migrationPlan` would run, by name, read without changing anything: empty when the store
    /// is up to date or does not exist. Call from any thread; it waits for the server.
    ///
    /// - Throws: `LoomError/Code/invalidMigrationPlan`, `LoomError/Code/unknownSchemaVersion`,
    ///   and, without a plan, `LoomError/Code/schemaMismatch` for a change that cannot be
    ///   inferred.
    public static func requiredMigrationStages(
        postgres configuration: PostgreSQLStore.Configuration, version: any VersionedSchema.Type, migrationPlan: (any SchemaMigrationPlan.Type)? = nil
    ) throws(LoomError) -> [String] {
        try MigrationPlanRunner.requiredStages(PostgreSQLStore.Location(configuration: configuration), current: version, plan: migrationPlan)
    }

    /// Opens a container on a PostgreSQL store with the current version of a versioned model,
    /// migrating a store saved by an earlier version through `migrationPlan`'s stages first (as
    /// `PersistentContainer(name:for:migrationPlan:location:)` does on SQLite, and SwiftData's
    /// `ModelContainer(for:migrationPlan:)`).
    ///
    /// ```swift
    /// let container = try await PersistentContainer(for: LibraryV2.self, migrationPlan: LibraryPlan.self,
    ///                                               postgres: try PostgreSQLStore.Configuration(url: databaseURL))
    /// ```
    ///
    /// Servers opening the same outdated store at once take turns under an advisory lock: one
    /// migrates, the others then open the migrated store. A transform stage reads the old version
    /// from a copy in the schema `<schema>_migration_source`, dropped when the stage ends. Call
    /// from any isolation; it suspends while a migration runs (or another server's).
    ///
    /// - Throws: what the SQLite version throws (`LoomError/Code/invalidMigrationPlan`,
    ///   `LoomError/Code/unknownSchemaVersion`, `LoomError/Code/schemaMismatch`,
    ///   `LoomError/Code/migrationFailed`, a custom stage's errors), and the errors of
    ///   ``PostgreSQLStore/init(configuration:schema:)``. After a failure, the stages done stay done.
    public convenience init(
        for version: any VersionedSchema.Type, migrationPlan: (any SchemaMigrationPlan.Type)? = nil,
        postgres configuration: PostgreSQLStore.Configuration, progress: (@Sendable (MigrationProgress) -> Void)? = nil
    ) async throws {
        let store = try await MigrationPlanRunner.open(
            PostgreSQLStore.Location(configuration: configuration), current: version, plan: migrationPlan, progress: progress)
        self.init(store: store)
    }
}
