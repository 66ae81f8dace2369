import Foundation

/// The storage behind one managed object: its values, its identity, its state in its context.
///
/// `@Model` generates `_loomBacking` (kept in an ``ObjectSlot``) and accessors that call
/// `value(at:as:)` and ``setValue(_:at:)`` (with overloads for relationships); user code never
/// needs this type. Not `Sendable`: it belongs to the context its object is registered in.
///
/// Public, with an underscored name, only because the code `@Model` expands to lives in the
/// app's module.
@_documentation(visibility: internal)
public final class _ObjectBacking {
    @usableFromInline
    enum State: UInt8 {
        /// Created and not inserted into a context yet.
        case detached
        /// Registered; values not loaded yet.
        case fault
        /// Registered with its values.
        case loaded
        /// Its context was reset or the object was otherwise cut loose; any use traps.
        case invalidated
    }

    @usableFromInline
    let entity: EntityDescription
    /// The current values, one per slot (see ``EntityDescription``). A required attribute of a
    /// new object that was never set holds NULL, which a read traps on and a save refuses.
    /// Loading a row shares the row's array (copy-on-write) with ``committed``.
    ///
    /// `@exclusivity(unchecked)`, like ``state``: every attribute read reads both, and a
    /// run-time exclusivity check costs more than the read. Safe: they are only read and
    /// assigned (element assignments included), never passed `inout` or modified in place
    /// across a call that could reach them again.
    @usableFromInline @exclusivity(unchecked)
    var values: [StoredValue]
    /// The values as last fetched or saved; `nil` for objects never saved.
    var committed: [StoredValue]?
    /// The version of the row the committed values came from.
    var version: Int64 = 0
    /// The primary key; 0 until inserted.
    var key: Int64 = 0
    weak var context: ManagedObjectContext?
    /// What few objects need: kept out of line, so that every object is smaller.
    final class Extras {
        var invalidationReason: String?
        var detachedRelated: [Int: [any BackedObject]] = [:]
        var toMany: [Int: MemberList] = [:]
    }
    var extras: Extras?
    /// The coordinator's shared ``StoreIdentity`` (one reference instead of a UUID per object).
    var storeIdentity: StoreIdentity?
    /// The object's yes/no states, in one byte: with ``state`` and ``heldRowAge`` after it, an
    /// object's storage fills its malloc bin exactly (eight `Bool`s and the to-many lists
    /// inline moved every object to the next, larger bin).
    /// `@exclusivity(unchecked)` like ``state``: only read or changed inside the accessors
    /// below, never across a call.
    @exclusivity(unchecked) private var flags: Flags = []
    @usableFromInline @exclusivity(unchecked)
    var state: State
    /// When the row a fault holds (``holdsFetchedRow``) was read: the coordinator's change
    /// generation then, as generations after its context's oldest held row
    /// (`ManagedObjectContext.fetchedRowsGeneration`); `UInt32.max` stands for any later one,
    /// which only makes the fault re-read a row more often. 32 bits, in bytes the 96-byte bin
    /// had free: a generation per fault, so that a fault asks about saves since its own fetch,
    /// not since its context's first.
    var heldRowAge: UInt32 = 0

    private struct Flags: OptionSet {
        let rawValue: UInt8
        static let inserted = Flags(rawValue: 1 << 0)
        static let updated = Flags(rawValue: 1 << 1)
        static let deleted = Flags(rawValue: 1 << 2)
        static let inaccessible = Flags(rawValue: 1 << 3)
        static let changedSinceEvent = Flags(rawValue: 1 << 4)
        static let deletePropagated = Flags(rawValue: 1 << 5)
        static let holdsFetchedRow = Flags(rawValue: 1 << 6)
        static let hasOwnerSlot = Flags(rawValue: 1 << 7)
    }

    @inline(__always)
    private func flag(_ flag: Flags, _ on: Bool) {
        if on { flags.insert(flag) } else { flags.remove(flag) }
    }

