package import Foundation
package import GRDB
import GRDBSQLite
import LoomSQL
@_spi(LoomStore) public import LoomCore

/// The store's history: every save writes, in its own transaction, one `loom_history` row: its
/// number, time, author, context and process, the entities it changed (`,Book,Tag,`, for
/// filtering) and its changes (``HistoryChangeGroup/encode(_:)``: grouped by entity, kind and
/// changed properties, keys packed), so that a save of one object or of 100,000 adds one row.
/// Numbers are rowids, never reused: purging keeps the newest row with its changes cleared
/// (`NULL`), so the next number still follows it.
extension SQLiteStore {
    /// The history table, for a new store and for a store made before Loom kept history.
    static let historyStatements = [
        """
        CREATE TABLE IF NOT EXISTS loom_history (number INTEGER PRIMARY KEY, timestamp REAL NOT NULL, origin INTEGER, originCommit INTEGER, \
        author TEXT, context TEXT, process INTEGER NOT NULL, processName TEXT NOT NULL, entities TEXT NOT NULL, changes BLOB)
        """,
    ]

    /// Adds the columns a history table made by an earlier Loom lacks.
    static func upgradeHistoryTable(_ db: Database) throws {
        let columns = Set(try Row.fetchAll(db, sql: "PRAGMA table_info(loom_history)").map { $0["name"] as String })
        for column in ["origin", "originCommit"] where !columns.contains(column) {
            try db.execute(sql: "ALTER TABLE loom_history ADD COLUMN \(column) INTEGER")
        }
    }

    /// The metadata key of the last transaction number deleted from the history.
    static let historyDeletedKey = "historyDeletedThrough"

    /// Records `changes` in the history, inside the transaction that applies them. A change set
    /// that continues the history transaction of the one before it (a batch request's later
    /// chunks) adds its changes to that row's in memory; ``HistoryWriter/finish(_:)``
    /// writes them, once, before the transaction commits.
    func writeHistory(_ changes: StoreChangeSet, _ db: Database) throws {
        if changes.continuesHistoryTransaction, historyWriter.continueRow(with: changes, schema: schema) { return }
        try historyWriter.write(changes, schema: schema, origin: origin, commit: lastCommitSequence + 1, db)
    }

