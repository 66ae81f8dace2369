package import Foundation
package import GRDB
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

    private static let processName = ProcessInfo.processInfo.processName
    private static let processIdentifier = ProcessInfo.processInfo.processIdentifier

    /// Records `changes` in the history, inside the transaction that applies them.
    func writeHistory(_ changes: StoreChangeSet, _ db: Database) throws {
        let groups = HistoryChangeGroup.groups(of: changes, in: schema)
        let sql = "INSERT INTO loom_history (timestamp, origin, originCommit, author, context, process, processName, entities, changes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        try RawStatement.with(db, sql) { statement in
            try statement.bind(.real(Date().timeIntervalSince1970), at: 1)
            // Which store instance committed it, and as which of its commits: its own watcher
            // skips it, and orders the others' commits between its own.
            try statement.bind(origin, at: 2)
            try statement.bind(Int64(lastCommitSequence + 1), at: 3)
            try statement.bind(changes.author.map(StoredValue.text) ?? .null, at: 4)
            try statement.bind(changes.contextName.map(StoredValue.text) ?? .null, at: 5)
            try statement.bind(Int64(Self.processIdentifier), at: 6)
            try statement.bind(.text(Self.processName), at: 7)
            try statement.bind(.text(SQLHistory.entityList(groups)), at: 8)
            try statement.bind(.blob(HistoryChangeGroup.encode(groups)), at: 9)
            try statement.execute()
        }
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
        let deleted = try Int64.fetchOne(db, sql: "SELECT CAST(value AS INTEGER) FROM loom_metadata WHERE key = ?", arguments: [Self.historyDeletedKey]) ?? 0
        if descriptor.after != nil, after < deleted {
            let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(number) FROM loom_history WHERE changes IS NOT NULL")
            throw HistoryErrors.expired(descriptor.after!, oldest: oldest.map { HistoryToken(storeIdentifier: store, transactionNumber: $0) })
        }
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

    /// The columns ``historyTransactions(_:sql:arguments:entityNames:store:path:)`` reads, in its order.
    static let historyColumns = SQLHistory.columns

    /// The transactions a query of ``historyColumns`` returns, with only the changes of
    /// `entityNames` (`nil`: all).
    static func historyTransactions(
        _ db: Database, sql: String, arguments: StatementArguments, entityNames: [String]?, store identifier: UUID, path: String
    ) throws -> [HistoryTransaction] {
        let wanted = entityNames.map(Set.init)
        var transactions: [HistoryTransaction] = []
        for row in try Row.fetchAll(db, sql: sql, arguments: arguments) {
            // Every query of history rows asks for `changes IS NOT NULL`.
            transactions.append(try SQLHistory.transaction(
                number: row[0], timestamp: row[1], author: row[2], context: row[3], process: row[4], processName: row[5],
                changes: row[6], entityNames: wanted, store: identifier, location: path))
        }
        return transactions
    }

    /// Deletes in transactions of at most `historyDeleteChunk` history transactions each, so
    /// that saves waiting for the writer never wait long.
    @_spi(LoomStore) public func deleteHistory(through token: HistoryToken) throws(LoomError) {
        if isClosed { throw closedError() }
        if token.storeIdentifier != identifier { throw HistoryErrors.foreign(token, store: identifier) }
        while true {
            writeGate.lock()
            defer { writeGate.unlock() }
            let more: Bool
            do {
                more = try pool.writeWithoutTransaction { db -> Bool in
                    var more = false
                    try db.inTransaction(.immediate) {
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
            } catch {
                throw translate(error, entity: nil)
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
            started = try RemoteCommitWatcher(path: url.path, store: identifier, origin: origin, after: after, handler: handler)
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
            let number = try pool.read { db in
                try Int64.fetchOne(db, sql: "SELECT MAX(number) FROM loom_history")
            }
            return number.map { HistoryToken(storeIdentifier: identifier, transactionNumber: $0) }
        } catch {
            throw translate(error, entity: nil)
        }
    }
}