    var isInserted: Bool {
        get { flags.contains(.inserted) }
        set { flag(.inserted, newValue) }
    }
    var isUpdated: Bool {
        get { flags.contains(.updated) }
        set { flag(.updated, newValue) }
    }
    var isDeleted: Bool {
        get { flags.contains(.deleted) }
        set { flag(.deleted, newValue) }
    }
    /// Whether the object's row was found missing when its fault fired: it reads as deleted.
    var isInaccessible: Bool {
        get { flags.contains(.inaccessible) }
        set { flag(.inaccessible, newValue) }
    }
    /// Whether the object is already listed in its context's current event.
    var changedSinceEvent: Bool {
        get { flags.contains(.changedSinceEvent) }
        set { flag(.changedSinceEvent, newValue) }
    }
    /// Whether the delete rules were applied for this object's deletion.
    var deletePropagated: Bool {
        get { flags.contains(.deletePropagated) }
        set { flag(.deletePropagated, newValue) }
    }
    /// Whether this fault already holds the row its fetch read (``values``, ``committed`` and
    /// ``version`` are set): firing it then only marks it loaded.
    var holdsFetchedRow: Bool {
        get { flags.contains(.holdsFetchedRow) }
        set { flag(.holdsFetchedRow, newValue) }
    }
    /// Whether the object is a `@Model` object or a ``DynamicObject``, which take their registry
    /// entry out when they are destroyed (see ``ObjectSlot``). A class conforming by hand lacks
    /// that: its context holds it strongly instead, until reset.
    var hasOwnerSlot: Bool {
        get { flags.contains(.hasOwnerSlot) }
        set { flag(.hasOwnerSlot, newValue) }
    }

    /// Why the object is invalid, for the trap message.
    var invalidationReason: String? {
        get { extras?.invalidationReason }
        set {
            if newValue == nil && extras == nil { return }
            if extras == nil { extras = Extras() }
            extras?.invalidationReason = newValue
        }
    }
    /// The loaded to-many relationships, by relationship index: the destinations' keys. Out of
    /// line (in ``Extras``): most objects never load one.
    var toMany: [Int: MemberList] {
        get { extras?.toMany ?? [:] }
        set {
            if newValue.isEmpty && extras == nil { return }
            makeExtras().toMany = newValue
        }
        _modify {
            let extras = makeExtras()
            yield &extras.toMany
        }
    }

    private func makeExtras() -> Extras {
        if let extras { return extras }
        let made = Extras()
        extras = made
        return made
    }
    /// Relationships set while the object was detached, applied when it is inserted.
    var detachedRelated: [Int: [any BackedObject]] {
        get { extras?.detachedRelated ?? [:] }
        set {
            if newValue.isEmpty && extras == nil { return }
            if extras == nil { extras = Extras() }
            extras?.detachedRelated = newValue
        }
    }

    /// Creates storage for a new object of `entity`, holding the entity's default values
    /// (and `nil` for optional attributes without one).
    ///
    /// The defaults are filled in on first use (`applyDefaultsIfNeeded()`): an object's
    /// initializer may set every value itself. `@Model` objects make theirs on first use
    /// (``ObjectSlot/makeBacking(for:)``).
    public init(entity: EntityDescription) {
        self.entity = entity
        self.state = .detached
        self.values = []
    }

    /// Gives a new object its default values, once.
    @inline(__always)
    func applyDefaultsIfNeeded() {
        guard state == .detached || isInserted, values.count != entity.storedValueCount else { return }
        // A new array of its own, filled in place: a copy of the shared `entity.nullValues`
        // would be copied again by the first set, for every new object.
        let count = entity.storedValueCount
        var fresh: [StoredValue] = []
        fresh.reserveCapacity(count)
        for _ in 0..<count { fresh.append(.null) }
        for (index, make) in entity.defaultMakers {
            if let value = make() { fresh[index] = value }
        }
        values = fresh
    }

    init(entity: EntityDescription, key: Int64, context: ManagedObjectContext) {
        self.entity = entity
        self.state = .fault
        self.values = []
        self.key = key
        self.context = context
        self.storeIdentity = context.coordinator.identity
    }

    // MARK: Attribute accessors

    /// Reads the attribute declared at property position `index` as a `T`. Generated accessors
    /// call this.
    ///
    /// Loads the object's values if it is a fault. Traps if the object is used off its context's
    /// isolation (with concurrency debugging on), after its context was reset, or if a required
    /// attribute is read before it was ever set.
    public func value<T>(at index: Int, as type: T.Type) -> T {
        decodeAttribute(at: index, as: T.self)
    }

