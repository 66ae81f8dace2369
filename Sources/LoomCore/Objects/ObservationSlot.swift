public import Observation

/// Where a `@Model` object keeps the `ObservationRegistrar` through which its persistent
/// properties report reads and changes to the Observation framework (`withObservationTracking`).
///
/// The registrar is made the first time one of the object's persistent properties is read
/// inside a tracking scope (`withObservationTracking`, `Observations`), not with the object and
/// not on a plain read: a registrar and its box cost three allocations, made and freed,
/// which every object an app reads would pay. Until
/// then nothing observes the object (observing a property means reading it inside a tracking
/// scope), so a change tells no one and costs one comparison. `ObservationTrackingProbe`
/// tells a tracked read from a plain one; where it cannot (it is unavailable on a platform),
/// the registrar is made on the first read of any kind.
///
/// `@Model` generates the slot and the accessors that use it; user code never needs this type.
/// Like its object, it is used only on the isolation of the object's context.
///
/// Public, with an underscored name, only because the code `@Model` expands to lives in the
/// app's module.
@_documentation(visibility: internal)
public struct _ObservationSlot {
    /// The registrar, in a box of its own: `ObservationRegistrar` is a resilient type of another
    /// library, so an `Optional<ObservationRegistrar>` stored here would be tested, copied and
    /// destroyed through value witnesses on every read (more work than the rest of the read);
    /// an optional reference to a final class is one pointer test.
    @usableFromInline
    var box: RegistrarBox?
    /// The Observation runtime's reader of its tracking state (`ObservationTrackingProbe`),
    /// or `nil` where the probe could not find it. A copy per object: it fits in the padding
    /// malloc gives the object anyway, and a read then needs no lazy global's check and no
    /// retain of anything to reach it.
    @usableFromInline
    let tracking: ObservationTrackingProbe.TrackingState?

    /// An empty slot: the registrar is made on the first tracked read.
    @inlinable
    public init() {
        box = nil
        tracking = ObservationTrackingProbe.tracking
    }

    /// Whether a property of the object was read inside a tracking scope since it was made:
    /// only then can anything observe it.
    @inlinable
    public var mayBeObserved: Bool { box != nil }

    /// Reports that `object`'s property at `keyPath` is being read, for the observation tracking
    /// in progress, if any. Generated getters call this.
    ///
    /// Outside a tracking scope it costs a call and a thread-local load: no registrar is made,
    /// and `keyPath` is not evaluated (making a key path from its literal is a runtime call).
    @inlinable
    public mutating func access<Model: Observable, Value>(_ object: Model, keyPath: @autoclosure () -> KeyPath<Model, Value>) {
        guard ObservationTrackingProbe.mayBeTracking(tracking) else { return }
        if let box {
            box.registrar.access(object, keyPath: keyPath())
        } else {
            let box = RegistrarBox()
            self.box = box
            box.registrar.access(object, keyPath: keyPath())
        }
    }

    /// Runs `mutation`, which changes `object`'s property at `keyPath`, telling its observers
    /// before and after. Generated setters call this.
    ///
    /// `keyPath` is evaluated only when something may observe the object: making a key path
    /// from its literal is a runtime call, which setting a property of an object never read
    /// (every object an import or a save makes) does not need.
    @inlinable
    public func withMutation<Model: Observable, Value, Result>(
        of object: Model, keyPath: @autoclosure () -> KeyPath<Model, Value>, _ mutation: () throws -> Result
    ) rethrows -> Result {
        guard let box else { return try mutation() }
        return try box.registrar.withMutation(of: object, keyPath: keyPath(), mutation)
    }

    /// Tells the observers of `object`'s property at `keyPath` that it changed: a change that did
    /// not go through its setter (a merge, a refresh, a rollback, an inverse relationship).
    @inlinable
    public func didChange<Model: Observable, Value>(_ object: Model, keyPath: @autoclosure () -> KeyPath<Model, Value>) {
        box?.registrar.withMutation(of: object, keyPath: keyPath()) {}
    }
}

/// The `ObservationRegistrar` of one object, held by reference (see `_ObservationSlot`).
/// Used only on the isolation of the object's context, like its object.
@usableFromInline
final class RegistrarBox {
    @usableFromInline
    let registrar = ObservationRegistrar()

    @usableFromInline
    init() {}
}