    @_spi(LoomStore) public func fetchHistory(_ descriptor: HistoryDescriptor) throws(LoomError) -> [HistoryTransaction] {
        if isClosed { throw closedError() }
        try HistoryErrors.check(descriptor, store: identifier)
        do {
            return try pool.read { db in try Self.fetchHistory(descriptor, in: db, store: identifier, path: url.path) }
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: nil)
        }
    }

    /// The history transactions `descriptor` selects, read on `db` (a connection of the store at
    /// `path`, whose identifier is `store`): the store's own reads, and tools' read-only ones.
    package static func fetchHistory(_ descriptor: HistoryDescriptor, in db: Database, store: UUID, path: String) throws -> [HistoryTransaction] {
        let after = descriptor.after?.transactionNumber ?? 0
        if let token = descriptor.after { try checkPosition(token, in: db) }
        var sql = "SELECT \(Self.historyColumns) FROM loom_history WHERE number > ? AND changes IS NOT NULL"
        var arguments: [any DatabaseValueConvertible] = [after]
        if let authors = descriptor.authors {
            sql += " AND author IN (\(authors.map { _ in "?" }.joined(separator: ", ")))"
            arguments += authors
        }
        if let entities = descriptor.entityNames {
            sql += " AND (" + (entities.isEmpty ? "0" : entities.map { _ in "instr(entities, ?) > 0" }.joined(separator: " OR ")) + ")"
            arguments += entities.map { ",\($0)," }
        }
        sql += " ORDER BY number"
        if let limit = descriptor.fetchLimit {
            sql += " LIMIT ?"
            arguments.append(limit)
        }
        return try Self.historyTransactions(db, sql: sql, arguments: StatementArguments(arguments)!, entityNames: descriptor.entityNames, store: store, path: path)
    }

    /// Checks `token` against the history of the store `db` reads (see
    /// ``HistoryErrors/checkPosition(_:lastNumber:deletedThrough:recordedTimestamp:forDeletion:oldestKept:)``):
    /// one statement, plus one for the oldest transaction kept when the token expired.
    static func checkPosition(_ token: HistoryToken, in db: Database, forDeletion: Bool = false) throws {
        let row = try Row.fetchOne(db, sql: """
            SELECT (SELECT MAX(number) FROM loom_history), \
            (SELECT CAST(value AS INTEGER) FROM loom_metadata WHERE key = ?), \
            (SELECT timestamp FROM loom_history WHERE number = ?)
            """, arguments: [Self.historyDeletedKey, token.transactionNumber])
        try HistoryErrors.checkPosition(
            token, lastNumber: row?[0], deletedThrough: row?[1] ?? 0, recordedTimestamp: row?[2], forDeletion: forDeletion,
            oldestKept: { try Int64.fetchOne(db, sql: "SELECT MIN(number) FROM loom_history WHERE changes IS NOT NULL") })
    }

    /// The columns ``historyTransactions(_:sql:arguments:entityNames:store:path:)`` reads, in its order.
    static let historyColumns = SQLHistory.columns

    /// The transactions a query of ``historyColumns`` returns, with only the changes of
    /// `entityNames` (`nil`: all).
    static func historyTransactions(
        _ db: Database, sql: String, arguments: StatementArguments, entityNames: [String]?, store identifier: UUID, path: String
    ) throws -> [HistoryTransaction] {
        let wanted = entityNames.map(Set.init)
        let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
        guard !rows.isEmpty else { return [] }
        // Read after the rows, in the same read: every key they list is below these marks.
        let keyLimit = SQLHistory.keyLimit(marks: try db.tableExists("loom_keys") ? Int64.fetchAll(db, sql: SQLHistory.keyMarksQuery) : [])
        var transactions: [HistoryTransaction] = []
        for row in rows {
            // Every query of history rows asks for `changes IS NOT NULL`.
            transactions.append(try SQLHistory.transaction(
                number: try row.decode(atIndex: 0), timestamp: try row.decode(atIndex: 1), author: try row.decode(atIndex: 2),
                context: try row.decode(atIndex: 3), process: try row.decode(atIndex: 4), processName: try row.decode(atIndex: 5),
                changes: try row.decode(atIndex: 6), entityNames: wanted, store: identifier, location: path, keyLimit: keyLimit))
        }
        return transactions
    }

    /// Deletes in transactions of at most `historyDeleteChunk` history transactions each, so
    /// that saves waiting for the writer never wait long.
    @_spi(LoomStore) public func deleteHistory(through token: HistoryToken) throws(LoomError) {
        if isClosed { throw closedError() }
        try refuseIfReadOnly()
        if token.storeIdentifier != identifier { throw HistoryErrors.foreign(token, store: identifier) }
        while true {
            let more = try writeScope.exclusively { () throws(LoomError) -> Bool in
                do {
                    return try pool.writeWithoutTransaction { db -> Bool in
                        var more = false
                        try db.inTransaction(.immediate) {
                            try Self.checkPosition(token, in: db, forDeletion: true)
                            guard let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(number) FROM loom_history WHERE changes IS NOT NULL"),
                                  oldest <= token.transactionNumber else {
                                return .commit
                            }
                            let upTo = min(token.transactionNumber, oldest + Int64(Self.historyDeleteChunk) - 1)
                            // The newest row stays, emptied, so that its number is never given again.
                            try db.execute(sql: "DELETE FROM loom_history WHERE number <= ? AND number < (SELECT MAX(number) FROM loom_history)", arguments: [upTo])
                            try db.execute(sql: "UPDATE loom_history SET changes = NULL WHERE number <= ?", arguments: [upTo])
                            try db.execute(sql: "INSERT OR REPLACE INTO loom_metadata (key, value) VALUES (?, ?)", arguments: [Self.historyDeletedKey, String(upTo)])
                            more = upTo < token.transactionNumber
                            return .commit
                        }
                        return more
                    }
                } catch let error as LoomError {
                    throw error
                } catch {
                    throw translate(error, entity: nil)
                }
            }
            if !more { return }
        }
    }

    /// History transactions deleted per write transaction by ``deleteHistory(through:)``.
    static let historyDeleteChunk = 500

    /// Watches the file for other instances' commits (``RemoteCommitWatcher``) when the store
    /// records history; without history there is nothing to read them from, and it does
    /// nothing. A watcher that cannot start (no file descriptors left) leaves the store working
    /// without remote changes.
    @_spi(LoomStore) public func observeRemoteCommits(_ handler: @escaping @Sendable (RemoteCommits) -> Void) {
        guard recordsHistory, !isClosed else { return }
        // Where to start: never from 0 when the last transaction cannot be read, which would
        // hand the whole past history on as remote commits. Without it, no watcher.
        let after: Int64
        do {
            after = try currentHistoryToken()?.transactionNumber ?? 0
        } catch {
            handler(.unavailable(LoomError(.storeFailure, "Other coordinators' commits to the store at \(url.path) cannot be watched: its history cannot be read.", path: url.path, underlying: error)))
            return
        }
        let started: RemoteCommitWatcher
        do {
            started = try RemoteCommitWatcher(path: url.path, store: identifier, origin: origin, own: historyWriter.own, after: after, handler: handler)
        } catch {
            handler(.unavailable(LoomError(.storeFailure, "Other coordinators' commits to the store at \(url.path) cannot be watched: the watcher's connection could not be opened.", path: url.path, underlying: error)))
            return
        }
        let previous = watcher.withLock { watcher in
            defer { watcher = started }
            return watcher
        }
        previous?.stop()
    }

    @_spi(LoomStore) public func currentHistoryToken() throws(LoomError) -> HistoryToken? {
        if isClosed { throw closedError() }
        do {
            let last = try pool.read { db in
                try Row.fetchOne(db, sql: "SELECT number, timestamp FROM loom_history ORDER BY number DESC LIMIT 1")
            }
            return last.map { HistoryToken(storeIdentifier: identifier, transactionNumber: $0[0], fingerprint: HistoryToken.fingerprint(ofTimestamp: $0[1])) }
        } catch {
            throw translate(error, entity: nil)
        }
    }
}

