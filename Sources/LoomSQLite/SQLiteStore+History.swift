import Foundation
import GRDB
@_spi(LoomStore) public import LoomCore

/// The store's history: every save writes, in its own transaction, one `loom_history` row (its
/// number, time, author, context and process) and one `loom_history_change` row per group of
/// changes (``HistoryChangeGroup``: entity, kind, changed properties, the objects' keys packed),
/// so a save of 100,000 objects adds a handful of rows. Numbers come from `AUTOINCREMENT`: never
/// reused, also after history is deleted.
extension SQLiteStore {
    /// The history tables, for a new store and for a store made before Loom kept history.
    static let historyStatements = [
        """
        CREATE TABLE IF NOT EXISTS loom_history (number INTEGER PRIMARY KEY AUTOINCREMENT, timestamp REAL NOT NULL, \
        author TEXT, context TEXT, process INTEGER NOT NULL, processName TEXT NOT NULL)
        """,
        "CREATE TABLE IF NOT EXISTS loom_history_change (number INTEGER NOT NULL, entity TEXT NOT NULL, kind INTEGER NOT NULL, properties TEXT NOT NULL, keys BLOB NOT NULL)",
        "CREATE INDEX IF NOT EXISTS loom_history_change_number ON loom_history_change (number)",
    ]

    /// The metadata key of the last transaction number deleted from the history.
    static let historyDeletedKey = "historyDeletedThrough"

    private static let processName = ProcessInfo.processInfo.processName
    private static let processIdentifier = ProcessInfo.processInfo.processIdentifier

    /// Records `changes` in the history, inside the transaction that applies them.
    func writeHistory(_ changes: StoreChangeSet, _ db: Database) throws {
        try RawStatement.with(db, "INSERT INTO loom_history (timestamp, author, context, process, processName) VALUES (?, ?, ?, ?, ?)") { statement in
            try statement.bind(.real(Date().timeIntervalSince1970), at: 1)
            try statement.bind(changes.author.map(StoredValue.text) ?? .null, at: 2)
            try statement.bind(changes.contextName.map(StoredValue.text) ?? .null, at: 3)
            try statement.bind(Int64(Self.processIdentifier), at: 4)
            try statement.bind(.text(Self.processName), at: 5)
            try statement.execute()
        }
        let number = db.lastInsertedRowID
        try RawStatement.with(db, "INSERT INTO loom_history_change (number, entity, kind, properties, keys) VALUES (?, ?, ?, ?, ?)") { statement in
            for group in HistoryChangeGroup.groups(of: changes, in: schema) {
                statement.reset()
                try statement.bind(number, at: 1)
                try statement.bind(.text(group.entityName), at: 2)
                try statement.bind(Int64(group.kind.rawValue), at: 3)
                try statement.bind(.text(group.properties), at: 4)
                try statement.bind(.blob(HistoryChangeGroup.pack(group.keys)), at: 5)
                try statement.execute()
            }
        }
    }

    @_spi(LoomStore) public func fetchHistory(_ descriptor: HistoryDescriptor) throws(LoomError) -> [HistoryTransaction] {
        if isClosed { throw closedError() }
        if let after = descriptor.after, after.storeIdentifier != identifier { throw HistoryErrors.foreign(after, store: identifier) }
        if let limit = descriptor.fetchLimit, limit < 0 {
            throw LoomError(.invalidRequest, "A history fetch limit cannot be negative (it is \(limit)).")
        }
        do {
            return try pool.read { db -> [HistoryTransaction] in
                let after = descriptor.after?.transactionNumber ?? 0
                let deleted = try Int64.fetchOne(db, sql: "SELECT CAST(value AS INTEGER) FROM loom_metadata WHERE key = ?", arguments: [Self.historyDeletedKey]) ?? 0
                if descriptor.after != nil, after < deleted {
                    let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(number) FROM loom_history")
                    throw HistoryErrors.expired(descriptor.after!, oldest: oldest.map { HistoryToken(storeIdentifier: identifier, transactionNumber: $0) })
                }
                var sql = "SELECT number, timestamp, author, context, process, processName FROM loom_history WHERE number > ?"
                var arguments: [any DatabaseValueConvertible] = [after]
                if let authors = descriptor.authors {
                    sql += " AND author IN (\(authors.map { _ in "?" }.joined(separator: ", ")))"
                    arguments += authors
                }
                if let entities = descriptor.entityNames {
                    sql += " AND number IN (SELECT number FROM loom_history_change WHERE number > ? AND entity IN (\(entities.map { _ in "?" }.joined(separator: ", "))))"
                    arguments.append(after)
                    arguments += entities
                }
                sql += " ORDER BY number"
                if let limit = descriptor.fetchLimit {
                    sql += " LIMIT ?"
                    arguments.append(limit)
                }
                var transactions: [HistoryTransaction] = []
                var position: [Int64: Int] = [:]
                for row in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)!) {
                    let number: Int64 = row[0]
                    position[number] = transactions.count
                    transactions.append(HistoryTransaction(
                        token: HistoryToken(storeIdentifier: identifier, transactionNumber: number),
                        timestamp: Date(timeIntervalSince1970: row[1]), author: row[2], contextName: row[3],
                        processIdentifier: Int32(truncatingIfNeeded: row[4] as Int64), processName: row[5], changes: []))
                }
                guard let first = transactions.first?.token.transactionNumber, let last = transactions.last?.token.transactionNumber else { return [] }
                let wanted = descriptor.entityNames.map(Set.init)
                for row in try Row.fetchAll(db, sql: "SELECT number, entity, kind, properties, keys FROM loom_history_change WHERE number BETWEEN ? AND ? ORDER BY number, rowid", arguments: [first, last]) {
                    let number: Int64 = row[0], entity: String = row[1]
                    guard let i = position[number], wanted?.contains(entity) ?? true else { continue }
                    let properties: String = row[3]
                    let kind: HistoryChange.Kind = switch row[2] as Int {
                    case HistoryChangeGroup.Kind.insert.rawValue: .insert
                    case HistoryChangeGroup.Kind.update.rawValue: .update(updatedProperties: properties.isEmpty ? [] : properties.split(separator: ",").map(String.init))
                    default: .delete
                    }
                    for key in HistoryChangeGroup.unpack(row[4]) {
                        transactions[i].changes.append(HistoryChange(objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity, primaryKey: key), kind: kind))
                    }
                }
                return transactions
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: nil)
        }
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
                        guard let oldest = try Int64.fetchOne(db, sql: "SELECT MIN(number) FROM loom_history"), oldest <= token.transactionNumber else {
                            return .commit
                        }
                        let upTo = min(token.transactionNumber, oldest + Int64(Self.historyDeleteChunk) - 1)
                        try db.execute(sql: "DELETE FROM loom_history_change WHERE number <= ?", arguments: [upTo])
                        try db.execute(sql: "DELETE FROM loom_history WHERE number <= ?", arguments: [upTo])
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

    @_spi(LoomStore) public func currentHistoryToken() throws(LoomError) -> HistoryToken? {
        if isClosed { throw closedError() }
        do {
            let number = try pool.read { db in
                try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'loom_history'")
            }
            return number.map { HistoryToken(storeIdentifier: identifier, transactionNumber: $0) }
        } catch {
            throw translate(error, entity: nil)
        }
    }
}
