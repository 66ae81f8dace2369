/// Where a `@Model` object keeps its `_ObjectBacking`, and how its context learns that the
/// object is gone.
///
/// A context's registry (its identity map) refers to its objects without keeping them alive and
/// without weak references: a weak reference costs every object a side table
/// and makes each of its retains and releases slower. Instead the slot, a stored property of the
/// object, takes the object's registry entry out when the object is destroyed: its `deinit` runs
/// as part of the object's. `@Model` generates the slot; user code never needs this type.
///
/// The backing is made on first use for an object created by the app's own initializer, so that
/// objects Loom makes for stored rows (through `init(backing:)`) allocate no backing they throw
/// away.
///
/// Isolation: the slot is used where its object is, on the object's context's isolation (or
/// anywhere, for an object not inserted yet), by the object's generated members only.
///
/// Public, with an underscored name, only because the code `@Model` expands to lives in the
/// app's module.
@_documentation(visibility: internal)
public struct _ObjectSlot: ~Copyable {
    /// The backing, owned by the slot: retained when stored, released by `deinit`. Kept as
    /// `Unmanaged` so that an accessor can use it without a retain and a release of its own
    /// (``withCurrentBacking(_:)``): a strong reference is copied, and so retained, when read.
    @usableFromInline
    var backing: Unmanaged<_ObjectBacking>?

    /// An empty slot: the object's backing is made on first use.
    @inlinable
    public init() { backing = nil }

    /// A slot holding `backing`, for an object Loom makes around stored values.
    public init(_ backing: _ObjectBacking) {
        backing.hasOwnerSlot = true
        self.backing = .passRetained(backing)
    }

    /// The backing, when it exists.
    @inlinable
    public var current: _ObjectBacking? { backing?.takeUnretainedValue() }

    /// `body`'s result for the backing, when it exists, without retaining the backing: the
    /// generated getters and setters reach the backing through this (a retain and a release,
    /// on every access otherwise). Runs on the caller's isolation.
    /// Safe: the object holds its slot, and the slot its backing, for the object's whole life,
    /// and a slot never replaces a backing it has; so the backing outlives any accessor of the
    /// object, which its caller keeps alive.
    @inlinable @inline(__always)
    public func withCurrentBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result? {
        guard let backing else { return nil }
        return backing._withUnsafeGuaranteedRef(body)
    }

    /// Makes the backing of a new object of `entity`, on its first use; the backing the slot
    /// has, if it has one (a slot never replaces its backing: see ``withCurrentBacking(_:)``).
    public mutating func makeBacking(for entity: EntityDescription) -> _ObjectBacking {
        if let backing { return backing.takeUnretainedValue() }
        let made = _ObjectBacking(entity: entity)
        made.hasOwnerSlot = true
        backing = .passRetained(made)
        return made
    }

    deinit {
        guard let backing else { return }
        backing.takeUnretainedValue().ownerDidDeinit()
        backing.release()
    }
}
