public import Observation

/// Where a `@Model` object keeps the `ObservationRegistrar` through which its persistent
/// properties report reads and changes to the Observation framework (`withObservationTracking`).
///
/// The registrar is made the first time one of the object's persistent properties is read, not
/// with the object: a registrar costs two allocations (about 130 bytes and 230 ns here), which
/// every object a fetch makes would pay, faults that are never read included. Until then nothing
/// can observe the object (observing a property means reading it inside
/// `withObservationTracking`), so a change tells no one and costs one comparison.
///
/// `@Model` generates the slot and the accessors that use it; user code never needs this type.
/// Like its object, it is used only on the isolation of the object's context.
public struct ObservationSlot {
    @usableFromInline
    var registrar: ObservationRegistrar?

    /// An empty slot: the registrar is made on the first read.
    @inlinable
    public init() { registrar = nil }

    /// Whether a property of the object was read since it was made: only then can anything
    /// observe it.
    @inlinable
    public var mayBeObserved: Bool { registrar != nil }

    /// Reports that `object`'s property at `keyPath` is being read, for the observation tracking
    /// in progress, if any. Generated getters call this.
    ///
    /// Costs about 16 ns when nothing is tracking, and allocates nothing after the first read.
    @inlinable
    public mutating func access<Model: Observable, Value>(_ object: Model, keyPath: KeyPath<Model, Value>) {
        if registrar == nil { registrar = ObservationRegistrar() }
        registrar.unsafelyUnwrapped.access(object, keyPath: keyPath)
    }

    /// Runs `mutation`, which changes `object`'s property at `keyPath`, telling its observers
    /// before and after. Generated setters call this.
    @inlinable
    public func withMutation<Model: Observable, Value, Result>(
        of object: Model, keyPath: KeyPath<Model, Value>, _ mutation: () throws -> Result
    ) rethrows -> Result {
        guard let registrar else { return try mutation() }
        return try registrar.withMutation(of: object, keyPath: keyPath, mutation)
    }

    /// Tells the observers of `object`'s property at `keyPath` that it changed: a change that did
    /// not go through its setter (a merge, a refresh, a rollback, an inverse relationship).
    @inlinable
    public func didChange<Model: Observable, Value>(_ object: Model, keyPath: KeyPath<Model, Value>) {
        registrar?.withMutation(of: object, keyPath: keyPath) {}
    }
}
