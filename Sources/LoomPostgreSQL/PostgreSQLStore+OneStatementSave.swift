import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQL
import PostgresNIO

/// A save in one round trip: its statements, the write lock before them and the history row
/// after them, sent as one statement that commits by itself (no `BEGIN`, no `COMMIT`).
///
/// postgres-nio does not pipeline: every statement is a round trip, and a save run statement by
/// statement (`BEGIN`, the write lock, the change, the commit lock, the history row, `COMMIT`)
/// is six. Here the change set's statements become the common table expressions of one
/// statement, each joining `loom_lock` (the write lock, taken shared, first), and the statement
/// ends by calling `loom_record_commit` (``saveFunction``), a `VOLATILE` PL/pgSQL function of
/// the store's schema that checks the row versions (it raises `LM001` when a statement changed
/// fewer rows than it must, and the save is refused), then takes the commit lock and writes the
/// history row. A `VOLATILE` function takes a fresh snapshot for each statement it runs, so the
/// history row's number is read once the commit lock is held, as in a save statement by
/// statement: numbers follow commit order, with no gap. Values are bound parameters, never SQL.
///
/// Used when every statement of the change set changes a table of its own: statements of one
/// statement share a snapshot and run in no set order, so two changes of one table (an update
/// that frees a unique value, then an insert that takes it) go statement by statement, and so
/// do changes of two tables that share a hierarchy constraint's table. So do
/// saves inside a write transaction, saves with ``Configuration/insideSaveTransaction`` set (it
/// is called between statements), and stores whose schema has no function (see
/// ``installSaveFunctions(_:schemaName:)``).
///
/// The statement's snapshot is taken before the write lock is held (an exclusive write may hold
/// it): updates and deletes by key still check the newest row version (PostgreSQL reads a row
/// changed meanwhile again before changing it), inserts meet every committed unique value, and
/// a deleted object's join rows are deleted by `loom_unlink` (``unlinkFunction``), whose own
/// statement reads a snapshot taken once the lock is held.
///
/// The statement is a named prepared statement of the writer's connection
/// (``Configuration/preparesSaveStatements``): its text depends only on the save's shape (which
/// tables, columns and kinds of change; values are bound as arrays), so saves of one shape are
/// parsed and planned once per connection.
extension PostgreSQLStore {
    /// The function that ends a one-statement save. Its parameters: the rows each statement
    /// changed and the rows it must have changed (`NULL`: unchecked), the commit lock, pauses
    /// in seconds before the history row and before the commit (tests only; 0 otherwise), and
    /// the history row's values (`NULL` entities: no history row). Returns the history number.
    static let saveFunctionSignature = """
        loom_record_commit(bigint[], bigint[], bigint, double precision, double precision, double precision, bigint, bigint, text, text, bigint, text, text, bytea)
        """

    /// The types of ``saveFunction``'s parameters after the first (the rows each statement changed).
    static let saveFunctionParameterTypes = ["int8[]", "int8", "float8", "float8", "float8", "int8", "int8", "text", "text", "int8", "text", "text", "bytea"]

    static let saveFunctionBody = """

        DECLARE
            given bigint;
        BEGIN
            FOR i IN 1 .. coalesce(array_length(expected, 1), 0) LOOP
                IF changed[i] < expected[i] THEN
                    RAISE EXCEPTION 'Loom: statement % of a save changed % of its % rows: one was changed or deleted since it was read', i, changed[i], expected[i]
                        USING ERRCODE = 'LM001', DETAIL = i::text;
                END IF;
            END LOOP;
            IF pause_before_history > 0 THEN PERFORM pg_sleep(pause_before_history); END IF;
            IF history_entities IS NULL THEN RETURN NULL; END IF;
            PERFORM pg_advisory_xact_lock(commit_lock);
            INSERT INTO loom_history (number, timestamp, origin, origincommit, author, context, process, processname, entities, changes)
                SELECT COALESCE(MAX(number), 0) + 1, history_timestamp, history_origin, history_origincommit, history_author, history_context,
                       history_process, history_processname, history_entities, history_changes
                FROM loom_history RETURNING number INTO given;
            IF pause_before_commit > 0 THEN PERFORM pg_sleep(pause_before_commit); END IF;
            RETURN given;
        END

        """

    static var saveFunction: String {
        """
        CREATE OR REPLACE FUNCTION loom_record_commit(changed bigint[], expected bigint[], commit_lock bigint, \
        pause_before_history double precision, pause_before_commit double precision, history_timestamp double precision, \
        history_origin bigint, history_origincommit bigint, history_author text, history_context text, history_process bigint, \
        history_processname text, history_entities text, history_changes bytea) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $loom$\(saveFunctionBody)$loom$
        """
    }

    /// Deletes the rows of a join table whose `column` holds one of `keys`, in a statement of
    /// its own (a snapshot of its own); returns how many.
    static let unlinkFunctionSignature = "loom_unlink(text, text, bigint[])"

    static let unlinkFunctionBody = """

        DECLARE
            deleted bigint;
        BEGIN
            EXECUTE format('DELETE FROM %I WHERE %I = ANY($1)', table_name, column_name) USING keys;
            GET DIAGNOSTICS deleted = ROW_COUNT;
            RETURN deleted;
        END

        """

    static var unlinkFunction: String {
        "CREATE OR REPLACE FUNCTION loom_unlink(table_name text, column_name text, keys bigint[]) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $loom$\(unlinkFunctionBody)$loom$"
    }