    /// Reads an attribute of a ``PersistentValue`` type: the common case, converted straight
    /// from its stored value. `@inlinable`, so that the generated accessor of each property is
    /// specialized for its type (no boxing, no dynamic cast), and always inlined, so that the
    /// accessor holds the read instead of calling a specialized copy through a thunk shared by
    /// getters of one type (a call more on every read). Generated accessors call this, on
    /// the object's context's isolation; it traps where ``value(at:as:)-(_,T.Type)`` does.
    @inlinable @inline(__always)
    public func value<T: PersistentValue>(at index: Int, as type: T.Type) -> T {
        if let value = T(storedValue: storedAttribute(at: index)) { return value }
        return decodeAttribute(at: index, as: T.self)   // traps, saying why
    }

    /// Reads an optional attribute of a ``PersistentValue`` type; see `value(at:as:)-(_,T.Type)`.
    @inlinable @inline(__always)
    public func value<T: PersistentValue>(at index: Int, as type: T?.Type) -> T? {
        let stored = storedAttribute(at: index)
        if stored.isNull { return nil }
        if let value = T(storedValue: stored) { return value }
        return decodeAttribute(at: index, as: T?.self)   // traps, saying why
    }

    /// Writes an attribute of a ``PersistentValue`` type, converted straight to its stored
    /// value. Generated setters call this, on the object's context's isolation.
    @inlinable
    public func setValue<T: PersistentValue>(_ value: T, at index: Int, of owner: any BackedObject) {
        setStoredAttribute(value.storedValue, at: index)
    }

    /// Writes an optional attribute of a ``PersistentValue`` type.
    @inlinable
    public func setValue<T: PersistentValue>(_ value: T?, at index: Int, of owner: any BackedObject) {
        setStoredAttribute(value?.storedValue ?? .null, at: index)
    }

    /// The stored value of the attribute declared at property position `index`. Inlined into
    /// generated accessors: a loaded object's value is read straight from its slot; anything
    /// else (a fault, a check to make, a property that is not an attribute) takes the full path.
    @inlinable @inline(__always)
    func storedAttribute(at index: Int) -> StoredValue {
        if state == .loaded, !ConcurrencyDebugging.checksEnabled {
            let table = entity.propertyTable
            if index >= 0, index < table.count, table[index] >= 0 { return values[table[index]] }
        }
        return storedAttributeFullPath(at: index)
    }

    /// ``storedAttribute(at:)`` for anything but a loaded object with checks off: fires a fault,
    /// runs the concurrency check, traps for a relationship or an invalidated object.
    @usableFromInline
    func storedAttributeFullPath(at index: Int) -> StoredValue {
        storedValue(at: attributeSlot(forProperty: index))
    }

    /// Sets the stored value of the attribute declared at property position `index`.
    @usableFromInline
    func setStoredAttribute(_ stored: StoredValue, at index: Int) {
        setStoredValue(stored, at: attributeSlot(forProperty: index))
    }

    /// Reads an attribute through its codec (enums, `Codable` values), or traps saying why the
    /// stored value is not a `T`.
    @usableFromInline
    func decodeAttribute<T>(at index: Int, as type: T.Type) -> T {
        let attributeIndex = attributeSlot(forProperty: index)
        let stored = storedValue(at: attributeIndex)
        let attribute = entity.attributes[attributeIndex]
        if let value = attribute.codec.decode(stored) as? T { return value }
        if stored == .null, !attribute.isOptional {
            if isInaccessible {
                fatalError("\(entity.name) \(objectIDDescription) was deleted elsewhere (its row is gone), and \(entity.name).\(attribute.name) has no default value to show; give it one, or check isDeleted first.")
            }
            fatalError("\(entity.name).\(attribute.name) was read before a value was set; give it a value or a default.")
        }
        fatalError("\(entity.name).\(attribute.name) holds a stored \(stored.kindName) that is not \(English.a(T.self)).")
    }

    /// Writes the attribute declared at property position `index`. Generated accessors call this.
    public func setValue<T>(_ value: T, at index: Int) {
        let attributeIndex = attributeSlot(forProperty: index)
        let stored: StoredValue
        do {
            stored = try entity.attributes[attributeIndex].codec.encode(value)
        } catch {
            fatalError("\(entity.name).\(entity.attributes[attributeIndex].name) cannot store \(English.a(Swift.type(of: value))): \(error.message)")
        }
        setStoredValue(stored, at: attributeIndex)
    }