/// What the store's writer keeps for the history rows it writes: the INSERT, prepared once, and
/// the buffers of a row's values.
///
/// A save of one object spends more on its history row than on the object's own row, so the
/// row's statement is reached directly rather than by its text in GRDB's statement cache; the
/// parameters that never change (which store instance, which process) are bound once, the
/// author and context when they change, and the others anew for every row, so the statement is
/// never cleared; the entity list and the packed changes are written into buffers kept from one
/// save to the next, and bound from them without a copy.
///
/// `@unchecked Sendable`: used only on the writer connection with the store's write scope held.
final class HistoryWriter: @unchecked Sendable {
    static let insertSQL = "INSERT INTO loom_history (timestamp, origin, originCommit, author, context, process, processName, entities, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

    private static let processName = ProcessInfo.processInfo.processName
    private static let processIdentifier = ProcessInfo.processInfo.processIdentifier

    /// The INSERT, once prepared on the writer connection (GRDB finalizes it when it is let go).
    @exclusivity(unchecked) private var insert: Statement?
    @exclusivity(unchecked) private var entities: [UInt8] = []
    @exclusivity(unchecked) private var packed: [UInt8] = []
    /// The author and context bound now (`nil` inside: bound as NULL; `nil`: not bound yet):
    /// a context's saves all have the same, and bound text is copied.
    @exclusivity(unchecked) private var boundAuthor: String??
    @exclusivity(unchecked) private var boundContext: String??

    /// What the store tells its watcher of its commits (see ``OwnCommits``).
    let own = OwnCommits()
    /// The last history row written in the open transaction (`nil`: none yet).
    @exclusivity(unchecked) private var lastNumber: Int64?
    /// The last row written in the open transaction, for change sets that continue its history
    /// transaction.
    @exclusivity(unchecked) private var lastRow: ContinuedHistoryRow?

    /// What a savepoint restores when the change set applied under it fails (``mark``).
    struct Mark {
        fileprivate var lastNumber: Int64?
        fileprivate var lastRow: ContinuedHistoryRow?
    }

    /// The history written so far in the open transaction, for ``restore(_:)``.
    var mark: Mark { Mark(lastNumber: lastNumber, lastRow: lastRow) }

    /// Forgets what was recorded after `mark` (rows written or continued under a savepoint
    /// rolled back are gone with it).
    func restore(_ mark: Mark) {
        lastNumber = mark.lastNumber
        lastRow = mark.lastRow
    }

    /// Adds `changes` to the history transaction of the last row written in the open
    /// transaction; `false` when it wrote none (then `changes` is recorded on its own).
    ///
    /// - Complexity: O(changes): the row itself is written by ``finish(_:)``.
    func continueRow(with changes: StoreChangeSet, schema: Schema) -> Bool {
        guard var row = lastRow else { return false }
        lastRow = nil   // uniquely referenced: the groups grow in place
        row.continue(with: changes, in: schema)
        lastRow = row
        return true
    }

    /// Writes the changes of the change sets that continued the last row over it, once: call
    /// before the `COMMIT` of a transaction that may write history, on the writer.
    func finish(_ db: Database) throws {
        guard let row = lastRow, row.isContinued else { return }
        lastRow = nil
        let merged = row.merged
        try db.execute(sql: "UPDATE loom_history SET entities = ?, changes = ? WHERE number = ?",
                       arguments: [merged.entities, merged.changes, row.number])
    }

    /// The writer connection's data version after the store's last commit (`nil`: unknown).
    @exclusivity(unchecked) private var versionAfterCommit: UInt32?
    /// Whether the open transaction began with nothing committed by another connection since
    /// the store's last commit.
    @exclusivity(unchecked) private var beganInRun = false
    /// The sequence of the first commit of the current run (`nil`: no run).
    @exclusivity(unchecked) private var runStart: UInt64?

