public import Foundation

/// What every store can read: rows for a query, by key, through a to-many relationship,
/// counts, keys and aggregates.
///
/// A store's reads see its committed data; on the thread that holds the store's write
/// transaction (`PersistentStore/withWriteTransaction(_:)`) they see that transaction's writes too.
public protocol StoreReading: AnyObject {
    /// The schema the store was opened with.
    var schema: Schema { get }

    /// Rows matching a query, with predicate, sort, offset and limit applied.
    @_spi(LoomStore) func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow]
    /// ``fetch(_:)``, leaving out the values of rows the caller already has: for each row,
    /// `isKnown(key, version)` is asked, on the calling thread, before its values are read; a row
    /// it accepts comes back with empty `values`. How a context's second fetch of the same
    /// objects avoids decoding rows it would throw away. A default implementation reads every
    /// row whole (which is always correct).
    @_spi(LoomStore) func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow]
    /// The number of rows a query matches (offset and limit applied).
    @_spi(LoomStore) func count(_ query: StoreQuery) throws(LoomError) -> Int
    /// The rows with these primary keys; missing keys are simply absent from the result.
    @_spi(LoomStore) func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow]
    /// The row with this primary key, if it exists: an ID lookup. A default implementation
    /// takes it from ``rows(of:keys:)``; a store can spare the two arrays that makes.
    @_spi(LoomStore) func row(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow?
    /// The rows that a to-many relationship of each object in `keys` leads to, with the key of
    /// the object they belong to, ordered by owner then key: one query whatever the number of
    /// keys. This is how a to-many fault fires and how a fetch prefetches a relationship.
    @_spi(LoomStore) func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow]
    /// The rows of a values or aggregate query (see ``AggregateQuery``), each one value per
    /// column. A default implementation computes it in memory from ``fetch(_:)``.
    @_spi(LoomStore) func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]]
    /// The primary keys of the rows a query matches, in order, without their values: how a
    /// batched fetch records its results. A default implementation takes them from ``fetch(_:)``.
    @_spi(LoomStore) func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64]
}

/// A store's committed data as it was at one moment: what a context pinned to a query
/// generation reads (``ManagedObjectContext/setQueryGenerationFrom(_:)``). Every read sees that
/// moment, whatever commits after it. Reads may come from any thread; a snapshot serializes
/// them.
@_spi(LoomStore) public protocol StoreSnapshot: StoreReading, Sendable {
    /// What keeping the snapshot costs the store, in bytes it cannot reclaim meanwhile (SQLite:
    /// the size of the write-ahead log, which cannot be checkpointed past the snapshot); 0 when
    /// it costs nothing. Checked against ``QueryGenerationLimit/maximumRetainedBytes``.
    var retainedBytes: Int { get }
    /// Ends the snapshot and frees what it holds; later reads fail with ``LoomError/Code/closed``.
    /// Idempotent.
    func close()
}

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

/// Commits made by other store instances on the same storage, as a store's watcher finds them.
@_spi(LoomStore) public enum RemoteCommits: Sendable {
    /// Transactions, in commit order, each with the last commit made through this store
    /// instance before it (its ``CommitReceipt/sequence``; 0 if none), so that the coordinator
    /// delivers it after that commit's save.
    case committed([(transaction: HistoryTransaction, afterLocalCommit: UInt64)])
    /// The history after `after` was deleted before the watcher read it: what those commits
    /// changed is unknown. `current` is the last transaction now.
    case historyLost(after: HistoryToken, current: HistoryToken?)
    /// Watching could not start (the history could not be read, or the watcher's connection
    /// could not be opened): no other coordinator's commit will be reported.
    case unavailable(LoomError)
}

/// What a store hands back for a commit.
@_spi(LoomStore) public struct CommitReceipt: Sendable, Hashable {
    /// The commit's place among the commits made through this store instance: 1, 2, 3… in the
    /// order they committed, with no gaps. The coordinator delivers saves to other contexts in
    /// this order. (Persistent history will add a token that is unique across processes.)
    public var sequence: UInt64

    public init(sequence: UInt64) { self.sequence = sequence }
}