    /// Writes the attribute declared at property position `index` of `owner`. Generated setters
    /// call this form, which relationships need (see ``setValue(_:at:of:)-(M?,_,_)``).
    public func setValue<T>(_ value: T, at index: Int, of owner: any BackedObject) {
        setValue(value, at: index)
    }

    private func attributeSlot(forProperty index: Int) -> Int {
        let entry = index < entity.propertyTable.count ? entity.propertyTable[index] : index
        guard entry >= 0 else {
            fatalError("\(entity.name).\(entity.relationships[-1 - entry].name) is a relationship, read as an attribute.")
        }
        return entry
    }

    @usableFromInline
    func relationshipIndex(forProperty index: Int) -> Int {
        let entry = entity.propertyTable[index]
        guard entry < 0 else {
            fatalError("\(entity.name).\(entity.attributes[entry].name) is an attribute, read as a relationship.")
        }
        return -1 - entry
    }

    // MARK: Relationship accessors

    /// Reads an optional to-one relationship. Generated accessors call this.
    ///
    /// Returns the registered object, or a fault that loads its values when first used; no I/O
    /// happens here unless this object itself is a fault.
    public func value<M: PersistentModel>(at index: Int, as type: M?.Type) -> M? {
        relatedObject(relationshipIndex(forProperty: index)).map { cast($0, M.self) }
    }

    /// Reads a required to-one relationship. Traps if it was never set.
    public func value<M: PersistentModel>(at index: Int, as type: M.Type) -> M {
        let j = relationshipIndex(forProperty: index)
        guard let object = relatedObject(j) else {
            if isInaccessible {
                fatalError("\(entity.name) \(objectIDDescription) was deleted elsewhere (its row is gone), so its required relationship '\(entity.relationships[j].name)' has no object; check isDeleted first.")
            }
            fatalError("\(entity.name).\(entity.relationships[j].name) was read before it was set; set it before reading it.")
        }
        return cast(object, M.self)
    }

    /// Reads a to-many relationship. The first read loads every destination's key (one query);
    /// the objects are faults until used. `@inlinable`, so that building the `Set` is
    /// specialized for `M` in the model's module (no generic metadata lookups per read).
    @inlinable
    public func value<M: PersistentModel>(at index: Int, as type: Set<M>.Type) -> Set<M> {
        let objects = relatedObjects(relationshipIndex(forProperty: index))
        var set = Set<M>(minimumCapacity: objects.count)
        for object in objects { set.insert(cast(object, M.self)) }
        return set
    }

    /// Reads an ordered to-many relationship, in its order.
    @inlinable
    public func value<M: PersistentModel>(at index: Int, as type: [M].Type) -> [M] {
        relatedObjects(relationshipIndex(forProperty: index)).map { cast($0, M.self) }
    }

