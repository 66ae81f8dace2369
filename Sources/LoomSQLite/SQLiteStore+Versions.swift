public import Foundation
import GRDB
@_spi(LoomStore) public import LoomCore
import LoomSQL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Versioned opening: a SQLite file as a ``MigratableStoreLocation``, for
/// ``MigrationPlanRunner`` (`PersistentContainer(name:for:migrationPlan:location:options:)`).
extension SQLiteStore {
    /// A store file and the options to open it with.
    @_spi(LoomStore) public struct Location: MigratableStoreLocation {
        public let url: URL
        public let options: Options
        public var path: String { url.path }

        public init(url: URL, options: Options = Options()) {
            self.url = url
            self.options = options
        }

        public func savedState() throws(LoomError) -> SavedStoreState? {
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            guard size > 0 else { return nil }
            return try SQLiteStore.savedState(at: url)
        }

        public func open(schema: Schema, metadata: [String: String?], progress: TableMigrationProgress?) throws(LoomError) -> any PersistentStore {
            try SQLiteStore(url: url, schema: schema, options: options, metadata: metadata, migrationProgress: progress)
        }

        /// On a read-only connection: opening the store (whose WAL set-up writes) would change
        /// the file even when the migration is then refused.
        public func counts(_ queries: [StoreQuery], savedWith schema: Schema) throws(LoomError) -> [Int] {
            let sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
            do {
                let queue = try SQLiteStore.readOnlyQueue(path: path)
                defer { try? queue.close() }
                return try queue.read { db in
                    try queries.map { query in
                        let (text, arguments) = sql.count(query)
                        return try Int.fetchOne(db, sql: text, arguments: StatementArguments(arguments.map(\.databaseValue))) ?? 0
                    }
                }
            } catch {
                throw SQLiteStore.openError(error, path: path)
            }
        }

        public func setMetadata(_ value: String?, forKey key: String, in store: any PersistentStore) throws(LoomError) {
            guard let store = store as? SQLiteStore else {
                throw LoomError(.storeFailure, "A SQLite store location was asked to write into \(English.a(type(of: store))).", path: path)
            }
            try store.setMetadata(value, forKey: key)
        }

        /// `VACUUM INTO` a temporary file, synced, then renamed to `<store>-migration-source`:
        /// a killed process leaves either no copy or a whole one.
        public func makeSnapshot() throws(LoomError) -> any MigratableStoreLocation {
            let target = SQLiteStore.snapshotURL(of: url), building = URL(filePath: target.path + "-building")
            SQLiteStore.removeFiles(of: building)
            SQLiteStore.removeFiles(of: target)
            do {
                let queue = try SQLiteStore.readOnlyQueue(path: path)
                defer { try? queue.close() }
                try queue.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [building.path]) }
                let handle = try FileHandle(forUpdating: building)
                try handle.synchronize()
                try handle.close()
                try FileManager.default.moveItem(at: building, to: target)
            } catch {
                SQLiteStore.removeFiles(of: building)
                throw LoomError(.storeFailure, "The copy of the store at \(path) that a transform stage reads could not be made at \(target.path) (is there room on the disk?). The store was not changed.", path: path, underlying: error)
            }
            return Location(url: target, options: options)
        }

        public var snapshot: (any MigratableStoreLocation)? {
            let target = SQLiteStore.snapshotURL(of: url)
            return FileManager.default.fileExists(atPath: target.path) ? Location(url: target, options: options) : nil
        }

        public func removeSnapshot() { SQLiteStore.removeFiles(of: SQLiteStore.snapshotURL(of: url)) }

        /// An exclusive `flock` on `<store>-migration-lock`, polled every 20 ms so that a waiting
        /// open suspends instead of blocking its thread. The file stays (removing it would race
        /// with a process about to lock it).
        public func withMigrationLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
            let lockPath = path + "-migration-lock"
            let fd = openLockFile(lockPath)
            guard fd >= 0 else {
                throw LoomError(.storeFailure, "The migration lock file \(lockPath) could not be opened (errno \(errno)); the folder must be writable.", path: lockPath)
            }
            defer { closeLockFile(fd) }
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EINTR else {
                    throw LoomError(.storeFailure, "The migration lock file \(lockPath) could not be locked (errno \(errno)).", path: lockPath)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            defer { flock(fd, LOCK_UN) }
            return try await body()
        }
    }

    /// Where a transform stage's copy of the old version lives: `<store>-migration-source`.
    static func snapshotURL(of url: URL) -> URL { URL(filePath: url.path + "-migration-source") }

    /// Removes a store file with its WAL, rollback journal, shared-memory and lock files.
    static func removeFiles(of url: URL) {
        for suffix in ["", "-wal", "-journal", "-shm", "-migration-lock"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
    }

    /// The saved schema and `loom_metadata` of the store at `url`, read without changing the
    /// file: its model version (`versionIdentifier`) when it was opened with a versioned schema.
    ///
    /// - Throws: ``LoomError/Code/storeFailure`` when there is no file, ``LoomError/Code/notADatabase``
    ///   or ``LoomError/Code/notALoomStore`` for a file that is not a Loom store.
    @_spi(LoomStore) public static func savedState(at url: URL) throws(LoomError) -> SavedStoreState {
        let path = url.path
        let saved: (Data?, [String: String])? = try readExistingFile(at: path) { db in
            guard try db.tableExists("loom_metadata") else { return nil }
            var schema: Data?
            var metadata: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, value FROM loom_metadata") {
                let value: DatabaseValue = row["value"]
                let data = Data.fromDatabaseValue(value) ?? String.fromDatabaseValue(value).map { Data($0.utf8) }
                let key: String = try row.decode(forColumn: "key")
                if key == "schema" { schema = data } else { metadata[key] = data.map { String(decoding: $0, as: UTF8.self) } }
            }
            return (schema, metadata)
        }
        guard let saved, let data = saved.0, let record = try? JSONDecoder().decode(SchemaRecord.self, from: data) else {
            throw LoomError(.notALoomStore, "\(path) is not a Loom store (no saved schema).", path: path)
        }
        return SavedStoreState(record: record, metadata: saved.1)
    }

    /// Writes one `loom_metadata` value inside the write transaction this thread holds, so that
    /// it commits (or rolls back) with the transaction's saves.
    @_spi(LoomStore) public func setMetadata(_ value: String?, forKey key: String) throws(LoomError) {
        guard writeScope.isHeldByCurrentThread else {
            throw LoomError(.storeFailure, "SQLiteStore.setMetadata was called outside a write transaction of this thread.", path: url.path)
        }
        do {
            try pool.writeWithoutTransaction { db in try SQLiteStore.write([key: value], db) }
        } catch {
            throw translate(error, entity: nil)
        }
    }
}

/// `open(2)` of a lock file, at file scope: inside ``SQLiteStore/Location`` the name `open` is the
/// store opener, and qualifying it by module (`Glibc.open`) would not build on Apple platforms.
private func openLockFile(_ path: String) -> Int32 { open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o644) }

private func closeLockFile(_ fd: Int32) { _ = close(fd) }
