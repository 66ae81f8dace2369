import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
import PostgresNIO

/// The store's history, as on SQLite: every save writes, in its own transaction, one
/// `loom_history` row (number, time, origin, author, context, process, entities, packed
/// changes). A number is given under a lock held until the transaction commits — the commit
/// lock for a save (whose write lock is shared with other servers' saves), the write lock
/// itself for a write transaction that holds it alone — so numbers increase in commit order
/// across every server, with no gap: a reader that has seen number N has seen every
/// transaction before it, and never skips one that commits late (the trap of sequence numbers
/// given before commit). Saves run their statements in parallel; only the history row and the
/// `COMMIT` take turns.
///
/// Why a commit lock rather than a horizon of transaction IDs (rows read only below
/// `pg_snapshot_xmin(pg_current_snapshot())`) or logical decoding: the numbers stay 1, 2, 3…
/// in commit order, so history tokens, deletion and the remote-commit listener keep their
/// meaning and existing stores need no migration; a horizon would hold every reader back
/// behind any long write transaction on the server (of any application), and logical
/// decoding needs server settings and a replication slot many hosted servers refuse. The cost
/// is that the commits of one store take turns: the commit lock, the history row and the
/// `COMMIT`, not the whole save (a save in one statement holds the commit lock only from its
/// history row to its commit: see ``applyInOneStatement(_:)``).
///
/// A statement trigger sends `NOTIFY` on the store's channel, delivered at commit, with the new
/// row's number, origin and commit as its payload: listeners use it as a wake-up, and read the
/// history after the last number they saw unless the payload shows the row is their own
/// instance's next one (see ``PostgreSQLListener``).
extension PostgreSQLStore {
    static func historyStatements(channel: String) -> [String] {
        [
            """
            CREATE TABLE loom_history (number BIGINT PRIMARY KEY, timestamp DOUBLE PRECISION NOT NULL, origin BIGINT, origincommit BIGINT, \
            author TEXT, context TEXT, process BIGINT NOT NULL, processname TEXT NOT NULL, entities TEXT NOT NULL, changes BYTEA)
            """,
            notifyFunction(channel: channel),
            "CREATE TRIGGER loom_history_notify AFTER INSERT ON loom_history FOR EACH STATEMENT EXECUTE FUNCTION loom_history_notify()",
        ]
    }

