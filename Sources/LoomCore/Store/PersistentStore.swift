public import Foundation

/// The contract between Loom's coordinator and a storage engine: everything a store must do,
/// and nothing about objects or contexts.
///
/// Loom ships `SQLiteStore` (module LoomSQLite) and ``InMemoryStore``; the in-memory store is
/// written against this protocol only, which keeps the protocol honest. All methods may be
/// called from any thread; a store serializes what it must. One coordinator owns a store
/// instance: it is the only caller of `apply(_:)` and `withWriteTransaction(_:)`, so that
/// the commit sequence it reads in `CommitReceipt` has no gaps.
public protocol PersistentStore: StoreReading, Sendable {
    /// A UUID that identifies this store for good; object IDs carry it.
    var identifier: UUID { get }

    /// Applies a change set atomically: all of it, or nothing and an error. Returns the commit's
    /// receipt.
    ///
    /// Deleting an object also deletes its join-table rows. Updates and deletes name the
    /// version they expect; a row whose version differs (or that is gone) fails the whole change
    /// set with ``LoomError/Code/versionConflict``. A uniqueness constraint violation fails it
    /// with ``LoomError/Code/uniquenessViolation`` naming the entity and attributes. Either error
    /// carries, in ``LoomError/storeConflicts``, every conflict of the change set, read inside
    /// the failed write (so nothing could change between the failure and that read).
    ///
    /// Called on the thread that holds this store's write transaction, the change set is applied
    /// inside that transaction (atomically on its own: a failure undoes only this change set),
    /// becomes visible to other connections when the transaction commits, and the receipt names
    /// that commit.
    @discardableResult
    @_spi(LoomStore) func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt

    /// Runs `body` inside one write transaction (SQLite's `BEGIN IMMEDIATE`) and commits it:
    /// from the start of `body` to the commit, no other writer (another coordinator, another
    /// process) can commit, and every call of this store made on the calling thread — reads,
    /// ``apply(_:)``, ``allocateKeys(for:count:)`` — runs inside the transaction and sees its
    /// writes. Other threads keep reading the last committed data; their writes wait.
    ///
    /// If `body` throws, the transaction is rolled back and the error rethrown unchanged.
    /// Returns `body`'s value and the commit's receipt.
    @_spi(LoomStore) func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt)

    /// The sequence number of the last commit made through this store instance (0 before the
    /// first): see ``CommitReceipt/sequence``. By default, its ``writeScope``'s.
    @_spi(LoomStore) var lastCommitSequence: UInt64 { get }

    /// Who holds this store's write, and its commits' numbers: every write goes through it, and
    /// the coordinator asks it whether the calling thread holds the write (see ``WriteScope``).
    @_spi(LoomStore) var writeScope: WriteScope { get }

    /// Reserves `count` primary keys for an entity, never to be handed out again.
    @_spi(LoomStore) func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64>
    /// Finishes pending work and releases the store's resources. Further calls throw.
    @_spi(LoomStore) func close() throws(LoomError)

    /// The transactions `descriptor` selects, oldest first (see ``HistoryDescriptor``).
    /// Throws ``LoomError/Code/historyTokenExpired`` when `after` names purged history,
    /// ``LoomError/Code/historyTokenForeignStore`` when it belongs to another store,
    /// ``LoomError/Code/historyTokenAhead`` or ``LoomError/Code/historyTokenMismatch`` when the
    /// store does not hold its transaction (see
    /// ``HistoryErrors/checkPosition(_:lastNumber:deletedThrough:recordedTimestamp:forDeletion:oldestKept:)``).
    @_spi(LoomStore) func fetchHistory(_ descriptor: HistoryDescriptor) throws(LoomError) -> [HistoryTransaction]
    /// Deletes the history up to and including `token`'s transaction; refuses, as
    /// ``fetchHistory(_:)`` does, a token whose transaction the store does not hold.
    @_spi(LoomStore) func deleteHistory(through token: HistoryToken) throws(LoomError)
    /// The token of the last committed transaction (`nil` when there is none yet, or the store
    /// keeps no history).
    @_spi(LoomStore) func currentHistoryToken() throws(LoomError) -> HistoryToken?

    /// Starts telling `handler` (on a thread of the store's) about the commits other store
    /// instances make on the same storage (another coordinator, another process), in commit
    /// order, each once, from the first commit after this call. Called once, by the coordinator
    /// that owns the store; ``close()`` stops it. A store without history (or without other
    /// writers) never calls `handler`.
    @_spi(LoomStore) func observeRemoteCommits(_ handler: @escaping @Sendable (RemoteCommits) -> Void)

    /// Takes a snapshot of the committed data as it is now, for a context pinned to a query
    /// generation. A store that cannot keep one throws ``LoomError/Code/queryGenerationUnavailable``
    /// (the default).
    @_spi(LoomStore) func openSnapshot() throws(LoomError) -> any StoreSnapshot
}

/// Stores that keep no history (the in-memory store): nothing to fetch or delete.
extension PersistentStore {
    @_spi(LoomStore) public func fetchHistory(_ descriptor: HistoryDescriptor) throws(LoomError) -> [HistoryTransaction] {
        try HistoryErrors.check(descriptor, store: identifier)
        return []
    }
    @_spi(LoomStore) public func deleteHistory(through token: HistoryToken) throws(LoomError) {}
    @_spi(LoomStore) public func currentHistoryToken() throws(LoomError) -> HistoryToken? { nil }
    @_spi(LoomStore) public func observeRemoteCommits(_ handler: @escaping @Sendable (RemoteCommits) -> Void) {}
    @_spi(LoomStore) public func openSnapshot() throws(LoomError) -> any StoreSnapshot {
        throw LoomError(.queryGenerationUnavailable, "A \(type(of: self)) cannot keep a snapshot of its data: contexts on it cannot be pinned to a query generation.")
    }
}
