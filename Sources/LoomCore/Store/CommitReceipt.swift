/// What a store hands back for a commit.
@_spi(LoomStore) public struct CommitReceipt: Sendable, Hashable {
    /// The commit's place among the commits made through this store instance: 1, 2, 3… in the
    /// order they committed, with no gaps. The coordinator delivers saves to other contexts in
    /// this order. (Persistent history will add a token that is unique across processes.)
    public var sequence: UInt64

    public init(sequence: UInt64) { self.sequence = sequence }
}
