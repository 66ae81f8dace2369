/// The rows a context's save wrote, kept by its `didSave` payload (``ObjectChanges/savedRows``),
/// so that ``ManagedObjectContext/mergeChanges(fromContextDidSave:)`` applies them as automatic
/// merging does, and reads nothing.
///
/// Immutable, so `Sendable`: the payload crosses isolations by value and shares this one box.
final class SavedRows: Sendable {
    /// The rows of every object the save inserted or updated, by ID (an owner whose only change
    /// was a to-many list has none: its row did not change).
    let rows: [AnyObjectID: StoreRow]
    /// The IDs the save reported, to tell whether the payload still says what the save did.
    private let inserted: Set<AnyObjectID>
    private let updated: Set<AnyObjectID>

    init(_ rows: [AnyObjectID: StoreRow], for changes: ObjectChanges) {
        self.rows = rows
        self.inserted = changes.inserted
        self.updated = changes.updated
    }

    /// Whether these rows are those of every object `changes` inserted and updated: not when the
    /// payload was edited after the save (IDs added, or two payloads joined), whose other rows
    /// are then read as for a payload built by hand.
    func cover(_ changes: ObjectChanges) -> Bool {
        changes.inserted == inserted && changes.updated == updated
    }
}
