/// What a load run was told it wrote: every card a server acknowledged (201) with the title and
/// details it was given, every change acknowledged (200), and the increments of the counter.
///
/// A write that got no answer, or a 5xx, may or may not have been applied: its value is kept as
/// possible, not as acknowledged, so that the check after the run accepts either outcome and
/// still catches a lost acknowledged write. A value: use it from any isolation.
public struct LoadLedger: Sendable {
    /// A card the run made or was given to change.
    public struct Card: Sendable, Equatable {
        public var id: Int64
        public var board: Int64
        public var title: String
        /// The last details a server acknowledged.
        public var details: String
        /// Details sent after the last acknowledged ones whose outcome is unknown.
        public var possibleDetails: Set<String> = []
    }

    /// The boards the run made, by ID.
    public var boards: [Int64] = []
    /// The cards the run made, by ID.
    public var cards: [Int64: Card] = [:]
    /// The counter card every increment changes.
    public var counter: Int64 = 0
    /// Increments a server acknowledged (200).
    public var acknowledgedIncrements = 0
    /// Increments whose outcome is unknown (no answer, or a 5xx).
    public var unknownIncrements = 0

    /// Adds `other`'s cards and increments (another worker's).
    mutating func merge(_ other: LoadLedger) {
        cards.merge(other.cards) { $1 }
        acknowledgedIncrements += other.acknowledgedIncrements
        unknownIncrements += other.unknownIncrements
    }
}
