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
