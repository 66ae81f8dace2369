public import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
package import GRDB

/// The `loom` tool's access to a SQLite store: its saved state, SQLite's integrity checks, and
/// a bulk load. The same reads run on a store the tool opened read-only (``maintenanceState(in:)``,
/// ``checkIntegrity(in:quick:limit:)``), and a new store file can be loaded without a journal
/// (``loadNewFile(at:schema:metadata:identifier:_:)``).
@_spi(LoomStore) extension SQLiteStore: StoreMaintenance {
    @_spi(LoomStore) public func maintenanceState() throws(LoomError) -> StoreMaintenanceState {
        do {
            return try pool.read { db in try Self.maintenanceState(in: db, path: url.path) }
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: nil)
        }
    }

    @_spi(LoomStore) public func checkIntegrity(quick: Bool, limit: Int) throws(LoomError) -> [StoreIntegrityProblem] {
        do {
            return try pool.read { db in try Self.checkIntegrity(in: db, quick: quick, limit: limit) }
        } catch {
            throw translate(error, entity: nil)
        }
    }

    @_spi(LoomStore) public func bulkLoad<T>(as identifier: UUID, metadata: [String: String], _ body: (any StoreBulkWriter) throws -> T) throws -> T {
        try withWriteTransaction { () throws -> T in
            try pool.writeWithoutTransaction { db throws -> T in
                for entity in schema.entities where try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(SQLGenerator.quote(entity.name)))") == true {
                    throw LoomError(.invalidRequest, "The store at \(url.path) holds \(entity.name) objects; a bulk load fills a new store.", path: url.path)
                }
                let value = try body(SQLiteBulkWriter(db: db, schema: schema))
                try Self.write(metadata.filter { !["schema", "versionHash"].contains($0.key) }.mapValues { $0 as String? }, db)
                try db.execute(sql: "UPDATE loom_metadata SET value = ? WHERE key = 'storeIdentifier'", arguments: [identifier.uuidString])
                return value
            }
        }.value
    }

    /// ``StoreMaintenance/maintenanceState()`` read on any connection to a store file.
    ///
    /// - Throws: `LoomError` with code ``LoomError/Code/notALoomStore`` when the file has no
    ///   readable saved schema; GRDB's errors when it cannot be read.
    package static func maintenanceState(in db: Database, path: String) throws -> StoreMaintenanceState {
        guard try db.tableExists("loom_metadata") else {
            throw LoomError(.notALoomStore, "\(path) is not a Loom store (it has no loom_metadata table).", path: path)
        }
        var metadata: [String: String] = [:]
        var record: Data?
        for row in try Row.fetchAll(db, sql: "SELECT key, value FROM loom_metadata ORDER BY key") {
            let value: DatabaseValue = row["value"]
            let data = Data.fromDatabaseValue(value) ?? String.fromDatabaseValue(value).map { Data($0.utf8) }
            let key: String = try row.decode(forColumn: "key")
            if key == "schema" { record = data } else { metadata[key] = data.map { String(decoding: $0, as: UTF8.self) } }
        }
        guard let record, let schema = try? JSONDecoder().decode(SchemaRecord.self, from: record) else {
            throw LoomError(.notALoomStore, "\(path) has no readable schema in loom_metadata; the file is damaged.", path: path)
        }
        var nextKeys: [String: Int64] = [:]
        if try db.tableExists("loom_keys") {
            for row in try Row.fetchAll(db, sql: "SELECT entity, next FROM loom_keys") {
                // A damaged file's NULL or text throws rather than traps (GRDB's subscripts trap).
                let entity: String = try row.decode(forColumn: "entity"), next: Int64 = try row.decode(forColumn: "next")
                nextKeys[entity] = next
            }
        }
        return StoreMaintenanceState(schemaRecord: schema, metadata: metadata, nextKeys: nextKeys)
    }

    /// ``StoreMaintenance/checkIntegrity(quick:limit:)`` on any connection to a store file:
    /// `PRAGMA integrity_check` (`quick_check` when `quick`) and `PRAGMA foreign_key_check`.
    package static func checkIntegrity(in db: Database, quick: Bool, limit: Int) throws -> [StoreIntegrityProblem] {
        let pragma = quick ? "quick_check" : "integrity_check"
        var problems: [StoreIntegrityProblem] = []
        for message in try String.fetchAll(db, sql: "PRAGMA \(pragma)(\(max(1, limit)))") where message != "ok" {
            problems.append(StoreIntegrityProblem(kind: .storage, message: "SQLite's \(pragma): \(message)"))
        }
        let rows = try Row.fetchCursor(db, sql: "SELECT \"table\", rowid, parent FROM pragma_foreign_key_check")
        var found = 0
        while found < max(1, limit), let row = try rows.next() {
            let table: String = row[0], key: Int64? = row[1], parent: String = row[2]
            problems.append(StoreIntegrityProblem(
                kind: .foreignKey, table: table, key: key,
                message: "A row of \(table)\(key.map { " (rowid \($0))" } ?? "") refers to a missing row of \(parent) (PRAGMA foreign_key_check)."))
            found += 1
        }
        return problems
    }

    /// Makes a new store file at `url` with `schema` and `metadata`, gives it `identifier`, and
    /// fills it through `body` in one transaction, without a journal and without syncs (a failed
    /// load leaves a file the caller removes; a finished one is synced once and put back in WAL
    /// mode). Records no history.
    ///
    /// Not isolated: blocks the calling thread; `body` runs on it.
    package static func loadNewFile<T>(
        at url: URL, schema: Schema, metadata: [String: String], identifier: UUID, _ body: (any StoreBulkWriter) throws -> T
    ) throws -> T {
        // The tables are a store's own: made by the store.
        let store = try SQLiteStore(url: url, schema: schema, options: SQLiteStore.Options(recordsHistory: false), metadata: metadata.mapValues { $0 as String? })
        try store.close()
        // Traced as the store's own connections are: `LOOM_SQL_DEBUG` shows the load's inserts.
        let queue = try tracedQueue(path: url.path, configuration: Configuration())
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = OFF")
            try db.execute(sql: "PRAGMA synchronous = OFF")
            try db.execute(sql: "PRAGMA cache_size = -65536")
        }
        let value = try queue.writeWithoutTransaction { db throws -> T in
            try db.execute(sql: "BEGIN IMMEDIATE TRANSACTION")
            do {
                let value = try body(SQLiteBulkWriter(db: db, schema: schema))
                try db.execute(sql: "UPDATE loom_metadata SET value = ? WHERE key = 'storeIdentifier'", arguments: [identifier.uuidString])
                try db.execute(sql: "COMMIT TRANSACTION")
                return value
            } catch {
                // The file is removed by the caller: this only ends the transaction, so that it can be closed.
                if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK TRANSACTION") }
                throw error
            }
        }
        // Back to WAL, the store's mode, now that the data is in.
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
        try queue.close()
        let handle = try FileHandle(forUpdating: url)
        try handle.synchronize()
        try handle.close()
        return value
    }
}

