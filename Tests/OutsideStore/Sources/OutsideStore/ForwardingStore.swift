public import Foundation
@_spi(LoomStore) public import LoomCore

/// A store written outside Loom against the store SPI alone: it keeps its rows in Loom's
/// ``InMemoryStore`` and forwards every requirement to it, so that what it shows is the SPI, not
/// a storage engine. A real store implements the same requirements on its own storage.
///
/// The requirements that take or return store SPI types are themselves SPI
/// (`@_spi(LoomStore) public`), as in Loom's own stores: the store's users never see them.
///
/// Calls come from any thread, as for every store; the wrapped store is thread-safe.
public final class ForwardingStore: PersistentStore {
    private let base: InMemoryStore

    /// A new, empty store for `schema`.
    public init(schema: Schema) {
        base = InMemoryStore(schema: schema)
    }

    public var identifier: UUID { base.identifier }
    public var schema: Schema { base.schema }

    // Reading
    @_spi(LoomStore) public func fetch(_ query: StoreQuery) throws(LoomError) -> [StoreRow] { try base.fetch(query) }
    @_spi(LoomStore) public func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try base.fetch(query, skippingValuesOf: isKnown)
    }
    @_spi(LoomStore) public func count(_ query: StoreQuery) throws(LoomError) -> Int { try base.count(query) }
    @_spi(LoomStore) public func rows(of entity: EntityDescription, keys: [Int64]) throws(LoomError) -> [StoreRow] { try base.rows(of: entity, keys: keys) }
    @_spi(LoomStore) public func row(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow? { try base.row(of: entity, key: key) }
    @_spi(LoomStore) public func fetchRelated(_ relationship: ResolvedRelationship, keys: [Int64]) throws(LoomError) -> [RelatedRow] {
        try base.fetchRelated(relationship, keys: keys)
    }
    @_spi(LoomStore) public func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] { try base.aggregate(query) }
    @_spi(LoomStore) public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] { try base.fetchKeys(query) }
    @_spi(LoomStore) public func openSnapshot() throws(LoomError) -> any StoreSnapshot { try base.openSnapshot() }

    // Writing
    @_spi(LoomStore) public func apply(_ changes: StoreChangeSet) throws(LoomError) -> CommitReceipt { try base.apply(changes) }
    @_spi(LoomStore) public func withWriteTransaction<T>(_ body: () throws -> T) throws -> (value: T, receipt: CommitReceipt) {
        try base.withWriteTransaction(body)
    }
    @_spi(LoomStore) public var lastCommitSequence: UInt64 { base.lastCommitSequence }
    @_spi(LoomStore) public var writeScope: WriteScope { base.writeScope }
    @_spi(LoomStore) public func allocateKeys(for entity: EntityDescription, count: Int) throws(LoomError) -> Range<Int64> {
        try base.allocateKeys(for: entity, count: count)
    }
    @_spi(LoomStore) public func close() throws(LoomError) { try base.close() }
}