    /// Writes an optional to-one relationship of `owner`, updating the inverse at once.
    ///
    /// When `owner` was never inserted and `value` is in a context, `owner` is inserted into
    /// that context first (as SwiftData does); when neither is, the relationship is kept until
    /// `owner` is inserted.
    public func setValue<M: PersistentModel>(_ value: M?, at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: value.map { [$0] } ?? [], owner: owner)
    }

    /// Writes a required to-one relationship of `owner`, updating the inverse at once.
    public func setValue<M: PersistentModel>(_ value: M, at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: [value], owner: owner)
    }

    /// Writes a to-many relationship of `owner`, updating the inverse of every object added or
    /// removed.
    public func setValue<M: PersistentModel>(_ value: Set<M>, at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: value.sorted { $0._loomBacking.key < $1._loomBacking.key }, owner: owner)
    }

    /// Writes an ordered to-many relationship of `owner`: its objects in this order, each once
    /// (the first occurrence of a repeated object counts).
    public func setValue<M: PersistentModel>(_ value: [M], at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: value, owner: owner)
    }

    /// `object` as an `M`: a type comparison for the usual exact match, a dynamic cast for a
    /// subclass, a trap naming the object for anything else.
    @inlinable
    func cast<M: PersistentModel>(_ object: any BackedObject, _: M.Type) -> M {
        if type(of: object) == M.self { return unsafeDowncast(object, to: M.self) }
        guard let model = object as? M else { castFailed(object, M.self) }
        return model
    }

    @usableFromInline
    func castFailed<M>(_ object: any BackedObject, _: M.Type) -> Never {
        fatalError("\(object._loomBacking.entity.name) \(object._loomBacking.objectIDDescription) is not \(English.a(M.self)).")
    }

    func relatedObject(_ j: Int) -> (any BackedObject)? {
        if state == .detached { return detachedRelated[j]?.first }
        if state != .loaded { prepareForAccess() }
        ConcurrencyDebugging.check(self)
        guard let context else { return nil }
        return context.destinationObject(of: self, relationship: j)
    }

    @usableFromInline
    func relatedObjects(_ j: Int) -> [any BackedObject] {
        if state == .detached { return detachedRelated[j] ?? [] }
        if state != .loaded { prepareForAccess() }
        ConcurrencyDebugging.check(self)
        guard let context else { return [] }
        return context.destinationObjects(of: self, relationship: j)
    }

    func setRelated(_ j: Int, to objects: [any BackedObject], owner: (any BackedObject)?) {
        if state == .detached {
            if let owner, let context = objects.lazy.compactMap({ $0._loomBacking.context }).first {
                // Join the context of the object it is being related to.
                do { try context.insertObject(owner) } catch { fatalError(error.message) }
            }
            if state == .detached {
                // Kept until the object is inserted (or, inserted while no key could be
                // reserved, until it gets its key); inserting it then relates it (and inserts
                // the new objects it relates to).
                var unique: [any BackedObject] = []
                for object in objects where !unique.contains(where: { $0 === object }) { unique.append(object) }
                detachedRelated[j] = unique
                return
            }
        }
        if state != .loaded {
            prepareForAccess()
            if state == .fault { return }   // its row could not be read: see setStoredValue
        }
        ConcurrencyDebugging.check(self)
        guard let context else {
            fatalError("\(entity.name) \(objectIDDescription).\(entity.relationships[j].name) was changed after the object left its context (it was deleted).")
        }
        if isDeleted {
            fatalError("\(entity.name) \(objectIDDescription).\(entity.relationships[j].name) was changed after the object was deleted.")
        }
        context.setRelationship(j, of: self, to: objects)
    }

    // MARK: Stored values

    func storedValue(at index: Int) -> StoredValue {
        if state != .loaded { prepareForAccess() }
        ConcurrencyDebugging.check(self)
        return values[index]
    }

    func setStoredValue(_ stored: StoredValue, at index: Int) {
        if state != .loaded {
            if state == .detached {
                // A new object, set up by its initializer: no context, nothing to track.
                applyDefaultsIfNeeded()
                values[index] = stored
                return
            }
            prepareForAccess()
            // A fault whose row could not be read: the change is not kept (the context reports
            // the store's error at the next save; see `pendingStoreError`).
            if state == .fault { return }
        }
        ConcurrencyDebugging.check(self)
        if isDeleted {
            fatalError("\(entity.name) \(objectIDDescription) was changed after it was deleted.")
        }
        values[index] = stored
        guard let context else { return }
        if !isInserted && !isUpdated {
            isUpdated = true
            context.objectDidChange(self)
        }
        // An inserted object's later changes are events too (live queries follow them).
        if !changedSinceEvent { context.noteEventChange(self) }
    }

    /// Fires the fault, or traps with the reason the object cannot be used.
    func prepareForAccess() {
        switch state {
        case .fault:
            guard let context else {
                fatalError("\(entity.name) \(objectIDDescription) was used after its context was deallocated.")
            }
            ConcurrencyDebugging.check(self)
            context.fulfillFault(self)
        case .invalidated:
            fatalError("\(entity.name) \(objectIDDescription) was used after \(invalidationReason ?? "its context was reset"); fetch it again from a context.")
        case .detached:
            applyDefaultsIfNeeded()
        case .loaded:
            break
        }
    }

    // MARK: Identity and state

    var objectIDDescription: String { key == 0 ? "(not inserted)" : "\(entity.name)/\(key)" }

    func requireObjectID() -> AnyObjectID {
        guard key != 0, state != .invalidated, let storeIdentifier else {
            if state == .invalidated {
                fatalError("\(entity.name) \(objectIDDescription) was used after \(invalidationReason ?? "its context was reset").")
            }
            fatalError("This \(entity.name) has no object ID: insert it into a context first.")
        }
        return AnyObjectID(storeIdentifier: storeIdentifier, entityName: entity.name, primaryKey: key)
    }

    /// The store the object belongs to, set when it is registered; kept when the object leaves
    /// its context (deleted elsewhere), so that its ID stays readable.
    var storeIdentifier: UUID? {
        get { storeIdentity?.uuid }
    }
    func load(_ row: StoreRow) {
        values = row.values
        committed = row.values
        version = row.version
        state = .loaded
        isInaccessible = false
        holdsFetchedRow = false
    }

    /// Keeps a fetched row in a fault, which stays a fault (``isFault``) until first used;
    /// `age` says when it was read (see ``heldRowAge``).
    func attach(_ row: StoreRow, age: UInt32) {
        values = row.values
        committed = row.values
        version = row.version
        heldRowAge = age
        holdsFetchedRow = true
    }

    /// Forgets a fault's fetched row: its next use reads the current one.
    func dropFetchedRow() {
        guard holdsFetchedRow else { return }
        holdsFetchedRow = false
        values = []
    }

    /// The object that owns this backing is being destroyed: its context's registry must no
    /// longer refer to it. Runs on the context's isolation, where the object's last reference
    /// went away (objects never leave it).
    func ownerDidDeinit() {
        guard let context else { return }
        // An object released off its context's isolation (through an unsafe escape) would race
        // with the registry: with concurrency debugging on, that traps here, naming the object.
        ConcurrencyDebugging.check(self)
        context.unregister(self)
    }

    func invalidate(reason: String) {
        state = .invalidated
        invalidationReason = reason
        holdsFetchedRow = false
        values = []
        toMany = [:]
        context = nil
    }

    /// What an object shows when its row cannot be read or is gone: optional attributes `nil`,
    /// others their default or their type's zero value, no related objects.
    var placeholderValues: [StoredValue] {
        var placeholder: [StoredValue] = entity.attributes.map { $0.placeholderStoredValue ?? .null }
        placeholder += repeatElement(StoredValue.null, count: entity.storedValueCount - entity.attributes.count)
        return placeholder
    }

    /// Shows placeholder values in a fault whose row could not be read (the store failed): as an
    /// inaccessible object's, never stale ones. The object stays a fault and in its context.
    func showPlaceholderValues() {
        values = placeholderValues
        holdsFetchedRow = false
    }

    /// Turns the object into a deleted one that left its context because its row is gone:
    /// optional attributes read `nil`, others their default or their type's zero value,
    /// relationships are empty. Nothing stale is ever shown.
    func becomeInaccessible() {
        values = placeholderValues
        holdsFetchedRow = false
        committed = nil
        state = .loaded
        isInaccessible = true
        isDeleted = true
        isUpdated = false
        isInserted = false
        toMany = [:]
        context = nil
    }

    /// The slots whose value differs from the last saved or fetched one (every set slot for an
    /// object never saved), with their current values. The one definition of "changed" that
    /// saves, merges, conflict resolution, events and `changedValues()` share.
    func changedSlots() -> [(Int, StoredValue)] {
        guard let committed else {
            return values.enumerated().filter { !$0.element.isNull }.map { ($0.offset, $0.element) }
        }
        var out: [(Int, StoredValue)] = []
        for i in values.indices {
            let now = values[i]
            if !committed[i].isIdentical(to: now) { out.append((i, now)) }
        }
        return out
    }

    func changedValues() -> [String: StoredValue] {
        if state == .fault { return [:] }
        var out: [String: StoredValue] = [:]
        if committed == nil {
            // Never saved: every value is a change, unset optionals included.
            for slot in 0..<entity.storedValueCount {
                if case .order = entity.storedValue(at: slot) { continue }
                out[entity.storedValueName(at: slot)] = values[slot]
            }
            return out
        }
        for (slot, value) in changedSlots() {
            if case .order = entity.storedValue(at: slot) { continue }
            out[entity.storedValueName(at: slot)] = value
        }
        return out
    }

    func committedValues(forKeys keys: [String]?) -> [String: StoredValue] {
        if state == .fault, let context { context.fulfillFault(self) }
        guard let committed else { return [:] }
        var out: [String: StoredValue] = [:]
        for slot in 0..<entity.storedValueCount {
            if case .order = entity.storedValue(at: slot) { continue }
            let name = entity.storedValueName(at: slot)
            if keys?.contains(name) ?? true { out[name] = committed[slot] }
        }
        return out
    }
}

