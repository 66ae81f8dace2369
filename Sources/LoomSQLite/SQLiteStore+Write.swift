import Foundation
@_spi(LoomStore) public import LoomCore
import LoomSQL
import GRDB

/// Writing: change sets, write transactions and key reservations, on the writer connection
/// under the ``writeScope``.
extension SQLiteStore {
    /// Throws when the store was opened read-only (``Options/isReadOnly``): a write is refused
    /// by name before it reaches SQLite, whose refusal would not say why.
    func refuseIfReadOnly() throws(LoomError) {
        guard isReadOnly else { return }
        if isClosed { throw closedError() }
        throw LoomError(.invalidRequest, "The store at \(url.path) was opened read-only; open it read-write to save, reserve keys or delete history.", path: url.path)
    }

    /// Runs `body` on the writer connection, with errors translated.
    private func onWriter<T>(_ body: (Database) throws -> T) throws(LoomError) -> T {
        do {
            return try pool.writeWithoutTransaction(body)
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: nil)
        }
    }

    @_spi(LoomStore) public func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) {
        try refuseIfReadOnly()
        return try writeScope.transaction(
            begin: {
                try onWriter { db in
                    try Self.control(db, "BEGIN IMMEDIATE TRANSACTION")
                    if recordsHistory { historyWriter.began(db) }
                }
            },
            body,
            commit: {
                try onWriter { db in
                    // A transaction of several change sets (a batch request's chunks) writes the
                    // history its last row continued now, once. `apply` alone applies one.
                    if recordsHistory { try historyWriter.finish(db) }
                    try Self.control(db, "COMMIT TRANSACTION")
                    if recordsHistory { historyWriter.committed(db, sequence: lastCommitSequence + 1) }
                    walBound?.restartIfLarge(db)
                }
            },
            rollBack: rollBack)
    }

    /// Ends the open transaction without writing it. Only on a path that already throws the
    /// error that made it fail: if the rollback fails too, SQLite has rolled back already (a
    /// failed COMMIT or an I/O error ends the transaction) or the connection is gone.
    private func rollBack() {
        _ = try? pool.writeWithoutTransaction { db in
            if db.isInsideTransaction { try db.execute(sql: "ROLLBACK TRANSACTION") }
        }
    }

    @discardableResult
    @_spi(LoomStore) public func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt {
        try refuseIfReadOnly()
        return try writeScope.write { () throws(LoomError) -> CommitReceipt in
            if writeScope.isHeldByCurrentThread {
                // Inside the caller's transaction: atomic on its own, committed with it.
                try applyInSavepoint(changes)
                return writeScope.receiptOfOpenTransaction
            }
            // Alone: one writer access that begins, applies and commits. Without a savepoint: in
            // WAL mode SQLite copies every existing page a savepoint's statements change into a
            // sub-journal, a large part of a save's cost. A refusal rolls back and applies again
            // under one, so that its conflicts are read in the transaction that refused it.
            return try writeScope.asOwner { () throws(LoomError) -> CommitReceipt in
                if try applyAlone(changes, underSavepoint: false) == nil { return writeScope.commit() }
                guard var refused = try applyAlone(changes, underSavepoint: true) else { return writeScope.commit() }
                defer { rollBack() }
                refused.storeConflicts = try changes.conflicts(in: self)
                throw refused
            }
        }
    }

    /// Begins a transaction, applies `changes` and commits, or returns the refusal (a version
    /// conflict or a uniqueness violation) that stopped it. Under a savepoint, a refusal leaves
    /// the transaction open with none of the changes in it, for the conflicts to be read; without
    /// one, it rolls the transaction back. Any other failure rolls back and throws.
    private func applyAlone(_ changes: StoreChangeSet, underSavepoint: Bool) throws(LoomError) -> LoomError? {
        try onWriter { db in
            try Self.control(db, "BEGIN IMMEDIATE TRANSACTION")
            if recordsHistory { historyWriter.began(db) }
            do {
                if underSavepoint {
                    try applyUnderSavepoint(changes, db)
                } else {
                    try applyStatements(changes, db)
                }
                try Self.control(db, "COMMIT TRANSACTION")
                if recordsHistory { historyWriter.committed(db, sequence: lastCommitSequence + 1) }
                walBound?.restartIfLarge(db)
                return nil
            } catch let error as LoomError where error.code == .versionConflict || error.code == .uniquenessViolation {
                if !underSavepoint { try Self.control(db, "ROLLBACK TRANSACTION") }
                return error
            } catch {
                if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK TRANSACTION") }
                throw error
            }
        }
    }

    /// Applies a change set inside the open transaction, under a savepoint: on failure nothing
    /// of it remains, and a refusal carries the conflicts read inside the transaction.
    private func applyInSavepoint(_ changes: StoreChangeSet) throws(LoomError) {
        do {
            try onWriter { db in try applyUnderSavepoint(changes, db) }
        } catch where error.code == .versionConflict || error.code == .uniquenessViolation {
            var refused = error
            refused.storeConflicts = try changes.conflicts(in: self)
            throw refused
        }
    }

    /// Runs the statements of a change set in the open transaction, under a savepoint: if one
    /// fails, none of them has any effect and the transaction stays open (a refusal's conflicts
    /// are read in it).
    private func applyUnderSavepoint(_ changes: StoreChangeSet, _ db: Database) throws {
        try Self.control(db, "SAVEPOINT loom_apply")
        let history = historyWriter.mark
        do {
            try applyStatements(changes, db)
            try Self.control(db, "RELEASE SAVEPOINT loom_apply")
        } catch {
            // A history row written or continued under the savepoint is gone with it.
            historyWriter.restore(history)
            // An I/O error or a full disk can make SQLite roll the whole transaction back by
            // itself: the savepoint went with it, and that error is the one to report.
            guard db.isInsideTransaction else { throw error }
            // If the statements' effects cannot be undone, that failure is what the caller gets:
            // it ends the whole transaction instead of reading conflicts from a half-applied one.
            try Self.control(db, "ROLLBACK TO SAVEPOINT loom_apply")
            try Self.control(db, "RELEASE SAVEPOINT loom_apply")
            throw error
        }
    }

    /// Runs a transaction-control statement from GRDB's statement cache: preparing BEGIN,
    /// SAVEPOINT, RELEASE and COMMIT again for every save was a large part of a one-object
    /// save's time.
    private static func control(_ db: Database, _ sql: String) throws {
        try db.cachedStatement(sql: sql).execute()
    }

    /// Runs the statements of a change set on the writer connection, in the caller's
    /// transaction, in the order and shapes `LoomSQL` plans for every SQL store.
    private func applyStatements(_ changes: StoreChangeSet, _ db: Database) throws {
        // Consecutive statements of one text (a batch's thousands of DELETEs) reuse the
        // prepared statement without looking the text up in GRDB's cache again.
        var last: (sql: String, handle: OpaquePointer)?
        try sql.forEachStatement(of: changes) { (planned) throws in
            let handle: OpaquePointer
            if let last, last.sql == planned.sql {
                handle = last.handle
            } else {
                handle = try db.cachedStatement(sql: planned.sql).sqliteStatement
                last = (planned.sql, handle)
            }
            try RawStatement.with(handle, planned.sql) { statement in
                switch planned.step {
                case .delete(let i):
                    let delete = changes.deletes[i]
                    try statement.bind(delete.key, at: 1)
                    try statement.bind(delete.expectedVersion, at: 2)
                    try statement.execute()
                case .deleteLinks(let i):
                    try statement.bind(changes.deletes[i].key, at: 1)
                    try statement.execute()
                case .deleteKeys(let range), .deleteLinksOfKeys(let range):
                    for j in 0..<SQLGenerator.keysPerDelete {
                        try statement.bind(changes.deletes[min(range.lowerBound + j, range.upperBound - 1)].key, at: Int32(j + 1))
                    }
                    try statement.execute()
                case .update(let i):
                    let update = changes.updates[i]
                    do {
                        try statement.bindWritten(update.changes.lazy.map(\.value))
                    } catch let nan as RawStatement.NotANumber {
                        throw nan.refusal(update.entity, slot: update.changes[nan.offset].index, key: update.key, store: identifier)
                    }
                    let next = Int32(update.changes.count) + 1
                    try statement.bind(update.key, at: next)
                    try statement.bind(update.expectedVersion, at: next + 1)
                    do {
                        try statement.execute()
                    } catch {
                        throw translate(error, entity: update.entity, key: update.key)
                    }
                case .insert(let rows):
                    for insert in changes.inserts[rows] {
                        statement.reset()
                        try statement.bind(insert.key, at: 1)
                        do {
                            try statement.bindWritten(insert.values, from: 2)
                        } catch let nan as RawStatement.NotANumber {
                            throw nan.refusal(insert.entity, slot: nan.offset, key: insert.key, store: identifier)
                        }
                        do {
                            try statement.execute()
                        } catch {
                            throw translate(error, entity: insert.entity, key: insert.key)
                        }
                    }
                case .deleteLink(let i):
                    try statement.bind(changes.linkDeletes[i].source, at: 1)
                    try statement.bind(changes.linkDeletes[i].target, at: 2)
                    try statement.execute()
                case .insertLink(let i):
                    try statement.bind(changes.linkInserts[i].source, at: 1)
                    try statement.bind(changes.linkInserts[i].target, at: 2)
                    try statement.execute()
                }
            }
            if let row = planned.step.rowThatMustChange(in: changes), db.changesCount != 1 {
                throw conflict(row.entity, row.key)
            }
            if let count = planned.step.rowsThatMustChange, db.changesCount != count, case .deleteKeys(let range) = planned.step {
                // Which rows are gone is read after the rollback (the refusal's conflicts).
                let entity = changes.deletes[range.lowerBound].entity
                throw LoomError(.versionConflict, "\(count - db.changesCount) of \(count) \(entity.name) rows were deleted in the store since they were read.", entity: entity.name)
            }
        }
        if recordsHistory, !changes.isEmpty { try writeHistory(changes, db) }
    }

    private func conflict(_ entity: EntityDescription, _ key: Int64) -> LoomError {
        LoomError(.versionConflict, "\(entity.name)/\(key) was changed or deleted in the store since it was read.", entity: entity.name,
                  objectID: AnyObjectID(storeIdentifier: identifier, entityName: entity.name, primaryKey: key))
    }

    /// Reserves `count` keys with one statement (an upsert that returns the new next key), so
    /// that a reservation made in the background shows up in a statement trace as one write,
    /// never as a read. Every entity of a hierarchy reserves from its root's row: a key is
    /// unique within a hierarchy.
    @_spi(LoomStore) public func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> {
        try refuseIfReadOnly()
        return try writeScope.write { () throws(LoomError) -> Range<Int64> in
            do {
                // One statement: atomic by itself, inside the caller's write transaction or alone
                // (then it takes the write lock at once, so another process's reservation waits).
                return try pool.writeWithoutTransaction { db in
                    let end = try Int64.fetchOne(
                        db, sql: "INSERT INTO loom_keys (entity, next) VALUES (?, 1 + ?) ON CONFLICT(entity) DO UPDATE SET next = next + ? RETURNING next",
                        arguments: [entity.rootEntity.name, count, count]) ?? (1 + Int64(count))
                    return (end - Int64(count))..<end
                }
            } catch {
                throw translate(error, entity: entity)
            }
        }
    }
}
