import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQL
import PostgresNIO

/// Inferred migrations on PostgreSQL: a store saved with an earlier model is migrated when a
/// server opens it with the new one, inside the opening transaction and under its advisory
/// lock, so that servers starting together migrate once (the others wait, then find the new
/// model saved). The statements are LoomSQL's, the same as SQLite's (``MigrationStatement``);
/// PostgreSQL's DDL is transactional, so a failure leaves the store as it was.
///
/// What the inference cannot do (``SchemaMigration/infer(from:to:path:)``) is refused with
/// ``LoomError/Code/schemaMismatch``; versioned plans with custom stages run on SQLite only.
/// Servers still running the previous model must stop first: their statements name what the
/// migration changed.
extension PostgreSQLStore {
    static func migrate(
        _ connection: PGConnection, from saved: SchemaRecord, to schema: Schema, sql: SQLGenerator, configuration: Configuration,
        progress: TableMigrationProgress? = nil
    ) throws {
        let location = configuration.description
        let migration = try SchemaMigration.infer(from: saved, to: schema, path: location)
        // The write lock too, alone: no save of a server still open runs during the migration
        // (saves hold it shared), and the history's last number stays the migration's.
        var lock = PostgresBindings()
        lock.append(writeLockKey(configuration))
        try connection.query("SELECT pg_advisory_xact_lock($1)", lock)

        let statements = sql.migrationStatements(migration)
        // With a progress report: the rows of every rebuilt table, reported before and after its copy.
        var rows: [String: Int] = [:]
        if progress != nil {
            for case .copyRows(_, _, let table, _, _, _) in statements {
                rows[table] = try count(connection, "SELECT COUNT(*) FROM \(SQLGenerator.quote(table))")
            }
        }
        let total = rows.values.reduce(0, +)
        var copied = 0
        for statement in statements {
            switch statement {
            case .execute(let text, let arguments):
                try connection.query(text, try bindings(arguments))
            case .copyRows(let entity, let sources, let table, _, let copy, let arguments):
                let tableRows = rows[table] ?? 0
                progress?(entity.name, 0, tableRows, total == 0 ? 1 : Double(copied) / Double(total))
                try diagnosing(connection, state: .postgresNotNullViolation, copy, try bindings(arguments)) { error in
                    for (attribute, query) in sql.missingValueQueries(entity, sources, table: table) {
                        let empty = try count(connection, query)
                        if empty > 0 {
                            return MigrationErrors.missingValues(entity.name, attribute: attribute, count: empty, location: location,
                                                                 underlying: error, storeCode: storeCode(of: error))
                        }
                    }
                    return MigrationErrors.missingValues(entity.name, attribute: nil, count: 0, location: location, underlying: error, storeCode: storeCode(of: error))
                }
                copied += tableRows
                progress?(entity.name, tableRows, tableRows, total == 0 ? 1 : Double(copied) / Double(total))
            case .uniqueIndex(let entity, let constraint, let text, let query):
                try diagnosing(connection, state: .postgresUniqueViolation, text, PostgresBindings()) { error in
                    let row = try connection.query(query).first.map { try $0.map(PostgreSQLValues.value) }
                    let key = row.map { values in
                        constraint.indices.map { "\(constraint[$0]) = \(values[$0])" }.joined(separator: ", ")
                    } ?? "?"
                    let count: Int = if case .integer(let n) = row?[constraint.count] { Int(n) } else { 0 }
                    return MigrationErrors.duplicates(entity.name, constraint: constraint, key: key, count: count, location: location,
                                                      underlying: error, storeCode: storeCode(of: error))
                }
            }
        }
        var metadata = PostgresBindings()
        metadata.append(String(decoding: try JSONEncoder().encode(schema.record), as: UTF8.self))
        metadata.append(schema.versionHash)
        try connection.query("UPDATE loom_metadata SET value = CASE key WHEN 'schema' THEN $1 ELSE $2 END WHERE key IN ('schema', 'versionHash')", metadata)
        try expireHistory(connection)
    }

    /// Runs `text` under a savepoint; a failure with the store code `state` is rolled back to it (the
    /// transaction stays usable) and becomes the error `diagnose` makes by reading the store.
    private static func diagnosing(
        _ connection: PGConnection, state: StoreErrorCode, _ text: String, _ bindings: PostgresBindings, _ diagnose: (any Error) throws -> LoomError
    ) throws {
        try connection.query("SAVEPOINT loom_migration_step")
        do {
            try connection.query(text, bindings)
            try connection.query("RELEASE SAVEPOINT loom_migration_step")
        } catch where storeCode(of: error) == state {
            try connection.query("ROLLBACK TO SAVEPOINT loom_migration_step")
            throw try diagnose(error)
        }
    }

    /// As on SQLite: the history before a schema change names another model's entities, so it
    /// ends with an empty transaction of the migration's, and every token before that one is
    /// ``LoomError/Code/historyTokenExpired`` (a consumer refreshes everything and starts again).
    private static func expireHistory(_ connection: PGConnection) throws {
        var bindings = PostgresBindings()
        bindings.append(Date().timeIntervalSince1970)
        bindings.append(Int64(ProcessInfo.processInfo.processIdentifier))
        bindings.append(ProcessInfo.processInfo.processName)
        guard let row = try connection.query(
            "INSERT INTO loom_history (number, timestamp, author, process, processname, entities, changes) SELECT COALESCE(MAX(number), 0) + 1, $1, 'Loom migration', $2, $3, ',', NULL FROM loom_history RETURNING number",
            bindings
        ).first else {
            throw LoomError(.migrationFailed, "The migration's history transaction was not written (the server returned no number). The store was not changed.")
        }
        let number = try row.decode(Int64.self)
        var deleted = PostgresBindings()
        deleted.append(number)
        try connection.query("DELETE FROM loom_history WHERE number < $1", deleted)
        var metadata = PostgresBindings()
        metadata.append(historyDeletedKey)
        metadata.append(String(number))
        try connection.query("INSERT INTO loom_metadata (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", metadata)
    }

    /// Marks the history row that ends the history at a migration (``expireHistory(_:)``) as
    /// commit `history.commit` of the store instance `history.origin`, in the migration's
    /// transaction, as on SQLite: the migration takes its place among the instance's commits in
    /// the history, as a save's row does, with the number its receipt reports.
    static func recordMigrationCommit(_ connection: PGConnection, _ history: (origin: Int64, commit: UInt64)) throws {
        var bindings = PostgresBindings()
        bindings.append(history.origin)
        bindings.append(Int64(history.commit))
        try connection.query(
            "UPDATE loom_history SET origin = $1, origincommit = $2 WHERE number = (SELECT MAX(number) FROM loom_history) AND author = 'Loom migration'",
            bindings)
    }

    private static func bindings(_ values: [StoredValue]) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { try PostgreSQLValues.bind(value, to: &bindings) }
        return bindings
    }

    /// Writes one metadata value (`nil` removes the key) on `connection`, in its transaction.
    static func setMetadata(_ value: String?, forKey key: String, on connection: PGConnection) throws {
        var bindings = PostgresBindings()
        bindings.append(key)
        if let value {
            bindings.append(value)
            try connection.query("INSERT INTO loom_metadata (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", bindings)
        } else {
            try connection.query("DELETE FROM loom_metadata WHERE key = $1", bindings)
        }
    }

    private static func count(_ connection: PGConnection, _ query: String) throws -> Int {
        try connection.query(query).first.map { Int(try $0.decode(Int64.self)) } ?? 0
    }
}
