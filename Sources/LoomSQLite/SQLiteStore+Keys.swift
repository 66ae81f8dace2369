@_spi(LoomStore) public import LoomCore

extension SQLiteStore {
    /// The primary keys of the rows a query matches, in order, read without their values.
    @_spi(LoomStore) public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        try sqlFetchKeys(query)
    }
}
