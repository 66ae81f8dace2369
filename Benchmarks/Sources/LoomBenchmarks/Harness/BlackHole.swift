/// Keeps a value alive and observed, so that the optimizer cannot drop the work that made it.
@inline(never) @_optimize(none)
func blackHole<T>(_ value: T) {}

extension Sequence where Element == ItemData {
    var checksum: Int { reduce(0) { $0 &+ $1.checksum } }
}

extension Sequence where Element == ItemRecord {
    var checksum: Int { reduce(0) { $0 &+ $1.checksum } }
}

extension Sequence where Element == Item {
    /// Reads every attribute of every object.
    var checksum: Int { reduce(0) { $0 &+ $1.checksum } }
}
