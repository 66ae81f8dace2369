/// What to fetch: an entity, an optional filter, an order, and a window.
///
/// The predicate and sort keys may reach related objects (``PredicateNode/toOne(_:_:)`` and
/// its siblings, ``SortKey/relationshipPath``); a store resolves the relationships they name
/// through its ``PersistentStore/schema``.
@_spi(LoomStore) public struct StoreQuery: Sendable {
    /// The entity queried, the filter (all rows when `nil`), the order, and the window.
    public var entity: EntityDescription
    public var predicate: PredicateNode?
    public var sortKeys: [SortKey]
    public var fetchOffset: Int
    public var fetchLimit: Int?

    public init(entity: EntityDescription, predicate: PredicateNode? = nil, sortKeys: [SortKey] = [], fetchOffset: Int = 0, fetchLimit: Int? = nil) {
        self.entity = entity
        self.predicate = predicate
        self.sortKeys = sortKeys
        self.fetchOffset = fetchOffset
        self.fetchLimit = fetchLimit
    }
}
