/// A context's identity map: for each row, by entity and key, the one object that stands for it
/// in the context (Core Data's "uniquing").
///
/// The map refers to its objects without keeping them alive and without weak references (a weak
/// reference costs every object a side table and slows its retains): an entry is
/// `unowned(unsafe)`, and stays valid because the object's ``ObjectSlot`` takes the entry out
/// when the object is destroyed (``ManagedObjectContext/unregister(_:)``). This type is the only
/// place in Loom that holds such references. Objects that cannot take their entry out (a class
/// conforming to ``BackedObject`` by hand) and, with ``ManagedObjectContext/retainsRegisteredObjects``,
/// every object are also held strongly, in `held`.
///
/// Entries are kept per entity, by the row's 8-byte key: one small table per entity found by
/// pointer comparison, then a dictionary keyed by the `Int64` key (a ``RowKey``, hashed by
/// ``IdentityHash`` rather than SipHash: cheaper to hash, and 8 bytes a
/// bucket smaller than a key that also names the entity).
///
/// Releasing an object can run its slot's `deinit`, which removes its entry from this map: so
/// no mutating method releases an object while it runs. Those that drop a strong reference
/// return it instead, to be released by the caller once the map is no longer being changed.
///
/// Confined to its context's isolation, like everything the context holds.
struct IdentityMap {
    /// A registered object and its backing (alive as long as the object): the backing tells
    /// this entry from a later one for the same key, and saves going through the object.
    struct Entry {
        unowned(unsafe) let object: any BackedObject
        unowned(unsafe) let backing: ObjectBacking

        init(_ object: any BackedObject, _ backing: ObjectBacking) {
            self.object = object
            self.backing = backing
        }
    }

    /// The entities that have a table, in the order their first object was registered.
    private var entities: [ObjectIdentifier] = []
    /// Each entity's entries by key, in the order of `entities`.
    private var tables: [[RowKey: Entry]] = []
    /// Objects held strongly: hand-written conformances always, every object when `retainsAll`.
    private var held: [RowCacheKey: any BackedObject] = [:]
    /// The number of entries.
    private(set) var count = 0
    /// How many objects the map holds strongly.
    var heldCount: Int { held.count }
    /// Whether no object is registered.
    var isEmpty: Bool { count == 0 }
    /// Whether every registered object is held strongly (see `setRetainsAll(_:)`).
    private(set) var retainsAll = false

    private func table(of entity: ObjectIdentifier) -> Int? {
        // Few entities, compared as pointers: cheaper than hashing the entity for every lookup.
        entities.firstIndex(of: entity)
    }

    private mutating func makeTable(of entity: ObjectIdentifier) -> Int {
        if let index = table(of: entity) { return index }
        entities.append(entity)
        tables.append([:])
        return tables.count - 1
    }

    /// The entry for a row, if an object for it is registered.
    subscript(key: RowCacheKey) -> Entry? {
        guard let index = table(of: key.entity) else { return nil }
        return tables[index][RowKey(key.key)]
    }

    /// The backing of the object registered for a row, if any.
    func backing(for key: RowCacheKey) -> ObjectBacking? {
        self[key]?.backing
    }

    /// The registered object for a row.
    func object(for key: RowCacheKey) -> (any BackedObject)? {
        self[key]?.object
    }

    /// Whether an object for the row is registered.
    func contains(_ key: RowCacheKey) -> Bool {
        self[key] != nil
    }

    /// Every entry, entity by entity.
    var entries: [Entry] {
        tables.flatMap(\.values)
    }

    /// Every registered object, held strongly by the array.
    var objects: [any BackedObject] {
        tables.flatMap { $0.values.map(\.object) }
    }