/// The keys of a loaded to-many relationship: in order for an ordered one, by key otherwise.
struct MemberList: Equatable {
    private(set) var keys: [Int64] = []
    /// The keys as a set, for lists too long to search: most lists are short, and building a
    /// set for each was a third of a small to-many fault's own cost.
    private var set: Set<Int64>?
    private static let searchLimit = 16
    /// The saved members' rows as the query that loaded the list read them, sorted by key: a
    /// member's new fault takes its row, so that using it needs no lookup (the query's change
    /// generation, ``rowsReadAt``, still catches rows a later save replaced). Empty when the
    /// rows went to the shared row cache instead (see `faultsHoldFetchedRows`).
    private(set) var rows: [StoreRow] = []
    /// The coordinator's change generation before the query that read ``rows``: their faults'
    /// age (see ``ObjectBacking/heldRowAge``).
    private(set) var rowsReadAt: UInt64 = 0

    /// Keeps the saved members' rows, read by a query that began at `generation`.
    mutating func keep(_ rows: [StoreRow], readAt generation: UInt64) {
        self.rows = rows
        rowsReadAt = generation
    }

    init(_ keys: [Int64] = []) {
        if zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) {
            // Increasing, so distinct (a loaded list, sorted by key): shared as it is, instead
            // of appended key by key into a growing array, for every to-many fault.
            self.keys = keys
            if keys.count > Self.searchLimit { set = Set(keys) }
        } else if keys.count <= Self.searchLimit {
            for key in keys where !self.keys.contains(key) { self.keys.append(key) }
        } else {
            var set = Set<Int64>(minimumCapacity: keys.count)
            for key in keys where set.insert(key).inserted { self.keys.append(key) }
            self.set = set
        }
    }

    static func == (lhs: MemberList, rhs: MemberList) -> Bool { lhs.keys == rhs.keys }

    /// The row read for a member, if any.
    func row(for key: Int64) -> StoreRow? {
        var low = 0, high = rows.count
        while low < high {
            let middle = (low + high) / 2
            if rows[middle].key < key { low = middle + 1 } else { high = middle }
        }
        return low < rows.count && rows[low].key == key ? rows[low] : nil
    }

    func contains(_ key: Int64) -> Bool { set?.contains(key) ?? keys.contains(key) }

    mutating func append(_ key: Int64) {
        guard !contains(key) else { return }
        keys.append(key)
        if set != nil {
            set?.insert(key)
        } else if keys.count > Self.searchLimit {
            set = Set(keys)
        }
    }

    mutating func remove(_ key: Int64) {
        guard contains(key) else { return }
        set?.remove(key)
        keys.removeAll { $0 == key }
    }

    var count: Int { keys.count }
}

extension StoredValue {
    /// One bit per case, for checking a value against a slot's ``EntityDescription/acceptedKinds``
    /// with one AND.
    var kindBit: UInt8 {
        switch self {
        case .null: 1
        case .integer: 2
        case .real: 4
        case .text: 8
        case .blob: 16
        }
    }

    package var kindName: String {
        switch self {
        case .null: "NULL"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }

    /// An ordered relationship's keys, packed as the order slot stores them.
    static func order(_ keys: [Int64]) -> StoredValue {
        var data = Data(capacity: keys.count * 8)
        for key in keys { withUnsafeBytes(of: key.littleEndian) { data.append(contentsOf: $0) } }
        return .blob(data)
    }

    /// The keys an order slot holds; empty for NULL or a malformed value.
    var orderKeys: [Int64] {
        guard case .blob(let data) = self, data.count % 8 == 0 else { return [] }
        var keys: [Int64] = []
        keys.reserveCapacity(data.count / 8)
        var index = data.startIndex
        while index < data.endIndex {
            var raw: UInt64 = 0
            for shift in 0..<8 { raw |= UInt64(data[index + shift]) << (8 * UInt64(shift)) }
            keys.append(Int64(bitPattern: raw))
            index += 8
        }
        return keys
    }
}
