extension StoreReading {
    /// ``fetch(_:)`` with every row whole: the default for stores that cannot skip values.
    @_spi(LoomStore) public func fetch(_ query: StoreQuery, skippingValuesOf isKnown: (_ key: Int64, _ version: Int64) -> Bool) throws(LoomError) -> [StoreRow] {
        try fetch(query)
    }

    /// The row of ``rows(of:keys:)`` for one key: the default for stores without a lookup of
    /// their own.
    @_spi(LoomStore) public func row(of entity: EntityDescription, key: Int64) throws(LoomError) -> StoreRow? {
        try rows(of: entity, keys: [key]).first
    }

    /// The keys of ``fetch(_:)``'s rows: the default for stores that cannot read keys alone.
    @_spi(LoomStore) public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        try fetch(query).map(\.key)
    }
}