    /// Registers an object for its row, in place of any earlier one.
    ///
    /// - Returns: the object this displaced from `held`, to be released by the caller.
    @discardableResult
    mutating func insert(_ object: any BackedObject, _ backing: ObjectBacking, at key: RowCacheKey) -> (any BackedObject)? {
        let index = makeTable(of: key.entity)
        if tables[index].updateValue(Entry(object, backing), forKey: RowKey(key.key)) == nil { count += 1 }
        if retainsAll || !backing.hasOwnerSlot { return held.updateValue(object, forKey: key) }
        return held.isEmpty ? nil : held.removeValue(forKey: key)
    }

    /// Takes a row's entry out.
    ///
    /// - Returns: the object the map held strongly for it, to be released by the caller.
    @discardableResult
    mutating func remove(_ key: RowCacheKey) -> (any BackedObject)? {
        if let index = table(of: key.entity), tables[index].removeValue(forKey: RowKey(key.key)) != nil { count -= 1 }
        return held.isEmpty ? nil : held.removeValue(forKey: key)
    }

    /// Takes out the entry of a destroyed object, unless its row's entry now belongs to another
    /// object. A destroyed object was not held, so nothing is released.
    mutating func removeEntry(of backing: ObjectBacking, at key: RowCacheKey) {
        // One hash: the entry is found once, then removed at its position.
        guard let index = table(of: key.entity), let position = tables[index].index(forKey: RowKey(key.key)),
              tables[index].values[position].backing === backing
        else { return }
        tables[index].remove(at: position)
        count -= 1
    }

    /// Takes every entry out.
    ///
    /// - Returns: the objects the map held strongly, to be released by the caller.
    mutating func removeAll() -> [RowCacheKey: any BackedObject] {
        entities = []
        tables = []
        count = 0
        defer { held = [:] }
        return held
    }

    /// Holds every registered object strongly (on), or only those that cannot leave by
    /// themselves (off).
    ///
    /// - Returns: the objects no longer held, to be released by the caller.
    mutating func setRetainsAll(_ on: Bool) -> [any BackedObject] {
        retainsAll = on
        if on {
            for (entity, table) in zip(entities, tables) {
                for (key, entry) in table { held[RowCacheKey(entity: entity, key: key.value)] = entry.object }
            }
            return []
        }
        let released = held.filter { $0.value._loomBacking.hasOwnerSlot }
        for key in released.keys { held[key] = nil }
        return Array(released.values)
    }

    /// Makes room in an entity's table for `count` more objects at once, rather than doubling
    /// it again and again while a large fetch registers them.
    mutating func reserveCapacity(forNew count: Int, of entity: ObjectIdentifier) {
        guard count > 64 else { return }
        let index = makeTable(of: entity)
        tables[index].reserveCapacity(tables[index].count + count)
    }

    /// What is wrong with the map, if anything: every entry's backing must belong to `context`
    /// and name the row it is filed under, every held object must be registered, and `count`
    /// must be the number of entries. Checked by debug builds after saves, merges, rollbacks
    /// and resets (see ``ManagedObjectContext/checkIdentityMap()``); each check reads every entry.
    func problems(in context: ManagedObjectContext) -> [String] {
        var problems: [String] = []
        var total = 0
        for (entity, table) in zip(entities, tables) {
            total += table.count
            for (rowKey, entry) in table {
                let key = rowKey.value
                let backing = entry.backing
                if ObjectIdentifier(backing.entity) != entity || backing.key != key {
                    problems.append("an entry filed under key \(key) belongs to \(backing.entity.name) \(backing.key)")
                }
                if backing.context !== context {
                    problems.append("\(backing.entity.name) \(key) is registered but belongs to another context or none")
                }
                if entry.object._loomBacking !== backing {
                    problems.append("\(backing.entity.name) \(key) is registered with another object's backing")
                }
            }
        }
        if total != count { problems.append("count is \(count), but \(total) entries are filed") }
        for (key, object) in held where self[key]?.object !== object {
            problems.append("\(object._loomBacking.entity.name) \(key.key) is held but not registered")
        }
        return problems
    }
}
