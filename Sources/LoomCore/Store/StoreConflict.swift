/// A conflict a store found when it refused a change set: read inside the failed write, so it
/// describes the store exactly as it was when the change set failed.
@_spi(LoomStore) public struct StoreConflict: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The row was changed (or deleted, `persisted == nil`) since the version the change set expected.
        case version
        /// Another row (`persisted`) has the same values for this uniqueness constraint.
        case uniqueness(constraint: [String])
    }
    public var kind: Kind
    /// The entity and key of the change set's object.
    public var entity: EntityDescription
    public var key: Int64
    /// The row as stored: the changed row, or (for uniqueness) the other row; `nil` when deleted.
    public var persisted: StoreRow?
    /// The entity of ``persisted``: ``entity``, or for a uniqueness constraint that holds across
    /// a hierarchy, the entity of the other row, which may be another of the hierarchy.
    public var persistedEntity: EntityDescription

    public init(kind: Kind, entity: EntityDescription, key: Int64, persisted: StoreRow?, persistedEntity: EntityDescription? = nil) {
        self.kind = kind
        self.entity = entity
        self.key = key
        self.persisted = persisted
        self.persistedEntity = persistedEntity ?? entity
    }

    public static func == (a: StoreConflict, b: StoreConflict) -> Bool {
        a.kind == b.kind && a.entity === b.entity && a.key == b.key && a.persisted == b.persisted && a.persistedEntity === b.persistedEntity
    }
}
