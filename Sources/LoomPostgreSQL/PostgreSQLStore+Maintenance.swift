public import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
import PostgresNIO

/// The `loom` tool's access to a PostgreSQL store: its saved state, the server's view of the
/// store's tables, constraints and indexes, and a bulk load.
@_spi(LoomStore) extension PostgreSQLStore: StoreMaintenance {
    @_spi(LoomStore) public func maintenanceState() throws(LoomError) -> StoreMaintenanceState {
        try withReadConnection { connection in
            // One snapshot for both tables.
            try connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            defer { _ = try? connection.query("ROLLBACK") }
            var metadata: [String: String] = [:]
            for row in try connection.query("SELECT key, value FROM loom_metadata") {
                let (key, value) = try row.decode((String, String).self)
                metadata[key] = value
            }
            var nextKeys: [String: Int64] = [:]
            for row in try connection.query("SELECT entity, next FROM loom_keys") {
                let (entity, next) = try row.decode((String, Int64).self)
                nextKeys[entity] = next
            }
            guard let text = metadata.removeValue(forKey: "schema"), let record = try? JSONDecoder().decode(SchemaRecord.self, from: Data(text.utf8)) else {
                throw LoomError(.notALoomStore, "The PostgreSQL store at \(configuration.description) has no readable saved schema.")
            }
            return StoreMaintenanceState(schemaRecord: record, metadata: metadata, nextKeys: nextKeys)
        }
    }

    /// The tables the schema needs that the store's schema lacks, constraints not validated
    /// (added `NOT VALID`, or left so by a failed operation) and indexes not valid (a failed
    /// concurrent build): what the server can say of the store's storage. PostgreSQL checks its
    /// pages itself (`quick` changes nothing), and enforces the constraints it holds valid.
    @_spi(LoomStore) public func checkIntegrity(quick: Bool, limit: Int) throws(LoomError) -> [StoreIntegrityProblem] {
        let name = configuration.schemaName
        return try withReadConnection { connection in
            var bindings = PostgresBindings()
            bindings.append(name)
            let tables = Set(try connection.query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1", bindings).map { try $0.decode(String.self) })
            var problems: [StoreIntegrityProblem] = []
            let needed = ["loom_metadata", "loom_keys"] + schema.entities.map(\.name) + schema.joinTables.map(\.name)
            for table in needed where !tables.contains(table) {
                problems.append(StoreIntegrityProblem(kind: .storage, table: table, message: "The table \(table) is missing from the PostgreSQL schema \(name)."))
            }
            let constraints = """
                SELECT c.conrelid::regclass::text, c.conname::text FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace \
                WHERE n.nspname = $1 AND NOT c.convalidated ORDER BY 1, 2 LIMIT \(max(1, limit))
                """
            for row in try connection.query(constraints, bindings) {
                let (table, constraint) = try row.decode((String, String).self)
                problems.append(StoreIntegrityProblem(kind: .storage, table: table, message: "The constraint \(constraint) of \(table) is not validated: PostgreSQL does not vouch for the rows it holds."))
            }
            let indexes = """
                SELECT t.relname::text, c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
                WHERE n.nspname = $1 AND NOT (i.indisvalid AND i.indisready) ORDER BY 1, 2 LIMIT \(max(1, limit))
                """
            for row in try connection.query(indexes, bindings) {
                let (table, index) = try row.decode((String, String).self)
                problems.append(StoreIntegrityProblem(kind: .storage, table: table, message: "The index \(index) of \(table) is not valid (a build that failed): queries do not use it and a unique one does not refuse duplicates."))
            }
            return problems
        }
    }

    @_spi(LoomStore) public func bulkLoad<T>(as identifier: UUID, metadata: [String: String], _ body: (any StoreBulkWriter) throws -> T) throws -> T {
        try withWriteTransaction { () throws -> T in
            for entity in schema.entities {
                let rows = try writerQuery("SELECT 1 FROM \(SQLGenerator.quote(entity.name)) LIMIT 1")
                if rows.count > 0 {
                    throw LoomError(.invalidRequest, "The PostgreSQL store at \(configuration.description) holds \(entity.name) objects; a bulk load fills a new store.")
                }
            }
            let bulk = PostgreSQLBulkWriter(store: self)
            let value = try body(bulk)
            try bulk.flush()
            var bindings = PostgresBindings()
            bindings.append(identifier.uuidString)
            _ = try writerQuery("UPDATE loom_metadata SET value = $1 WHERE key = 'storeIdentifier'", bindings)
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) where !["storeIdentifier", "schema", "versionHash"].contains(key) {
                var bindings = PostgresBindings()
                bindings.append(key)
                bindings.append(value)
                _ = try writerQuery("INSERT INTO loom_metadata (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", bindings)
            }
            // Listeners of the store (named by its identifier) are woken on the new name.
            _ = try writerQuery(Self.notifyFunction(channel: Self.channel(of: identifier)))
            return value
        }.value
    }

