import Foundation
@_spi(LoomStore) public import LoomCore
import GRDB

/// A SQLite store's committed data at one moment: one read-only connection of its own, inside
/// a read transaction begun when the snapshot was taken. WAL mode lets that transaction read
/// the file as it was at its start, whatever commits after; meanwhile the WAL cannot be
/// checkpointed past it (``retainedBytes``), which is why a query generation older than its
/// bound is released.
final class SQLiteSnapshot: StoreSnapshot, SQLiteReader, @unchecked Sendable {
    // @unchecked: `connection` is only touched under `lock`; the connection is used by one
    // thread at a time (it is opened without SQLite's own mutex).
    let store: SQLiteStore
    private let lock = NSLock()
    private var connection: ReaderConnection?

    var schema: Schema { store.schema }

    init(store: SQLiteStore) throws(LoomError) {
        self.store = store
        try store.checkReadable()
        do {
            // A connection a released generation left (its prepared statements with it), or a new one.
            let connection = try store.snapshots.takeIdle() ?? ReaderConnection(path: store.url.path, tracer: store.readers.tracer)
            _ = try connection.with("BEGIN DEFERRED TRANSACTION") { try $0.step() }
            // A deferred transaction takes its snapshot at its first read: now.
            _ = try connection.with("SELECT COUNT(*) FROM loom_metadata") { try $0.step() }
            self.connection = connection
        } catch {
            throw store.translate(error, entity: nil)
        }
    }

    deinit { close() }

    func checkReadable() throws(LoomError) {
        try store.checkReadable()
    }

    func readStatement<T>(_ sql: String, _ body: (RawStatement) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else {
            throw LoomError(.closed, "This query generation of the store at \(store.url.path) was released; the context reads the next one.", path: store.url.path)
        }
        return try connection.with(sql, body)
    }

    /// The write-ahead log's size: what the store cannot checkpoint while the snapshot lasts.
    var retainedBytes: Int {
        ((try? FileManager.default.attributesOfItem(atPath: store.url.path + "-wal")[.size]) as? Int) ?? 0
    }

    func close() {
        lock.lock()
        let ended = connection
        connection = nil
        lock.unlock()
        guard let ended else { return }
        // Ended cleanly, the connection serves the context's next generation.
        if (try? ended.with("COMMIT TRANSACTION") { try $0.step() }) != nil, !store.isClosed {
            store.snapshots.keepIdle(ended)
        }
    }

    func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] { try sqlFetch(query) { _, _ in false } }
    func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try sqlFetch(query, skippingValuesOf: isKnown)
    }
    func count(_ query: StoreQuery) throws(LoomError) -> Int { try sqlCount(query) }
    func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] { try sqlRows(of: entity, keys: keys) }
    func row(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow? { try sqlRow(of: entity, key: key) }
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        try sqlFetchRelated(relationship, keys: keys)
    }
    func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] { try sqlAggregate(query) }
    func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] { try sqlFetchKeys(query) }
}

extension SQLiteStore {
    /// A snapshot on a connection of its own, holding a read transaction (see
    /// ``SQLiteSnapshot``). Closed with the store.
    @_spi(LoomStore) public func openSnapshot() throws(LoomError) -> any StoreSnapshot {
        let snapshot = try SQLiteSnapshot(store: self)
        snapshots.add(snapshot)
        return snapshot
    }
}

/// The snapshots taken on a store, weakly: a read transaction left open would keep the store's
/// close from checkpointing the WAL into the file, so the store closes those still alive.
final class SnapshotList: @unchecked Sendable {
    // @unchecked: `list`, `idle` and `isClosed` are only touched under `lock`; an idle
    // connection is used by no one until a snapshot takes it.
    private let lock = NSLock()
    private var list: [Weak] = []

    private struct Weak {
        weak var value: SQLiteSnapshot?
    }

    func add(_ snapshot: SQLiteSnapshot) {
        lock.lock()
        defer { lock.unlock() }
        list.removeAll { $0.value == nil }
        list.append(Weak(value: snapshot))
    }

    /// Connections of ended snapshots, kept for the next ones: advancing a generation (on every
    /// merge of a pinned view context) then costs a `BEGIN`, not a connection and its statements.
    private var idle: [ReaderConnection] = []
    private var isClosed = false
    private static let idleLimit = 2

    func takeIdle() -> ReaderConnection? {
        lock.lock()
        defer { lock.unlock() }
        return idle.popLast()
    }

    func keepIdle(_ connection: ReaderConnection) {
        lock.lock()
        defer { lock.unlock() }
        if !isClosed && idle.count < Self.idleLimit { idle.append(connection) }
    }

    func closeAll() {
        lock.lock()
        let open = list.compactMap(\.value)
        list = []
        isClosed = true
        let connections = idle
        idle = []
        lock.unlock()
        for snapshot in open { snapshot.close() }
        withExtendedLifetime(connections) {}   // closed here, outside the lock
    }
}