/// A conflict a store found when it refused a change set: read inside the failed write, so it
/// describes the store exactly as it was when the change set failed.
@_spi(LoomStore) public struct StoreConflict: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The row was changed (or deleted, `persisted == nil`) since the version the change set expected.
        case version
        /// Another row (`persisted`) has the same values for this uniqueness constraint.
        case uniqueness(constraint: [String])
    }
    public var kind: Kind
    /// The entity and key of the change set's object.
    public var entity: EntityDescription
    public var key: Int64
    /// The row as stored: the changed row, or (for uniqueness) the other row; `nil` when deleted.
    public var persisted: StoreRow?

    public init(kind: Kind, entity: EntityDescription, key: Int64, persisted: StoreRow?) {
        self.kind = kind
        self.entity = entity
        self.key = key
        self.persisted = persisted
    }

    public static func == (a: StoreConflict, b: StoreConflict) -> Bool {
        a.kind == b.kind && a.entity === b.entity && a.key == b.key && a.persisted == b.persisted
    }
}

/// One stored object as a store returns it.
@_spi(LoomStore) public struct StoreRow: Sendable, Equatable {
    /// The primary key.
    public var key: Int64
    /// The optimistic-locking version: 1 after insert, +1 on every saved update.
    public var version: Int64
    /// One value per attribute, in the entity's attribute order.
    public var values: [StoredValue]

    public init(key: Int64, version: Int64, values: [StoredValue]) {
        self.key = key
        self.version = version
        self.values = values
    }
}

/// What to fetch: an entity, an optional filter, an order, and a window.
///
/// The predicate and sort keys may reach related objects (``PredicateNode/toOne(_:_:)`` and
/// its siblings, ``SortKey/relationshipPath``); a store resolves the relationships they name
/// through its ``PersistentStore/schema``.
@_spi(LoomStore) public struct StoreQuery: Sendable {
    /// The entity queried, the filter (all rows when `nil`), the order, and the window.
    public var entity: EntityDescription
    public var predicate: PredicateNode?
    public var sortKeys: [SortKey]
    public var fetchOffset: Int
    public var fetchLimit: Int?

    public init(entity: EntityDescription, predicate: PredicateNode? = nil, sortKeys: [SortKey] = [], fetchOffset: Int = 0, fetchLimit: Int? = nil) {
        self.entity = entity
        self.predicate = predicate
        self.sortKeys = sortKeys
        self.fetchOffset = fetchOffset
        self.fetchLimit = fetchLimit
    }
}

/// One ordering term: an attribute, ascending or descending, of the fetched object or of an
/// object a chain of to-one relationships leads to. Stores break ties by primary key, so every
/// order is total and the same on every store.
@_spi(LoomStore) public struct SortKey: Sendable, Hashable {
    /// The attribute's position in its entity: the fetched entity, or the last relationship's
    /// destination.
    public var attributeIndex: Int
    public var ascending: Bool
    /// The to-one relationships that lead to the attribute's object; empty for the fetched
    /// object's own attribute. An empty relationship sorts as NULL (first when ascending).
    public var relationshipPath: [RelationshipReference]

    public init(attributeIndex: Int, ascending: Bool, relationshipPath: [RelationshipReference] = []) {
        self.attributeIndex = attributeIndex
        self.ascending = ascending
        self.relationshipPath = relationshipPath
    }

    /// The value this key sorts by, as a node of the fetched entity.
    public var valueNode: PredicateNode {
        relationshipPath.reversed().reduce(PredicateNode.attribute(attributeIndex)) { .toOne($1, $0) }
    }

    /// Orders two rows by these keys, then by primary key. For keys without relationship paths.
    static func areInIncreasingOrder(_ keys: [SortKey], _ a: StoreRow, _ b: StoreRow) -> Bool {
        for key in keys {
            let c = StoredValue.compare(a.values[key.attributeIndex], b.values[key.attributeIndex])
            if c != 0 { return key.ascending ? c < 0 : c > 0 }
        }
        return a.key < b.key
    }

    /// Sorts items by these keys, then by primary key, reading each key's value once per item.
    static func sort<G: PredicateGraph, Item>(_ items: inout [Item], by keys: [SortKey], row: (Item) -> G.Row, in graph: G) {
        if keys.isEmpty {
            items.sort { graph.key(of: row($0)) < graph.key(of: row($1)) }
            return
        }
        let nodes = keys.map(\.valueNode)
        var decorated = items.map { item -> (values: [StoredValue], key: Int64, item: Item) in
            let r = row(item)
            return (nodes.map { $0.evaluate(r, in: graph) }, graph.key(of: r), item)
        }
        decorated.sort { a, b in
            for (i, key) in keys.enumerated() {
                let c = StoredValue.compare(a.values[i], b.values[i])
                if c != 0 { return key.ascending ? c < 0 : c > 0 }
            }
            return a.key < b.key
        }
        items = decorated.map(\.item)
    }

