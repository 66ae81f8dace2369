@_spi(LoomStore) public import LoomCore

extension SQLiteStore {
    /// Runs a values or aggregate query as one SQL statement (see ``AggregateQuery``).
    ///
    /// - Throws: ``LoomError/Code/integerOverflow`` when an integer sum overflows,
    ///   ``LoomError/Code/storeFailure`` when the store cannot be read.
    @_spi(LoomStore) public func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        try sqlAggregate(query)
    }
}
