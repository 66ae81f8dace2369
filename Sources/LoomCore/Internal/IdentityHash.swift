/// Hash values for keys Loom makes itself (row keys, object identities), mixed with a few
/// multiplications instead of the standard library's SipHash.
///
/// SipHash guards a table against keys chosen to collide; a registry's keys are the store's
/// primary keys and object addresses, which no input picks, and hashing them with SipHash was
/// paid on every lookup (several lookups per object made and destroyed). The
/// mixer is SplitMix64's finalizer, whose low bits (the ones a `Dictionary` uses) depend on
/// every bit of the key; the table's per-instance seed is mixed in as SipHash would.
@usableFromInline
enum IdentityHash {
    @inlinable @inline(__always)
    static func mix(_ bits: UInt64, seed: Int) -> Int {
        var x = bits ^ UInt64(UInt(bitPattern: seed))
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: x ^ (x >> 31))
    }
}

/// A row's primary key as a dictionary key hashed by ``IdentityHash``.
struct RowKey: Hashable {
    let value: Int64

    @inline(__always)
    init(_ value: Int64) { self.value = value }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }

    /// What `Dictionary` and `Set` call: ``IdentityHash`` instead of SipHash.
    @inline(__always)
    func _rawHashValue(seed: Int) -> Int { IdentityHash.mix(UInt64(bitPattern: value), seed: seed) }
}