    /// Whether any key sorts through a relationship.
    static func usesRelationships(_ keys: [SortKey]) -> Bool {
        keys.contains { !$0.relationshipPath.isEmpty }
    }
}

/// Everything one save writes, applied by a store in one transaction.
@_spi(LoomStore) public struct StoreChangeSet: Sendable {
    /// A new row: every value, in the entity's slot order.
    public struct Insert: Sendable {
        public var entity: EntityDescription
        public var key: Int64
        public var values: [StoredValue]

        public init(entity: EntityDescription, key: Int64, values: [StoredValue]) {
            self.entity = entity
            self.key = key
            self.values = values
        }
    }
    /// Changed values of an existing row, applied only if its version is still `expectedVersion`.
    public struct Update: Sendable {
        public var entity: EntityDescription
        public var key: Int64
        /// The version the saver read; the store refuses the update if it changed.
        public var expectedVersion: Int64
        /// The changed attributes, by position, with their new values.
        public var changes: [(index: Int, value: StoredValue)]

        public init(entity: EntityDescription, key: Int64, expectedVersion: Int64, changes: [(index: Int, value: StoredValue)]) {
            self.entity = entity
            self.key = key
            self.expectedVersion = expectedVersion
            self.changes = changes
        }
    }
    /// A row to delete, only if its version is still `expectedVersion`.
    public struct Delete: Sendable {
        public var entity: EntityDescription
        public var key: Int64
        public var expectedVersion: Int64
        /// The values of the attributes marked `.preserveValueOnDeletion`, by attribute index,
        /// for the history's tombstone.
        public var tombstone: [(index: Int, value: StoredValue)]

        public init(entity: EntityDescription, key: Int64, expectedVersion: Int64, tombstone: [(index: Int, value: StoredValue)] = []) {
            self.entity = entity
            self.key = key
            self.expectedVersion = expectedVersion
            self.tombstone = tombstone
        }
    }

    /// One row of a join table (a many-to-many pair).
    public struct LinkChange: Sendable, Hashable {
        public var table: JoinTable
        /// The key in ``JoinTable/sourceColumn``.
        public var source: Int64
        /// The key in ``JoinTable/targetColumn``.
        public var target: Int64

        public init(table: JoinTable, source: Int64, target: Int64) {
            self.table = table
            self.source = source
            self.target = target
        }
    }

    public var inserts: [Insert] = []
    public var updates: [Update] = []
    public var deletes: [Delete] = []
    /// Join-table rows to add; adding one that exists is not an error.
    public var linkInserts: [LinkChange] = []
    /// Join-table rows to remove; removing one that does not exist is not an error.
    public var linkDeletes: [LinkChange] = []
    /// Objects whose to-many relationships gained or lost objects through keys stored on the
    /// other side (a to-one's foreign key this save writes): no row of theirs changes, but the
    /// store's history records them as updated, with these relationships' names, so that a
    /// coordinator merging the history forgets the lists it loaded.
    public var relationshipOwners: [(entity: EntityDescription, key: Int64, relationships: [String])] = []
    /// Who saved it, for the store's history: the context's ``ManagedObjectContext/transactionAuthor``
    /// and name.
    public var author: String?
    public var contextName: String?
    /// Whether every delete's expected version was read inside the write transaction this set
    /// is applied in (a batch request's reads): no other writer can have changed those rows
    /// since, so a store may delete them by key alone, many to a statement, and check only how
    /// many went. Updates keep their version checks.
    public var versionsReadInTransaction = false
    /// Whether this change set continues the history transaction of the change set applied
    /// just before it in the same write transaction (a batch request's later chunks): a store
    /// that keeps history records both as one transaction
    /// (``HistoryChangeGroup/merging(_:_:)``). When the change set before it recorded nothing in
    /// this write transaction, it is recorded on its own.
    public var continuesHistoryTransaction = false

    public init() {}

    public var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty && linkInserts.isEmpty && linkDeletes.isEmpty }
}

