/// A row a to-many relationship leads to, with the key of the object it belongs to.
@_spi(LoomStore) public struct RelatedRow: Sendable, Equatable {
    /// The key of the object whose relationship holds the row.
    public var owner: Int64
    /// The destination's row.
    public var row: StoreRow

    /// The order stores return related rows in: by owner, then by key.
    public static func storeOrder(_ a: RelatedRow, _ b: RelatedRow) -> Bool { (a.owner, a.row.key) < (b.owner, b.row.key) }

    public init(owner: Int64, row: StoreRow) {
        self.owner = owner
        self.row = row
    }
}
