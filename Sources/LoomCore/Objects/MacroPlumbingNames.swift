// The types `@Model`'s expansion names are public, because that code lives in the app's module,
// and underscored, so that they stay out of the app's code completion. Loom's own code keeps
// their plain names.

typealias ObjectBacking = _ObjectBacking
typealias ObjectSlot = _ObjectSlot
typealias ObservationSlot = _ObservationSlot