    /// Creates or updates ``saveFunction`` and ``unlinkFunction`` in the store's schema, inside
    /// the transaction that opens the store, when one is missing or differs (a store made before
    /// them, or by another release). Returns whether both are there: a role that may not create
    /// functions in the schema still opens the store, whose saves then go statement by statement.
    static func installSaveFunctions(_ connection: PGConnection, schemaName: String) throws -> Bool {
        for (signature, body, create) in [(saveFunctionSignature, saveFunctionBody, saveFunction), (unlinkFunctionSignature, unlinkFunctionBody, unlinkFunction)] {
            guard try replaceFunction(connection, "\(SQLGenerator.quote(schemaName)).\(signature)", body: body, create: create) else { return false }
        }
        return true
    }

    /// Runs `create` (a `CREATE OR REPLACE FUNCTION`) unless the function `signature` has
    /// `body` already, in a savepoint of the open transaction: returns whether the function has
    /// `body` now (`false`: the role may not replace it, and the transaction goes on).
    static func replaceFunction(_ connection: PGConnection, _ signature: String, body: String, create: String) throws -> Bool {
        var bindings = PostgresBindings()
        bindings.append(signature)
        let existing = try connection.query("SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1)", bindings).first.map { try $0.decode(String.self) }
        if existing == body { return true }
        try connection.query("SAVEPOINT loom_function")
        do {
            try connection.query(create)
            try connection.query("RELEASE SAVEPOINT loom_function")
            return true
        } catch {
            try connection.query("ROLLBACK TO SAVEPOINT loom_function")
            try connection.query("RELEASE SAVEPOINT loom_function")
            return false
        }
    }

    /// Applies `changes` and commits them in one statement (see above); `nil` when they must go
    /// statement by statement. Refusals throw as statement by statement: a version conflict
    /// (which statement, not which object: the caller applies again to find out), a
    /// uniqueness violation, a deadlock. A connection lost once the statement was sent is
    /// `LoomError/Code/commitOutcomeUnknown`, as a lost `COMMIT` is.
    func applyInOneStatement(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt? {
        guard savesInOneStatement, configuration.insideSaveTransaction == nil, !changes.isEmpty,
              changes.inserts.count <= Self.insertChunk else { return nil }
        var statements = ChangeStatements(store: self, lock: "loom_lock")
        statements.append(writeLockKey)
        var parts: [ChangeStatement] = []
        var tables = Set<String>()
        var eligible = true
        // A member table of a hierarchy constraint changes the constraint's table too (its
        // triggers): two members of one constraint are two changes of one table.
        let spans = sql.hierarchyConstraintTables
        try statements.build(changes) { statement in
            eligible = tables.insert(statement.table).inserted && (spans[statement.table] ?? []).allSatisfy { tables.insert($0).inserted }
            parts.append(statement)
            return eligible
        }
        guard eligible else { return nil }
        var bindings = statements.bindings
        var text = "WITH loom_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared($1))"
        for (i, part) in parts.enumerated() {
            text += ", loom_\(i) AS (\(part.text))"
        }
        let first = bindings.count + 1
        text += " SELECT loom_record_commit(ARRAY[\(parts.indices.map { "(SELECT count(*) FROM loom_\($0))" }.joined(separator: ", "))]::int8[], "
            + Self.saveFunctionParameterTypes.enumerated().map { "$\(first + $0.offset)::\($0.element)" }.joined(separator: ", ") + ")"
        do {
            try PostgreSQLValues.bindArray(parts.map { $0.expected.map { .integer(Int64($0.count)) } ?? .null }, as: .integer, to: &bindings)
        } catch {
            throw LoomError(.storeFailure, "The row counts of a save could not be bound: \(error.reason).")
        }
        bindings.append(commitLockKey)
        let pause = configuration.pauseInsideOneStatementSave
        bindings.append(pause?(.beforeHistory) ?? 0)
        bindings.append(pause?(.beforeCommit) ?? 0)
        unacknowledgedCommits.beginTransaction()
        if configuration.recordsHistory {
            appendHistoryValues(of: changes, to: &bindings)
        } else {
            for _ in 0..<9 { bindings.appendNull() }
        }

        if writer.isClosed { try reopenWriter() }
        let connection = writer
        do {
            if configuration.preparesSaveStatements {
                try connection.runPrepared(text, bindings)
            } else {
                try connection.query(text, bindings)
            }
        } catch let notRun as PGStatementNotRun {
            throw translate(notRun.underlying, entity: nil, key: nil)
        } catch {
            if PGConnection.isLost(error) {
                commitOutcomeUnknown()
                throw LoomError(
                    .commitOutcomeUnknown,
                    "The connection to the PostgreSQL store at \(configuration.description) was lost after a save was sent (\(Self.describe(error))): it may have been committed or not. Fetch what it changed to find out before saving again.",
                    underlying: error)
            }
            if Self.sqlState(of: error) == "LM001" {
                let index = Self.serverField(.detail, of: error).flatMap { Int($0) }.map { $0 - 1 } ?? 0
                let part = parts[parts.indices.contains(index) ? index : 0]
                if let entity = part.entity, let key = part.expected?.first { throw versionConflict(entity, key: key) }
            }
            let part = parts.count == 1 ? parts[0] : nil
            throw translate(error, entity: part?.entity, key: part?.insertedKey)
        }
        return writeScope.commit()
    }
}
