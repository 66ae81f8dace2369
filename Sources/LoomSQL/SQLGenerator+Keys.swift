@_spi(LoomStore) package import LoomCore

extension SQLGenerator {
    /// The primary keys a fetch would return, in its order: `select(_:)` without the values.
    package func selectKeys(_ query: StoreQuery) -> (String, [StoredValue]) {
        select(query, resultColumns: "t0.\"Z_PK\"")
    }
}
