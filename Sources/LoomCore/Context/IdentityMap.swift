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
/// pointer comparison, then a ``KeyedSlots`` table: the keys of one dense run by their
/// position in an array, others in a dictionary keyed by the `Int64` key. An entity's objects
/// are all of one class (its model class, or ``DynamicObject``), so a slot holds the object's
/// address and its backing, 16 bytes, and the table makes the object again from its address
/// with the class it keeps once: an `any BackedObject` would add its conformance to every slot.
/// An object of another class filed under the entity (a hand-written conformance, say) goes to
/// a second dictionary of whole entries.
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

    /// What a table keeps of an object of its entity's class: the object's address and its
    /// backing, neither retained (like ``Entry``'s references: valid while the entry is, since
    /// the object's slot takes the entry out when the object is destroyed).
    private struct Filed {
        let address: UnsafeRawPointer
        unowned(unsafe) let backing: ObjectBacking
    }

    // One table per entity, in parallel arrays (a struct of several dictionaries as the element
    // would be copied, each of its dictionaries retained, by every lookup). The lookups are
    // inlined for the same reason: called on the context's stored map, an outlined lookup
    // gets a copy of the whole map, every array retained.
    /// The entities that have a table, in the order their first object was registered.
    private var entities: [ObjectIdentifier] = []
    /// Each entity's objects of its class, by key.
    private var filed: [KeyedSlots<Filed>] = []
    /// Each entity's objects of any other class, by key (rarely any).
    private var others: [[RowKey: Entry]] = []
    /// The class of the objects in each `filed` table: the class of the entity's first object.
    /// A metatype, not a closure: turning an address back into an object retains nothing else.
    private var classes: [(any BackedObject.Type)?] = []
    /// Objects held strongly: hand-written conformances always, every object when `retainsAll`.
    private var held: [RowCacheKey: any BackedObject] = [:]
    /// The number of entries.
    private(set) var count = 0
    /// How many objects the map holds strongly.
    var heldCount: Int { held.count }
    /// Whether no object is registered.
    var isEmpty: Bool { count == 0 }
    /// How many entities have a table (grows as objects of new entities are registered).
    var entityCount: Int {
        @inline(__always) get { entities.count }
    }
    /// The entities that have a table.
    var registeredEntities: [ObjectIdentifier] { entities }
    /// Whether every registered object is held strongly (see `setRetainsAll(_:)`).
    private(set) var retainsAll = false

    @inline(__always)
    private func table(of entity: ObjectIdentifier) -> Int? {
        // Few entities, compared as pointers: cheaper than hashing the entity for every lookup.
        entities.firstIndex(of: entity)
    }

    private mutating func makeTable(of entity: ObjectIdentifier) -> Int {
        if let index = table(of: entity) { return index }
        entities.append(entity)
        filed.append(KeyedSlots())
        others.append([:])
        classes.append(nil)
        return entities.count - 1
    }

    /// The entry made from what table `index` files.
    @inline(__always)
    private func entry(_ filed: Filed, in index: Int) -> Entry {
        Entry(classes[index].unsafelyUnwrapped._loomObject(at: filed.address), filed.backing)
    }

    /// The entry for a row, if an object for it is registered.
    @inline(__always)
    subscript(key: RowCacheKey) -> Entry? {
        guard let index = table(of: key.entity) else { return nil }
        if let filed = filed[index][key.key] { return entry(filed, in: index) }
        return others[index].isEmpty ? nil : others[index][RowKey(key.key)]
    }

    /// The backing of the object registered for a row, if any (without making a reference to
    /// the object).
    @inline(__always)
    func backing(for key: RowCacheKey) -> ObjectBacking? {
        guard let index = table(of: key.entity) else { return nil }
        if let filed = filed[index][key.key] { return filed.backing }
        return others[index].isEmpty ? nil : others[index][RowKey(key.key)]?.backing
    }

    /// The registered object for a row.
    @inline(__always)
    func object(for key: RowCacheKey) -> (any BackedObject)? {
        self[key]?.object
    }

    /// Whether an object for the row is registered.
    @inline(__always)
    func contains(_ key: RowCacheKey) -> Bool {
        backing(for: key) != nil
    }

    /// Each entity's entries with the keys they are filed under.
    private var keyedEntries: [(entity: ObjectIdentifier, key: RowKey, entry: Entry)] {
        entities.indices.flatMap { index in
            filed[index].map { (entities[index], RowKey($0.key), entry($0.value, in: index)) }
                + others[index].map { (entities[index], $0.key, $0.value) }
        }
    }

    /// Every entry, entity by entity.
    var entries: [Entry] {
        keyedEntries.map(\.entry)
    }

    /// Every registered object, held strongly by the array.
    var objects: [any BackedObject] {
        keyedEntries.map(\.entry.object)
    }

    /// Registers an object for its row, in place of any earlier one.
    ///
    /// - Returns: the object this displaced from `held`, to be released by the caller.
    @discardableResult
    mutating func insert(_ object: any BackedObject, _ backing: ObjectBacking, at key: RowCacheKey) -> (any BackedObject)? {
        let index = makeTable(of: key.entity)
        let rowKey = RowKey(key.key)
        let objectClass = type(of: object)
        if classes[index] == nil { classes[index] = objectClass }
        let isNew = if ObjectIdentifier(classes[index].unsafelyUnwrapped) == ObjectIdentifier(objectClass) {
            filed[index].updateValue(Filed(address: UnsafeRawPointer(Unmanaged<AnyObject>.passUnretained(object).toOpaque()), backing: backing), forKey: key.key) == nil
                && (others[index].isEmpty || others[index].removeValue(forKey: rowKey) == nil)
        } else {
            others[index].updateValue(Entry(object, backing), forKey: rowKey) == nil && filed[index].removeValue(forKey: key.key) == nil
        }
        if isNew { count += 1 }
        if retainsAll || !backing.hasOwnerSlot { return held.updateValue(object, forKey: key) }
        return held.isEmpty ? nil : held.removeValue(forKey: key)
    }

    /// Takes a row's entry out.
    ///
    /// - Returns: the object the map held strongly for it, to be released by the caller.
    @discardableResult
    mutating func remove(_ key: RowCacheKey) -> (any BackedObject)? {
        if let index = table(of: key.entity) {
            let rowKey = RowKey(key.key)
            if filed[index].removeValue(forKey: key.key) != nil || (!others[index].isEmpty && others[index].removeValue(forKey: rowKey) != nil) {
                count -= 1
            }
        }
        return held.isEmpty ? nil : held.removeValue(forKey: key)
    }

    /// Takes out the entry of a destroyed object, unless its row's entry now belongs to another
    /// object. A destroyed object was not held, so nothing is released.
    mutating func removeEntry(of backing: ObjectBacking, at key: RowCacheKey) {
        guard let index = table(of: key.entity) else { return }
        if !filed[index].removeValue(forKey: key.key, where: { $0.backing === backing }) {
            // One hash: the entry is found once, then removed at its position.
            let rowKey = RowKey(key.key)
            guard !others[index].isEmpty, let position = others[index].index(forKey: rowKey),
                others[index].values[position].backing === backing
            else { return }
            others[index].remove(at: position)
        }
        count -= 1
    }

    /// Takes every entry out.
    ///
    /// - Returns: the objects the map held strongly, to be released by the caller.
    mutating func removeAll() -> [RowCacheKey: any BackedObject] {
        entities = []
        filed = []
        others = []
        classes = []
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
            for (entity, key, entry) in keyedEntries { held[RowCacheKey(entity: entity, key: key.value)] = entry.object }
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
        filed[index].reserveCapacity(forNew: count)
    }

    /// What is wrong with the map, if anything: every entry's backing must belong to `context`
    /// and name the row it is filed under, every held object must be registered, and `count`
    /// must be the number of entries. Checked by debug builds after saves, merges, rollbacks
    /// and resets (see ``ManagedObjectContext/checkIdentityMap()``); each check reads every entry.
    func problems(in context: ManagedObjectContext) -> [String] {
        var problems: [String] = []
        var total = 0
        func check(_ entity: ObjectIdentifier, _ key: Int64, _ backing: ObjectBacking, _ object: () -> any BackedObject) {
            total += 1
            if ObjectIdentifier(backing.entity) != entity || backing.key != key {
                problems.append("an entry filed under key \(key) belongs to \(backing.entity.name) \(backing.key)")
            }
            if backing.context !== context {
                problems.append("\(backing.entity.name) \(key) is registered but belongs to another context or none")
            }
            if object()._loomBacking !== backing {
                problems.append("\(backing.entity.name) \(key) is registered with another object's backing")
            }
        }
        // Dictionary by dictionary, without gathering the entries first: debug builds run this
        // after every save, merge, rollback and reset.
        for index in entities.indices {
            let entity = entities[index]
            for (key, filed) in filed[index] {
                check(entity, key, filed.backing) { entry(filed, in: index).object }
            }
            for (rowKey, entry) in others[index] {
                check(entity, rowKey.value, entry.backing) { entry.object }
                if filed[index][rowKey.value] != nil { problems.append("key \(rowKey.value) of entity table \(index) is filed twice") }
            }
            problems += filed[index].problems.map { "entity table \(index): \($0)" }
        }
        if total != count { problems.append("count is \(count), but \(total) entries are filed") }
        for (key, object) in held where self[key]?.object !== object {
            problems.append("\(object._loomBacking.entity.name) \(key.key) is held but not registered")
        }
        return problems
    }
}

extension BackedObject {
    /// The object at `address` (an unretained reference to an object of this class), as a
    /// strong reference. For ``IdentityMap``, which files an entity's objects by address.
    @inline(__always)
    static func _loomObject(at address: UnsafeRawPointer) -> any BackedObject {
        Unmanaged<Self>.fromOpaque(address).takeUnretainedValue()
    }
}