    /// The channel a store's listeners are woken on, named by the store's identifier.
    static func channel(of identifier: UUID) -> String {
        "loom_" + identifier.uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// The source of `loom_history_notify()`: the payload is the last history row's
    /// ``HistoryNotice`` text. That row is the one the statement inserted: history rows are
    /// numbered under a lock held until the commit, so no later one is visible.
    static func notifyFunctionBody(channel: String) -> String {
        " BEGIN PERFORM pg_notify('\(channel)', COALESCE((SELECT number || ' ' || COALESCE(origin::text, '-') || ' ' || COALESCE(origincommit::text, '-') FROM loom_history ORDER BY number DESC LIMIT 1), '')); RETURN NULL; END "
    }

    static func notifyFunction(channel: String) -> String {
        "CREATE OR REPLACE FUNCTION loom_history_notify() RETURNS trigger LANGUAGE plpgsql AS $$\(notifyFunctionBody(channel: channel))$$"
    }

    /// Replaces the notification function of a store made before notifications carried their
    /// row (whose listeners then read the history after each of their own commits), inside the
    /// bootstrap's transaction. A role that may not replace it keeps the old one: listeners
    /// read the history after every notification then, as before.
    static func installNotifyFunction(_ connection: PGConnection, schemaName: String, channel: String) throws {
        _ = try replaceFunction(connection, "\(SQLGenerator.quote(schemaName)).loom_history_notify()", body: notifyFunctionBody(channel: channel), create: notifyFunction(channel: channel))
    }

    /// The metadata key of the last transaction number deleted from the history.
    static let historyDeletedKey = "historyDeletedThrough"

    private static let processName = ProcessInfo.processInfo.processName
    private static let processIdentifier = ProcessInfo.processInfo.processIdentifier

    /// Records `changes` in the history, inside the transaction that applies them, under a lock
    /// held until the commit: the number is the next one in commit order. A save (write lock
    /// shared) takes the commit lock here, in a statement before the `INSERT`: the `INSERT`'s
    /// snapshot, taken once the lock is held, sees every commit made before, so its number is
    /// one more than the last committed.
    func writeHistory(_ changes: StoreChangeSet) throws(LoomError) {
        if changes.continuesHistoryTransaction, historyRowInTransaction.withLock({ row in
            guard var continued = row else { return false }
            row = nil   // uniquely referenced: the groups grow in place
            continued.continue(with: changes, in: schema)
            row = continued
            return true
        }) {
            return
        }
        // The row before it (a batch request's, in an exclusive write) is complete.
        try finishHistory()
        var bindings = PostgresBindings()
        appendHistoryValues(of: changes, to: &bindings)
        if writeLockShared.withLock({ $0 }) {
            // A statement of its own: the INSERT's snapshot must be taken once the lock is held.
            var lock = PostgresBindings()
            lock.append(commitLockKey)
            try onWriter("SELECT pg_advisory_xact_lock($1)", lock)
        }
        let rows: PostgresQueryResult
        do {
            rows = try writer.query(
                "INSERT INTO loom_history (number, timestamp, origin, origincommit, author, context, process, processname, entities, changes) SELECT COALESCE(MAX(number), 0) + 1, $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM loom_history RETURNING number",
                bindings)
        } catch {
            throw translate(error, entity: nil)
        }
        let number = rows.first.flatMap { $0.first { _ in true } }.map(PostgreSQLValues.int64)
        historyRowInTransaction.withLock { $0 = number.map { ContinuedHistoryRow(number: $0, writtenFrom: changes) } }
    }

    /// Binds the values of `changes`' history row, in the order of `loom_history`'s columns
    /// after `number`: time, origin, the instance's commit, author, context, process, process
    /// name, entities, packed changes.
    func appendHistoryValues(of changes: StoreChangeSet, to bindings: inout PostgresBindings) {
        var entities: [UInt8] = [], packed: [UInt8] = []
        SQLHistory.rowValues(of: changes, in: schema, entities: &entities, packed: &packed)
        let timestamp = Date().timeIntervalSince1970
        unacknowledgedCommits.wroteHistoryRow(timestamp: timestamp)
        bindings.append(timestamp)
        bindings.append(origin)
        bindings.append(Int64(lastCommitSequence + 1))
        bindings.append(changes.author)
        bindings.append(changes.contextName)
        bindings.append(Int64(Self.processIdentifier))
        bindings.append(Self.processName)
        bindings.append(String(decoding: entities, as: UTF8.self))
        bindings.append(BoundValue(psqlType: .bytea, bytes: ByteBuffer(bytes: packed)))
    }

    /// Writes the changes of the change sets that continued the open transaction's last history
    /// row over it (``ContinuedHistoryRow``), once: called before the transaction's `COMMIT`.
    func finishHistory() throws(LoomError) {
        guard let row = historyRowInTransaction.withLock({ $0 }), row.isContinued else { return }
        historyRowInTransaction.withLock { $0 = nil }
        let merged = row.merged
        var bindings = PostgresBindings()
        bindings.append(merged.entities)
        bindings.append(BoundValue(psqlType: .bytea, bytes: ByteBuffer(bytes: [UInt8](merged.changes))))
        bindings.append(row.number)
        try onWriter("UPDATE loom_history SET entities = $1, changes = $2 WHERE number = $3", bindings)
    }

    /// The transactions of a history query's rows (``SQLHistory/columns``), read on `connection`.
    static func historyTransactions(_ rows: PostgresQueryResult, on connection: PGConnection, entityNames: [String]?, store identifier: UUID, location: String) throws -> [HistoryTransaction] {
        let wanted = entityNames.map(Set.init)
        guard rows.first(where: { _ in true }) != nil else { return [] }
        // Read after the rows: marks only grow, so every key they list is below these.
        let keyLimit = SQLHistory.keyLimit(marks: try connection.query(SQLHistory.keyMarksQuery).map { PostgreSQLValues.int64($0.first { _ in true }!) })
        return try rows.map { row in
            let values = try row.map(PostgreSQLValues.value)
            func text(_ i: Int) -> String? { if case .text(let v) = values[i] { v } else { nil } }
            func integer(_ i: Int) -> Int64 { if case .integer(let v) = values[i] { v } else { 0 } }
            let timestamp: Double = if case .real(let v) = values[1] { v } else { 0 }
            let changes: Data = if case .blob(let v) = values[6] { v } else { Data() }
            return try SQLHistory.transaction(
                number: integer(0), timestamp: timestamp, author: text(2), context: text(3), process: integer(4), processName: text(5) ?? "",
                changes: changes, entityNames: wanted, store: identifier, location: location, keyLimit: keyLimit)
        }
    }

    @_spi(LoomStore) public func fetchHistory(_ descriptor: HistoryDescriptor) throws(LoomError) -> [HistoryTransaction] {
        if isClosed { throw closedError() }
        try HistoryErrors.check(descriptor, store: identifier)
        let store = identifier
        return try withReadConnection { connection in
            let after = descriptor.after?.transactionNumber ?? 0
            if let token = descriptor.after { try Self.checkPosition(token, on: connection) }
            var bindings = PostgresBindings()
            bindings.append(after)
            var text = "SELECT \(SQLHistory.columns) FROM loom_history WHERE number > $1 AND changes IS NOT NULL"
            var next = 2
            if let authors = descriptor.authors {
                text += " AND author = ANY($\(next)::text[])"
                try PostgreSQLValues.bindArray(authors.map(StoredValue.text), as: .text, to: &bindings)
                next += 1
            }
            if let entities = descriptor.entityNames {
                text += entities.isEmpty ? " AND false" : " AND EXISTS (SELECT 1 FROM unnest($\(next)::text[]) AS e(name) WHERE strpos(entities, e.name) > 0)"
                if !entities.isEmpty {
                    try PostgreSQLValues.bindArray(entities.map { StoredValue.text(",\($0),") }, as: .text, to: &bindings)
                    next += 1
                }
            }
            text += " ORDER BY number"
            if let limit = descriptor.fetchLimit {
                text += " LIMIT $\(next)"
                bindings.append(Int64(limit))
            }
            return try Self.historyTransactions(try connection.query(text, bindings), on: connection, entityNames: descriptor.entityNames, store: store, location: configuration.description)
        }
    }

    /// Checks `token` against the history `connection` reads (see
    /// ``HistoryErrors/checkPosition(_:lastNumber:deletedThrough:recordedTimestamp:forDeletion:oldestKept:)``):
    /// one statement, plus one for the oldest transaction kept when the token expired.
    static func checkPosition(_ token: HistoryToken, on connection: PGConnection, forDeletion: Bool = false) throws {
        var bindings = PostgresBindings()
        bindings.append(Self.historyDeletedKey)
        bindings.append(token.transactionNumber)
        let row = try connection.query("""
            SELECT (SELECT MAX(number) FROM loom_history), (SELECT value::int8 FROM loom_metadata WHERE key = $1), \
            (SELECT timestamp FROM loom_history WHERE number = $2)
            """, bindings).first
        let values = try row.map { try $0.map(PostgreSQLValues.value) } ?? []
        func integer(_ i: Int) -> Int64? { if i < values.count, case .integer(let v) = values[i] { v } else { nil } }
        let timestamp: Double? = if values.count > 2, case .real(let v) = values[2] { v } else { nil }
        try HistoryErrors.checkPosition(
            token, lastNumber: integer(0), deletedThrough: integer(1) ?? 0, recordedTimestamp: timestamp, forDeletion: forDeletion,
            oldestKept: {
                try connection.query("SELECT MIN(number) FROM loom_history WHERE changes IS NOT NULL").first.flatMap { row -> Int64? in
                    let cell = row.first { _ in true }!
                    return cell.bytes == nil ? nil : PostgreSQLValues.int64(cell)
                }
            })
    }

    /// Deletes in write transactions of at most `historyDeleteChunk` history transactions each.
    @_spi(LoomStore) public func deleteHistory(through token: HistoryToken) throws(LoomError) {
        if isClosed { throw closedError() }
        if token.storeIdentifier != identifier { throw HistoryErrors.foreign(token, store: identifier) }
        while true {
            let more = try writeScope.exclusively { () throws(LoomError) -> Bool in
                var more = false
                try begin()
                do throws(LoomError) {
                    let oldestRows: PostgresQueryResult
                    do {
                        try Self.checkPosition(token, on: writer, forDeletion: true)
                        oldestRows = try writer.query("SELECT MIN(number) FROM loom_history WHERE changes IS NOT NULL")
                    } catch {
                        throw translate(error, entity: nil)
                    }
                    if let cell = oldestRows.first?.first(where: { _ in true }), cell.bytes != nil, PostgreSQLValues.int64(cell) <= token.transactionNumber {
                        let upTo = min(token.transactionNumber, PostgreSQLValues.int64(cell) + Int64(Self.historyDeleteChunk) - 1)
                        var bindings = PostgresBindings()
                        bindings.append(upTo)
                        // The newest row stays, emptied, so that its number is never given again.
                        try onWriter("DELETE FROM loom_history WHERE number <= $1 AND number < (SELECT MAX(number) FROM loom_history)", bindings)
                        try onWriter("UPDATE loom_history SET changes = NULL WHERE number <= $1", bindings)
                        var metadata = PostgresBindings()
                        metadata.append(Self.historyDeletedKey)
                        metadata.append(String(upTo))
                        try onWriter("INSERT INTO loom_metadata (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", metadata)
                        more = upTo < token.transactionNumber
                    }
                    try commit()
                } catch {
                    _ = try? writer.query("ROLLBACK")
                    throw error
                }
                return more
            }
            if !more { return }
        }
    }

    /// History transactions deleted per write transaction by ``deleteHistory(through:)``.
    static let historyDeleteChunk = 500

    @_spi(LoomStore) public func currentHistoryToken() throws(LoomError) -> HistoryToken? {
        let store = identifier
        return try withReadConnection { connection -> HistoryToken? in
            guard let row = try connection.query("SELECT number, timestamp FROM loom_history ORDER BY number DESC LIMIT 1").first else { return nil }
            let values = try row.map(PostgreSQLValues.value)
            guard case .integer(let number) = values[0] else { return nil }
            let fingerprint: Int64? = if case .real(let timestamp) = values[1] { HistoryToken.fingerprint(ofTimestamp: timestamp) } else { nil }
            return HistoryToken(storeIdentifier: store, transactionNumber: number, fingerprint: fingerprint)
        }
    }

    /// Listens on the store's channel on a connection of its own and reads the history after
    /// each wake-up (and every second, so that a lost notification or a dropped connection
    /// only delays a change): see ``PostgreSQLListener``.
    @_spi(LoomStore) public func observeRemoteCommits(_ handler: @escaping @Sendable (RemoteCommits) -> Void) {
        guard configuration.recordsHistory, !isClosed else { return }
        let after: Int64
        do {
            after = try currentHistoryToken()?.transactionNumber ?? 0
        } catch {
            handler(.unavailable(LoomError(.storeFailure, "Other coordinators' commits to the PostgreSQL store at \(configuration.description) cannot be watched: its history cannot be read.", underlying: error)))
            return
        }
        let started = PostgreSQLListener(
            configuration: configuration, store: identifier, origin: origin, channel: channel, after: after,
            unacknowledged: unacknowledgedCommits, handler: handler)
        let previous = listener.withLock { listener in
            defer { listener = started }
            return listener
        }
        previous?.stop()
        started.start()
    }
}

extension PostgreSQLStore {
    /// The number of the last history transaction deleted (0 when none was): what a history
    /// reader whose token expired checks it against.
    @_spi(LoomStore) public func historyDeletedThrough() throws(LoomError) -> Int64 {
        try withReadConnection { connection in
            var bindings = PostgresBindings()
            bindings.append(Self.historyDeletedKey)
            return try connection.query("SELECT value::int8 FROM loom_metadata WHERE key = $1", bindings).first.map { PostgreSQLValues.int64($0.first { _ in true }!) } ?? 0
        }
    }
}
