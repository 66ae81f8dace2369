/// What every store can read: rows for a query, by key, through a to-many relationship,
/// counts, keys and aggregates.
///
/// A store's reads see its committed data; on the thread that holds the store's write
/// transaction (`PersistentStore/withWriteTransaction(_:)`) they see that transaction's writes too.
///
/// The protocol is public, not SPI, only because ``PersistentStore``, which apps name, refines
/// it; every requirement but ``schema`` is store SPI (`@_spi(LoomStore) import LoomCore`).
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