/// A row a to-many relationship leads to, with the key of the object it belongs to.
@_spi(LoomStore) public struct RelatedRow: Sendable, Equatable {
    /// The key of the object whose relationship holds the row.
    public var owner: Int64
    /// The destination's row.
    public var row: StoreRow

    public init(owner: Int64, row: StoreRow) {
        self.owner = owner
        self.row = row
    }
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

/// The history errors every store throws alike.
@_spi(LoomStore) public enum HistoryErrors {
    /// Refuses a history request every store refuses alike: a token of another store, a
    /// negative limit.
    public static func check(_ descriptor: HistoryDescriptor, store: UUID) throws(LoomError) {
        if let after = descriptor.after, after.storeIdentifier != store { throw foreign(after, store: store) }
        if let limit = descriptor.fetchLimit, limit < 0 {
            throw LoomError(.invalidRequest, "A history fetch limit cannot be negative (it is \(limit)).")
        }
    }

    public static func foreign(_ token: HistoryToken, store: UUID) -> LoomError {
        LoomError(
            .historyTokenForeignStore,
            "The history token \(token) belongs to the store \(token.storeIdentifier.uuidString), not to this one (\(store.uuidString)): the store was replaced or the token saved for another. Refresh everything (refreshAllObjects()) and start again from currentHistoryToken().")
    }

    /// Checks where `token` stands in a store's history before the store reads after it
    /// (`forDeletion` false) or deletes through it (true): a negative number is an invalid
    /// request; a number past the store's last transaction (`lastNumber`, `nil` when there is
    /// none), or a transaction the store recorded with another fingerprint (`recordedTimestamp`:
    /// the commit time of the store's transaction with the token's number, `nil` when it was
    /// deleted), means the store is not the one the token was read from (restored from an older
    /// copy); reading after a number the history was deleted through (`deletedThrough`) would
    /// skip changes. `oldestKept` is asked only for that last error.
    public static func checkPosition(
        _ token: HistoryToken, lastNumber: Int64?, deletedThrough: Int64, recordedTimestamp: Double?,
        forDeletion: Bool = false, oldestKept: () throws -> Int64?
    ) throws {
        let number = token.transactionNumber
        if number < 0 {
            throw LoomError(.invalidRequest, "The history token \(token) has a negative transaction number: a store numbers its transactions from 1 (0 is before the first). Use a token the store gave (a transaction's token, or currentHistoryToken()).")
        }
        let last = lastNumber ?? 0
        if number > last { throw ahead(token, last: last) }
        if !forDeletion, number < deletedThrough {
            throw expired(token, oldest: try oldestKept().map { HistoryToken(storeIdentifier: token.storeIdentifier, transactionNumber: $0) })
        }
        if let expected = token.fingerprint, let recordedTimestamp, let recorded = HistoryToken.fingerprint(ofTimestamp: recordedTimestamp), recorded != expected {
            throw mismatch(token)
        }
    }

    /// A token past the store's last transaction (`last`, 0 when there is none).
    public static func ahead(_ token: HistoryToken, last: Int64) -> LoomError {
        LoomError(
            .historyTokenAhead,
            "The history token \(token) names transaction #\(token.transactionNumber), but this store's last transaction is \(last == 0 ? "none (it has no history)" : "#\(last)"): the store was restored from an older copy, or the token was read from another copy of it. The changes the token counts as read are not in this store. Refresh everything (refreshAllObjects()), re-sync what was derived from the store, and start again from currentHistoryToken().")
    }

    /// A token whose transaction number this store gave to another transaction.
    public static func mismatch(_ token: HistoryToken) -> LoomError {
        LoomError(
            .historyTokenMismatch,
            "The history token \(token) names transaction #\(token.transactionNumber), and this store's transaction #\(token.transactionNumber) is another one (its fingerprint differs): the store was restored from an older copy and has committed other transactions since, so the transactions up to the token are not the ones the token counts as read. Refresh everything (refreshAllObjects()), re-sync what was derived from the store, and start again from currentHistoryToken().")
    }

    public static func expired(_ token: HistoryToken, oldest: HistoryToken?) -> LoomError {
        LoomError(
            .historyTokenExpired,
            "The history after \(token) was partly deleted (purged, or ended by a migration to another model version): the oldest transaction kept is \(oldest.map { "#\($0.transactionNumber)" } ?? "none"), so the changes between them are gone. Refresh everything (refreshAllObjects()) and start again from currentHistoryToken().")
    }
}
