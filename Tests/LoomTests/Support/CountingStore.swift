import Foundation
import Loom
@_spi(LoomStore) import LoomCore

/// A store that forwards to another and counts the reads it is asked for: how many calls of
/// each kind (``counts``), and how many rows its fetches returned (``rowsFetched``). It can
/// also fail the next reads (``failNextReads(_:)``), as a store whose disk failed would.
///
/// `@unchecked Sendable`: `state`, `fetchedRowCount` and `readsToFail` are only read or
/// written while `lock` is held; `base` is `Sendable`.
final class CountingStore: PersistentStore, @unchecked Sendable {
    struct Counts: Equatable, Sendable {
        var fetchKeys = 0
        var rows = 0
        var fetch = 0
    }

    let base: any PersistentStore
    private let lock = NSLock()
    private var state = Counts()
    private var fetchedRowCount = 0
    private var readsToFail = 0

    init(_ base: any PersistentStore) { self.base = base }

    var counts: Counts { lock.withLock { state } }
    /// The rows every `fetch` returned, added up.
    var rowsFetched: Int { lock.withLock { fetchedRowCount } }
    func reset() { lock.withLock { state = Counts(); fetchedRowCount = 0 } }

    /// Makes the next `count` reads (fetches, key fetches, row loads, relationship loads and
    /// counts) throw ``readFailure`` instead of reaching the store.
    func failNextReads(_ count: Int) { lock.withLock { readsToFail = count } }

    /// The error a failed read throws.
    static let readFailure = LoomError(.storeFailure, "The test store failed this read on purpose.")

    private func failIfArmed() throws(LoomError) {
        let fails = lock.withLock {
            guard readsToFail > 0 else { return false }
            readsToFail -= 1
            return true
        }
        if fails { throw Self.readFailure }
    }

    var identifier: UUID { base.identifier }
    var schema: Schema { base.schema }

    func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] {
        try failIfArmed()
        let rows = try base.fetch(query)
        lock.withLock { state.fetch += 1; fetchedRowCount += rows.count }
        return rows
    }
    func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        try failIfArmed()
        lock.withLock { state.fetchKeys += 1 }
        return try base.fetchKeys(query)
    }
    func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] {
        try failIfArmed()
        lock.withLock { state.rows += 1 }
        return try base.rows(of: entity, keys: keys)
    }
    func count(_ query: StoreQuery) throws(LoomError) -> Int {
        try failIfArmed()
        return try base.count(query)
    }
    func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        try failIfArmed()
        return try base.fetchRelated(relationship, keys: keys)
    }
    func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] { try base.aggregate(query) }
    func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt { try base.apply(changes) }
    func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) { try base.withWriteTransaction(body) }
    var lastCommitSequence: UInt64 { base.lastCommitSequence }
    var writeScope: WriteScope { base.writeScope }
    func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> { try base.allocateKeys(for: entity, count: count) }
    func close() throws(LoomError) { try base.close() }
}

extension StoreKind {
    /// A fresh container of the test models (or of `types`) whose store counts what it is
    /// asked, over a store of this kind (its SQL traced into `log`, if given).
    func makeCountingContainer(log: StatementLog? = nil, types: [any PersistentModel.Type] = [Book.self, Shelf.self, Sample.self, Tally.self]) throws -> (PersistentContainer, CountingStore) {
        let schema = try Schema(types)
        let base: any PersistentStore = switch self {
        case .inMemory: InMemoryStore(schema: schema)
        case .sqlite: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "test.loom"), schema: schema, options: .init(trace: log?.hook))
        case .postgres: try PostgresServer.makeStore(schema, trace: log?.hook)
        }
        let store = CountingStore(base)
        return (PersistentContainer(store: store), store)
    }
}