/// Inserts a bulk load's rows with prepared statements, one row at a time, on one connection
/// inside its transaction.
private final class SQLiteBulkWriter: StoreBulkWriter {
    private let db: Database
    private let sql: SQLGenerator
    /// The prepared inserts, by entity or join table name; GRDB's statement keeps each handle alive.
    private var inserts: [String: (Statement, RawStatement)] = [:]

    init(db: Database, schema: Schema) {
        self.db = db
        self.sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
    }

    private func statement(_ name: String, _ text: @autoclosure () -> String) throws -> RawStatement {
        if let (_, raw) = inserts[name] { return raw }
        let text = text()
        let statement = try db.makeStatement(sql: text)
        let raw = RawStatement(handle: statement.sqliteStatement, sql: text)
        inserts[name] = (statement, raw)
        return raw
    }

    private func translate(_ error: any Error, _ entity: String?) -> LoomError {
        if let error = error as? LoomError { return error }
        let code = (error as? DatabaseError).map { StoreErrorCode(primary: $0.resultCode.rawValue, extended: $0.extendedResultCode.rawValue) }
        let message = (error as? DatabaseError)?.message ?? "\(error)"
        return LoomError(.storeFailure, message, entity: entity, underlying: error, storeCode: code)
    }

    func insert(_ entity: EntityDescription, key: Int64, version: Int64, values: [StoredValue], textBytes: [(slot: Int, bytes: Data)]) throws(LoomError) {
        do {
            let raw = try statement(entity.name, sql.bulkInsert(entity, rows: 1))
            raw.reset()
            try raw.bind(key, at: 1)
            try raw.bind(version, at: 2)
            do {
                try raw.bindWritten(values, from: 3)
            } catch let nan as RawStatement.NotANumber {
                throw nan.refusal(entity, slot: nan.offset, key: key, store: nil)
            }
            for (slot, bytes) in textBytes { try raw.bindText(bytes: bytes, at: Int32(3 + slot)) }
            try raw.execute()
        } catch {
            throw translate(error, entity.name)
        }
    }

    func link(_ table: JoinTable, source: Int64, target: Int64) throws(LoomError) {
        do {
            let raw = try statement(table.name, sql.bulkLink(table, rows: 1))
            raw.reset()
            try raw.bind(source, at: 1)
            try raw.bind(target, at: 2)
            try raw.execute()
        } catch {
            throw translate(error, table.sourceEntityName)
        }
    }

    func firstDanglingReference(of relationship: ResolvedRelationship) throws(LoomError) -> (owner: Int64, target: Int64)? {
        guard let text = sql.firstDanglingReference(relationship) else { return nil }
        do {
            guard let row = try Row.fetchOne(db, sql: text) else { return nil }
            return (try row.decode(atIndex: 0), try row.decode(atIndex: 1))
        } catch {
            throw translate(error, relationship.source.name)
        }
    }

    func highestKey(of entity: EntityDescription) throws(LoomError) -> Int64? {
        do {
            return try Int64.fetchOne(db, sql: sql.highestKey(entity))
        } catch {
            throw translate(error, entity.name)
        }
    }

    func setNextKey(_ next: Int64, for entity: EntityDescription) throws(LoomError) {
        do {
            try db.execute(sql: "INSERT OR REPLACE INTO loom_keys (entity, next) VALUES (?, ?)", arguments: [entity.name, next])
        } catch {
            throw translate(error, entity.name)
        }
    }
}