    /// Runs a statement on the writer inside the write transaction, errors translated.
    fileprivate func writerQuery(_ text: String, _ bindings: PostgresBindings = PostgresBindings(), entity: EntityDescription? = nil) throws(LoomError) -> PostgresQueryResult {
        do {
            return try writer.query(text, bindings)
        } catch {
            throw translate(error, entity: entity)
        }
    }
}

/// Buffers a bulk load's rows and inserts them many to a statement.
private final class PostgreSQLBulkWriter: StoreBulkWriter {
    private let store: PostgreSQLStore
    /// Rows waiting, by entity name, and the join rows waiting, by table name.
    private var rows: [String: (entity: EntityDescription, bindings: PostgresBindings, count: Int)] = [:]
    private var links: [String: (table: JoinTable, bindings: PostgresBindings, count: Int)] = [:]
    /// Rows a statement carries at most: well below PostgreSQL's 65,535 parameters.
    private static let parameterBudget = 30_000

    init(store: PostgreSQLStore) {
        self.store = store
    }

    func insert(_ entity: EntityDescription, key: Int64, version: Int64, values: [StoredValue], textBytes: [(slot: Int, bytes: Data)]) throws(LoomError) {
        var values = values
        for (slot, bytes) in textBytes {
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw LoomError(.invalidRequest, "\(entity.name) \(key)'s \(entity.columnName(at: slot)) is text that is not valid UTF-8, which PostgreSQL cannot store.", entity: entity.name)
            }
            values[slot] = .text(text)
        }
        // Bound straight into the statement's parameters: a value that cannot be bound fails
        // the whole load, so nothing half-bound is ever sent.
        var waiting = rows.removeValue(forKey: entity.name) ?? (entity, PostgresBindings(), 0)
        waiting.bindings.append(key)
        waiting.bindings.append(version)
        for (slot, value) in values.enumerated() {
            do {
                try PostgreSQLValues.bind(value, as: ColumnKind.of(entity, slot), to: &waiting.bindings)
            } catch {
                throw LoomError(.invalidRequest, "\(entity.name) \(key)'s \(entity.columnName(at: slot)) cannot be stored: \(error.reason).", entity: entity.name)
            }
        }
        waiting.count += 1
        rows[entity.name] = waiting
        if rows[entity.name]!.count * (2 + entity.storedValueCount) >= Self.parameterBudget { try flushRows(of: entity.name) }
    }

    func link(_ table: JoinTable, source: Int64, target: Int64) throws(LoomError) {
        links[table.name, default: (table, PostgresBindings(), 0)].bindings.append(source)
        links[table.name]!.bindings.append(target)
        links[table.name]!.count += 1
        if links[table.name]!.count * 2 >= Self.parameterBudget { try flushLinks(of: table.name) }
    }

    func firstDanglingReference(of relationship: ResolvedRelationship) throws(LoomError) -> (owner: Int64, target: Int64)? {
        try flush()
        guard let text = store.sql.firstDanglingReference(relationship) else { return nil }
        guard let row = try store.writerQuery(text).first(where: { _ in true }) else { return nil }
        do {
            return try row.decode((Int64, Int64).self)
        } catch {
            throw store.translate(error, entity: relationship.source)
        }
    }

    func highestKey(of entity: EntityDescription) throws(LoomError) -> Int64? {
        try flush()
        guard let row = try store.writerQuery(store.sql.highestKey(entity)).first(where: { _ in true }) else { return nil }
        do {
            return try row.decode(Int64?.self)
        } catch {
            throw store.translate(error, entity: entity)
        }
    }

    func setNextKey(_ next: Int64, for entity: EntityDescription) throws(LoomError) {
        var bindings = PostgresBindings()
        bindings.append(entity.name)
        bindings.append(next)
        _ = try store.writerQuery("INSERT INTO loom_keys (entity, next) VALUES ($1, $2) ON CONFLICT (entity) DO UPDATE SET next = EXCLUDED.next", bindings)
    }

    /// Inserts every row waiting.
    func flush() throws(LoomError) {
        for name in rows.keys.sorted() { try flushRows(of: name) }
        for name in links.keys.sorted() { try flushLinks(of: name) }
    }

    private func flushRows(of name: String) throws(LoomError) {
        guard let waiting = rows.removeValue(forKey: name), waiting.count > 0 else { return }
        _ = try store.writerQuery(store.sql.bulkInsert(waiting.entity, rows: waiting.count), waiting.bindings, entity: waiting.entity)
    }

    private func flushLinks(of name: String) throws(LoomError) {
        guard let waiting = links.removeValue(forKey: name), waiting.count > 0 else { return }
        _ = try store.writerQuery(store.sql.bulkLink(waiting.table, rows: waiting.count), waiting.bindings)
    }
}
