/// Where a `@Model` object keeps its ``ObjectBacking``, and how its context learns that the
/// object is gone.
///
/// A context's registry (its identity map) refers to its objects without keeping them alive and
/// without weak references: a weak reference costs every object a side table (about 48 bytes)
/// and makes each of its retains and releases slower. Instead the slot, a stored property of the
/// object, takes the object's registry entry out when the object is destroyed: its `deinit` runs
/// as part of the object's. `@Model` generates the slot; user code never needs this type.
///
/// The backing is made on first use for an object created by the app's own initializer, so that
/// objects Loom makes for stored rows (through `init(backing:)`) allocate no backing they throw
/// away.
public struct ObjectSlot: ~Copyable {
    @usableFromInline
    var backing: ObjectBacking?

    /// An empty slot: the object's backing is made on first use.
    @inlinable
    public init() { backing = nil }

    /// A slot holding `backing`, for an object Loom makes around stored values.
    public init(_ backing: ObjectBacking) {
        backing.hasOwnerSlot = true
        self.backing = backing
    }

    /// The backing, when it exists.
    @inlinable
    public var current: ObjectBacking? { backing }

    /// Makes the backing of a new object of `entity`, on its first use.
    public mutating func makeBacking(for entity: EntityDescription) -> ObjectBacking {
        let made = ObjectBacking(entity: entity)
        made.hasOwnerSlot = true
        backing = made
        return made
    }

    deinit {
        backing?.ownerDidDeinit()
    }
}
