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
    /// The current values (see ``values``), stored.
    ///
    /// `@exclusivity(unchecked)`, like ``state``: every attribute read reads both, and a
    /// run-time exclusivity check costs more than the read. Safe: they are only read and
    /// assigned (element assignments included), never passed `inout` or modified in place
    /// across a call that could reach them again.
    @usableFromInline @exclusivity(unchecked)
    var currentValues: [StoredValue]
    /// The committed values when they are not the current ones (see ``committed``).
    private var savedValues: [StoredValue]?

    /// The current values, one per slot (see ``EntityDescription``). A required attribute of a
    /// new object that was never set holds NULL, which a read traps on and a save refuses.
    ///
    /// Until the first change after a load or a save they are also the ``committed`` values,
    /// held once (``committedIsCurrent``): a fetched object that is only read never keeps a
    /// second reference to its row's values. Every change goes through here, which sets the
    /// committed values apart first.
    var values: [StoredValue] {
        @inline(__always) get { currentValues }
        @inline(__always) set {
            keepCommittedApart()
            currentValues = newValue
        }
        @inline(__always) _modify {
            keepCommittedApart()
            yield &currentValues
        }
    }

    /// The values as last fetched or saved; `nil` for objects never saved.
    var committed: [StoredValue]? {
        @inline(__always) get { committedIsCurrent ? currentValues : savedValues }
        set {
            savedValues = newValue
            committedIsCurrent = false
        }
    }
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
        /// The context the object left when another context or process deleted its row.
        weak var formerContext: ManagedObjectContext?
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
    /// Whether the committed values are the current ones (see ``values``). In a byte the
    /// object's bin had free.
    @exclusivity(unchecked) private var committedIsCurrent = false
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

    /// The extras of every new object whose to-many lists are all loaded and empty, and that
    /// has nothing else out of line (see ``startEmptyLists()``): shared and never written, so
    /// that an object inserted and never related costs no allocation for its lists. Being never
    /// written, it is safe to share between contexts on any thread (only compared by identity).
    /// ``makeExtras()`` gives an object its own before any write.
    nonisolated(unsafe) private static let emptyListsExtras = Extras()

    /// Why the object is invalid, for the trap message.
    var invalidationReason: String? {
        get { extras?.invalidationReason }
        set {
            if newValue == nil && invalidationReason == nil { return }
            makeExtras().invalidationReason = newValue
        }
    }
    /// The loaded to-many relationships, by relationship index: the destinations' keys. Out of
    /// line (in ``Extras``): most objects never load one.
    var toMany: [Int: MemberList] {
        get {
            guard let extras else { return [:] }
            return extras === Self.emptyListsExtras ? entity.emptyToManyLists : extras.toMany
        }
        set {
            if newValue.isEmpty && extras == nil { return }
            makeExtras().toMany = newValue
        }
        _modify {
            let extras = makeExtras()
            yield &extras.toMany
        }
    }

    /// Gives a new object (its key new, so nothing anywhere refers to it yet) an empty, loaded
    /// list for each of its to-many relationships: the shared ``emptyListsExtras`` until one
    /// changes, so that an object never related allocates nothing for them.
    func startEmptyLists() {
        let lists = entity.emptyToManyLists
        if lists.isEmpty { return }
        if extras == nil {
            extras = Self.emptyListsExtras
        } else {
            makeExtras().toMany.merge(lists) { _, empty in empty }
        }
    }

    /// The object's own extras, made on first need (or in place of the shared
    /// ``emptyListsExtras``, keeping its lists).
    private func makeExtras() -> Extras {
        if let extras, extras !== Self.emptyListsExtras { return extras }
        let made = Extras()
        if extras != nil { made.toMany = entity.emptyToManyLists }
        extras = made
        return made
    }
    /// Relationships set while the object was detached, applied when it is inserted.
    var detachedRelated: [Int: [any BackedObject]] {
        get { extras?.detachedRelated ?? [:] }
        set {
            if newValue.isEmpty && detachedRelated.isEmpty { return }
            makeExtras().detachedRelated = newValue
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
        self.currentValues = []
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
        self.currentValues = []
        self.key = key
        self.context = context
        self.storeIdentity = context.coordinator.identity
    }

    // MARK: Stored values

    func storedValue(at index: Int) -> StoredValue {
        if state != .loaded { prepareForAccess() }
        ConcurrencyDebugging.check(self)
        return values[index]
    }

    /// Sets stored value `index`. `owner`, when the caller has it, is the object this backing
    /// belongs to: the context then records the change without looking the object up.
    func setStoredValue(_ stored: StoredValue, at index: Int, of owner: (any BackedObject)? = nil) {
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
        guard let context else {
            // No context: a new object, or one that left its context because another context
            // or process deleted it (a merge, or a fault that found its row gone) — a race the
            // caller cannot rule out, so not a trap. The value is kept for code still showing
            // the object; the context it left refuses its next save, which would otherwise
            // save the rest of the change without this part.
            values[index] = stored
            if isDeleted, let former = extras?.formerContext {
                former.recordChangeToDeletedObject(self, property: entity.storedValueName(at: index))
            }
            return
        }
        if isDeleted {
            fatalError("\(entity.name) \(objectIDDescription) was changed after it was deleted.")
        }
        // Undo: a load and a test when it is off.
        if let stack = context.undoStack, stack.isRecording, !values[index].isIdentical(to: stored) {
            context.recordUndoValue(of: self, slot: index, old: values[index], in: stack)
        }
        values[index] = stored
        if !isInserted && !isUpdated {
            isUpdated = true
            context.objectDidChange(self, owner: owner)
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
        var row = row
        load(taking: &row)
    }

    /// ``load(_:)`` taking the row's values instead of sharing them: `row` is left without
    /// them. For a fetch that discards its rows, so that neither the object nor the rows' end
    /// counts a reference to them.
    func load(taking row: inout StoreRow) {
        takeCommitted(&row.values)
        version = row.version
        state = .loaded
        isInaccessible = false
        holdsFetchedRow = false
    }

    /// Keeps a fetched row in a fault, which stays a fault (``isFault``) until first used;
    /// `age` says when it was read (see ``heldRowAge``).
    func attach(_ row: StoreRow, age: UInt32) {
        var row = row
        attach(taking: &row, age: age)
    }

    /// ``attach(_:age:)`` taking the row's values (see ``load(taking:)``).
    func attach(taking row: inout StoreRow, age: UInt32) {
        takeCommitted(&row.values)
        version = row.version
        heldRowAge = age
        holdsFetchedRow = true
    }

    /// Makes `fetched` both the current and the committed values, leaving it empty.
    @inline(__always)
    private func takeCommitted(_ fetched: inout [StoredValue]) {
        swap(&currentValues, &fetched)
        fetched = []
        savedValues = nil
        committedIsCurrent = true
    }

    /// The current values were saved: they are the committed ones now.
    func commitCurrentValues() {
        savedValues = nil
        committedIsCurrent = true
    }

    /// Sets the committed values apart before the current ones change: the first change after
    /// a load or a save is where they part (one reference more; the array is copied by the
    /// change itself, as any shared array is).
    @inline(__always)
    private func keepCommittedApart() {
        if committedIsCurrent {
            savedValues = currentValues
            committedIsCurrent = false
        }
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

    /// Remembers the context a deletion made elsewhere takes the object out of (see
    /// ``setStoredValue(_:at:)``), and leaves it.
    func leaveContextAsDeletedElsewhere() {
        if let context { makeExtras().formerContext = context }
        context = nil
    }

    /// Turns the object into a deleted one that left its context because its row is gone:
    /// optional attributes read `nil`, others their default or their type's zero value,
    /// relationships are empty. Nothing stale is ever shown.
    func becomeInaccessible() {
        leaveContextAsDeletedElsewhere()
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
