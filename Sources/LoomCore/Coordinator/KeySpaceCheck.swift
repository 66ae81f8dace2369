/// Whether each hierarchy's saved objects have keys of their own: what identifies an object of
/// a hierarchy by its key alone (a live query over a parent entity) checks it first.
///
/// Every entity of a hierarchy takes its keys from its root's counter (``KeyAllocator``, the
/// stores' `allocateKeys(for:count:)`), and a store opened read-write moves that counter past
/// every key of the hierarchy. But a store written while each entity had a counter of its own
/// may hold a `Trip` and a `BusinessTrip` that both have key 1; those keys never change (they
/// are in object IDs and URIs), so this check finds them, once per hierarchy and coordinator,
/// and refuses instead of mixing the two objects up. Keys handed out since cannot collide.
///
/// `Sendable`: the set of hierarchies checked is behind its lock.
final class KeySpaceCheck: Sendable {
    private let checked = Locked<Set<ObjectIdentifier>>([])

    /// Throws ``LoomError/Code/invalidRequest`` naming two objects of `entity`'s hierarchy that
    /// share a key in `store`, for `operation` ("A live query of Trip").
    ///
    /// - Complexity: reads every saved key of the hierarchy, the first time only (O(n)).
    func requireUniqueKeys(in entity: EntityDescription, schema: Schema, store: any StoreReading, for operation: String) throws(LoomError) {
        let root = entity.rootEntity
        if checked.withLock({ $0.contains(ObjectIdentifier(root)) }) { return }
        let entities = schema.concreteEntities(of: root)
        guard entities.count > 1 else { return }
        var owners: [Int64: EntityDescription] = [:]
        for member in entities {
            for row in try store.aggregate(AggregateQuery(entity: member, columns: [.value(.primaryKey)])) {
                guard case .integer(let key) = row.first else { continue }
                if let other = owners.updateValue(member, forKey: key) {
                    throw LoomError(
                        .invalidRequest,
                        "\(operation) is refused: \(other.name)/\(key) and \(member.name)/\(key) share a key, saved while they were not in one hierarchy (or before Loom gave each hierarchy one key space), so a key does not name one object of \(root.name)'s hierarchy. Run it on each entity with includesSubentities = false, or give one of them a new key (insert a copy, delete the original).",
                        entity: entity.name)
                }
            }
        }
        checked.withLock { _ = $0.insert(ObjectIdentifier(root)) }
    }
}
