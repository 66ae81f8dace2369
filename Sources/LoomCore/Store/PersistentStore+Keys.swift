extension PersistentStore {
    /// The keys of ``fetch(_:)``'s rows: the default for stores that cannot read keys alone.
    public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        try fetch(query).map(\.key)
    }
}
