/// Which entity of a hierarchy each key belongs to, as far as this coordinator has seen.
///
/// A relationship leading to an entity with sub-entities holds a key, and the object it names
/// is the entity's or one of its sub-entities', in that entity's table. A hierarchy has one key
/// space, a key is never handed out twice, and an object never changes entity: an entry never
/// goes stale, whichever context, transaction or process saved (or dropped) the object.
///
/// It is a cache, not a record: whatever it forgets is found again where it came from (the
/// registered objects, or one query per table). So that a long-running process does not keep
/// an entry for every key it ever followed, a hierarchy's entries are dropped together once
/// they reach `capacity`.
///
/// Shared by every context of the coordinator; `Sendable`, under its own lock.
final class KeyEntities: Sendable {
    private let byRoot = Locked<[ObjectIdentifier: [Int64: EntityDescription]]>([:])
    /// The most entries one hierarchy keeps (an entry is about 40 bytes).
    let capacity: Int

    init(capacity: Int = 1 << 18) {
        self.capacity = capacity
    }

    /// The entity of the object with `key` in `root`'s hierarchy, when known.
    func entity(in root: EntityDescription, key: Int64) -> EntityDescription? {
        byRoot.withLock { $0[ObjectIdentifier(root)]?[key] }
    }

    /// The entities of `keys` in `root`'s hierarchy, where known, in one lock.
    func entities(in root: EntityDescription, keys: some Sequence<Int64>) -> [Int64: EntityDescription] {
        byRoot.withLock { known in
            guard let entities = known[ObjectIdentifier(root)] else { return [:] }
            var found: [Int64: EntityDescription] = [:]
            for key in keys { if let entity = entities[key] { found[key] = entity } }
            return found
        }
    }

    /// Notes that the objects with `keys` are `entity`'s.
    func note(_ entity: EntityDescription, keys: some Sequence<Int64>) {
        let root = ObjectIdentifier(entity.rootEntity)
        byRoot.withLock { known in
            for key in keys {
                if known[root]?.count ?? 0 >= capacity { known[root] = [:] }
                known[root, default: [:]][key] = entity
            }
        }
    }

    /// How many entries `root`'s hierarchy keeps now.
    func count(in root: EntityDescription) -> Int {
        byRoot.withLock { $0[ObjectIdentifier(root)]?.count ?? 0 }
    }
}
