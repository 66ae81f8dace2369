/// How a save resolves conflicts: rows changed in the store since this context read them
/// (optimistic locking), and uniqueness constraints broken by rows already saved.
///
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump
/// ```
///
/// The by-property policies compare per attribute: an attribute changed both here and in the
/// store takes the winner's value; an attribute changed on one side only keeps that change.
/// (Core Data's documentation has been known to swap the two; these names mean what they say:
/// "object trump" means this context's object wins, "store trump" means the store wins.)
public enum MergePolicy: Sendable {
    /// Fail the save with ``LoomError/Code/versionConflict`` or
    /// ``LoomError/Code/uniquenessViolation`` listing every conflict. The default.
    case error
    /// The store's values win for attributes changed on both sides; for a uniqueness conflict
    /// the saved row wins and the new object is dropped.
    case mergeByPropertyStoreTrump
    /// This context's values win for attributes changed on both sides; for a uniqueness conflict
    /// the new object's values are copied onto the saved row, which keeps its ID, and the new
    /// object is dropped.
    case mergeByPropertyObjectTrump
    /// This context's whole object is written over the stored row; for a uniqueness conflict the
    /// saved row is deleted and the new object kept.
    case overwrite
    /// This context's changes to conflicting objects are discarded in favour of the store.
    case rollback
    /// Your resolver decides, conflict by conflict.
    case custom(@Sendable (MergeConflict) -> MergeConflict.Resolution)
}

/// One conflict found at save, as given to a custom resolver and listed in the save's error.
public struct MergeConflict: Sendable, CustomStringConvertible {
    /// Why the object is in conflict.
    public enum Kind: Sendable, Equatable {
        /// The row changed (or was deleted) in the store since this context read it.
        case optimisticLocking
        /// A uniqueness constraint is broken by a saved row with this ID.
        case uniqueness(constraint: [String], existing: AnyObjectID)
    }

    /// What a custom resolver decides for one conflict.
    public enum Resolution: Sendable {
        case storeTrump, objectTrump, overwrite, rollback
        /// Fail the save with this conflict.
        case fail
    }

    /// Creates a conflict; Loom makes these at save, and custom resolvers receive them.
    public init(kind: Kind, objectID: AnyObjectID, originalSnapshot: [String: StoredValue]?, objectSnapshot: [String: StoredValue],
                cachedSnapshot: [String: StoredValue]?, persistedSnapshot: [String: StoredValue]?) {
        self.kind = kind
        self.objectID = objectID
        self.originalSnapshot = originalSnapshot
        self.objectSnapshot = objectSnapshot
        self.cachedSnapshot = cachedSnapshot
        self.persistedSnapshot = persistedSnapshot
    }

    /// Why the object is in conflict.
    public let kind: Kind
    /// The object in conflict.
    public let objectID: AnyObjectID
    /// The values this context read when it loaded the object (`nil` for a new object).
    public let originalSnapshot: [String: StoredValue]?
    /// The values this context wants to save.
    public let objectSnapshot: [String: StoredValue]
    /// The values in the coordinator's row cache, if it had the row.
    public let cachedSnapshot: [String: StoredValue]?
    /// The values in the store now; `nil` when the row was deleted.
    public let persistedSnapshot: [String: StoredValue]?

    public var description: String {
        switch kind {
        case .optimisticLocking:
            "\(objectID) changed in the store since it was read\(persistedSnapshot == nil ? " (it was deleted)" : "")"
        case .uniqueness(let constraint, let existing):
            "\(objectID) has the same \(constraint.joined(separator: ", ")) as saved \(existing)"
        }
    }
}
