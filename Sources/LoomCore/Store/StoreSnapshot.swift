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
