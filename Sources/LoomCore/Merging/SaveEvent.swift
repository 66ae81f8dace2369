import Foundation

/// A committed save, as delivered to the other contexts of the coordinator, with the rows they
/// apply: merging reads nothing from the store.
struct SaveEvent: Sendable {
    /// The store commit that made it (``CommitReceipt/sequence``): increases with every commit
    /// through the coordinator, and saves are delivered in its order.
    var number: UInt64
    /// What the save changed, by ID.
    let changes: ObjectChanges
    /// The rows of the inserted and updated objects, as committed.
    let rows: EventRows
    /// The inbox of the context that saved, which does not merge its own save.
    let origin: ObjectIdentifier
    /// Whether the view context merges this save (the container's `save` helper can opt out).
    let mergesIntoViewContext: Bool
    /// The store's history of other coordinators' commits was deleted before this coordinator
    /// read it: what changed is unknown, so every registered object is refreshed.
    var refreshesEverything = false
}

extension SaveEvent {
    /// A context's save, carrying every row it wrote.
    init(number: UInt64, changes: ObjectChanges, rows: [AnyObjectID: StoreRow], origin: ObjectIdentifier, mergesIntoViewContext: Bool) {
        self.init(number: number, changes: changes, rows: .all(rows), origin: origin, mergesIntoViewContext: mergesIntoViewContext)
    }
}