    /// Call after every `BEGIN` of a transaction that may write history, on the writer.
    func began(_ db: Database) {
        let version = Self.dataVersion(db)
        beganInRun = runStart != nil && version != nil && version == versionAfterCommit
        lastNumber = nil
        lastRow = nil
    }

    /// Call after the `COMMIT` of a transaction ``began(_:)`` saw begin, with its commit
    /// sequence: publishes it to the watcher if it wrote history.
    func committed(_ db: Database, sequence: UInt64) {
        versionAfterCommit = Self.dataVersion(db)
        if !beganInRun { runStart = nil }
        lastRow = nil
        guard let number = lastNumber else { return }
        lastNumber = nil
        let start = runStart ?? sequence
        runStart = start
        own.publish(OwnCommits.Last(sequence: sequence, number: number, runStart: start))
    }

    /// The connection's data version: it moves with each of its own commits and when a
    /// transaction starts on a database another connection changed.
    private static func dataVersion(_ db: Database) -> UInt32? {
        guard let connection = db.sqliteConnection else { return nil }
        var version: UInt32 = 0
        return sqlite3_file_control(connection, nil, SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK ? version : nil
    }

    /// Writes the history row of `changes`, committed by this store instance (`origin`) as its
    /// commit `commit`, inside the open transaction.
    func write(_ changes: StoreChangeSet, schema: Schema, origin: Int64, commit: UInt64, _ db: Database) throws {
        // The row before it (a batch request's, in an exclusive write) is complete.
        try finish(db)
        let handle = try statement(db, origin: origin)
        SQLHistory.rowValues(of: changes, in: schema, entities: &entities, packed: &packed)
        let statement = RawStatement(handle: handle, sql: Self.insertSQL)
        try check(sqlite3_bind_double(handle, 1, Date().timeIntervalSince1970), statement)
        // Which of this instance's commits it is: its own watcher skips the row, and orders
        // other instances' commits between its own.
        try check(sqlite3_bind_int64(handle, 3, Int64(commit)), statement)
        if boundAuthor != .some(changes.author) {
            boundAuthor = nil
            try statement.bind(changes.author.map(StoredValue.text) ?? .null, at: 4)
            boundAuthor = .some(changes.author)
        }
        if boundContext != .some(changes.contextName) {
            boundContext = nil
            try statement.bind(changes.contextName.map(StoredValue.text) ?? .null, at: 5)
            boundContext = .some(changes.contextName)
        }
        try entities.withUnsafeBufferPointer { entities in
            try packed.withUnsafeBufferPointer { packed in
                // Bound without a copy (SQLITE_STATIC): the buffers stay as they are until the
                // statement is reset, and then the parameters are unbound.
                defer {
                    sqlite3_reset(handle)
                    sqlite3_bind_null(handle, 8)
                    sqlite3_bind_null(handle, 9)
                }
                try check(Self.bindText(entities, at: 8, handle), statement)
                try check(Self.bindBlob(packed, at: 9, handle), statement)
                try statement.execute()
            }
        }
        lastNumber = sqlite3_last_insert_rowid(sqlite3_db_handle(handle))
        lastRow = ContinuedHistoryRow(number: lastNumber!, writtenFrom: changes)
    }

    private static func bindText(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int32, _ handle: OpaquePointer) -> Int32 {
        // An empty buffer may have no address, which SQLite would bind as NULL.
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(handle, index, "", 0, nil) }
        return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
            sqlite3_bind_text64(handle, index, $0, sqlite3_uint64(bytes.count), nil, UInt8(SQLITE_UTF8))
        }
    }

    private static func bindBlob(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int32, _ handle: OpaquePointer) -> Int32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(handle, index, 0) }
        return sqlite3_bind_blob64(handle, index, base, sqlite3_uint64(bytes.count), nil)
    }

    /// The prepared INSERT, with its constant parameters bound.
    private func statement(_ db: Database, origin: Int64) throws -> OpaquePointer {
        if let insert { return insert.sqliteStatement }
        let made = try db.makeStatement(sql: Self.insertSQL)
        let statement = RawStatement(handle: made.sqliteStatement, sql: Self.insertSQL)
        try statement.bind(origin, at: 2)
        try statement.bind(Int64(Self.processIdentifier), at: 6)
        try statement.bind(.text(Self.processName), at: 7)
        insert = made
        return made.sqliteStatement
    }

    private func check(_ code: Int32, _ statement: RawStatement) throws {
        if code != SQLITE_OK { throw statement.error(code) }
    }

    /// Lets the statement go (finalized), before the writer connection closes.
    func close() {
        insert = nil
    }
}
