/// The entities whose rows contexts need from a save: those they register objects of (an
/// updated object's new values) and those their live queries list (an inserted or updated
/// object's row, to place it in the result). Whoever publishes a save reads or builds the rows
/// of these entities only (``EventRows``).
struct MergeInterest: Sendable {
    /// Entities with objects registered in a context.
    var registered: Set<ObjectIdentifier> = []
    /// Entities a live query lists.
    var queried: Set<ObjectIdentifier> = []

    var isEmpty: Bool { registered.isEmpty && queried.isEmpty }

    /// Every entity some row is wanted of.
    var entities: Set<ObjectIdentifier> { registered.union(queried) }

    /// Whether a save's row of an updated object of `entity` is wanted.
    func wantsUpdated(_ entity: ObjectIdentifier) -> Bool {
        registered.contains(entity) || queried.contains(entity)
    }

    /// Whether a save's row of an inserted object of `entity` is wanted.
    func wantsInserted(_ entity: ObjectIdentifier) -> Bool {
        queried.contains(entity)
    }

    mutating func formUnion(_ other: MergeInterest) {
        registered.formUnion(other.registered)
        queried.formUnion(other.queried)
    }
}
