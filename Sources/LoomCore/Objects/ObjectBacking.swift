/// The storage behind one managed object: its values, its identity, its state in its context.
///
/// `@Model` generates a stored `_loomBacking` and accessors that call ``value(at:as:)`` and
/// ``setValue(_:at:)``; user code never needs this type. Not `Sendable`: it belongs to the
/// context its object is registered in.
public final class ObjectBacking {
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

    let entity: EntityDescription
    var state: State
    /// The current values; `nil` at a position means "never set" (only for new objects).
    var values: [StoredValue?]
    /// The values as last fetched or saved; `nil` for objects never saved.
    var committed: [StoredValue]?
    /// The version of the row the committed values came from.
    var version: Int64 = 0
    /// The primary key; 0 until inserted.
    var key: Int64 = 0
    weak var context: ManagedObjectContext?
    var isInserted = false
    var isUpdated = false
    var isDeleted = false
    /// Whether the object is already listed in its context's current event.
    var changedSinceEvent = false
    /// Why the object is invalid, for the trap message.
    var invalidationReason: String?

    /// Creates storage for a new object of `entity`, holding the entity's default values
    /// (and `nil` for optional attributes without one).
    ///
    /// The defaults are filled in on first use: `@Model` classes create one of these as the
    /// initial value of `_loomBacking` even when Loom then hands them a fetched object's backing,
    /// so creating one must cost no more than an allocation.
    public init(entity: EntityDescription) {
        self.entity = entity
        self.state = .detached
        self.values = []
    }

    /// Gives a new object its default values, once.
    @inline(__always)
    func applyDefaultsIfNeeded() {
        guard state == .detached || isInserted, values.count != entity.attributes.count else { return }
        values = entity.attributes.map { attribute in
            if let d = attribute.defaultStoredValue { return d }
            return attribute.isOptional ? .null : nil
        }
    }

    init(entity: EntityDescription, key: Int64, context: ManagedObjectContext) {
        self.entity = entity
        self.state = .fault
        self.values = []
        self.key = key
        self.context = context
    }

    // MARK: Accessors

    /// Reads attribute `index` as a `T`. Generated accessors call this.
    ///
    /// Loads the object's values if it is a fault. Traps if the object is used off its context's
    /// isolation (with concurrency debugging on), after its context was reset, or if a required
    /// attribute is read before it was ever set.
    public func value<T>(at index: Int, as type: T.Type) -> T {
        let stored = storedValue(at: index)
        if let value = entity.attributes[index].codec.decode(stored) as? T { return value }
        let attribute = entity.attributes[index]
        if stored == .null, !attribute.isOptional {
            preconditionFailure("\(entity.name).\(attribute.name) was read before a value was set; give it a value or a default.")
        }
        preconditionFailure("\(entity.name).\(attribute.name) holds a stored \(stored.kindName) that is not a \(T.self).")
    }

    /// Writes attribute `index`. Generated accessors call this.
    public func setValue<T>(_ value: T, at index: Int) {
        let stored: StoredValue
        do {
            stored = try entity.attributes[index].codec.encode(value)
        } catch {
            preconditionFailure("\(entity.name).\(entity.attributes[index].name) cannot store a \(Swift.type(of: value)): \(error.message)")
        }
        setStoredValue(stored, at: index)
    }

    func storedValue(at index: Int) -> StoredValue {
        if state != .loaded { prepareForAccess() }
        ConcurrencyDebugging.check(self)
        return values[index] ?? .null
    }

    func setStoredValue(_ stored: StoredValue, at index: Int) {
        if state != .loaded { prepareForAccess() }
        ConcurrencyDebugging.check(self)
        if isDeleted {
            preconditionFailure("\(entity.name) \(objectIDDescription) was changed after it was deleted.")
        }
        values[index] = stored
        if !isInserted, let context {
            if !isUpdated {
                isUpdated = true
                context.objectDidChange(self)
            }
            if !changedSinceEvent { context.noteEventChange(self) }
        }
    }

    /// Fires the fault, or traps with the reason the object cannot be used.
    private func prepareForAccess() {
        switch state {
        case .fault:
            guard let context else {
                preconditionFailure("\(entity.name) \(objectIDDescription) was used after its context was deallocated.")
            }
            ConcurrencyDebugging.check(self)
            context.fulfillFault(self)
        case .invalidated:
            preconditionFailure("\(entity.name) \(objectIDDescription) was used after \(invalidationReason ?? "its context was reset"); fetch it again from a context.")
        case .detached:
            applyDefaultsIfNeeded()
        case .loaded:
            break
        }
    }

    // MARK: Identity and state

    var objectIDDescription: String { key == 0 ? "(not inserted)" : "\(entity.name)/\(key)" }

    func requireObjectID() -> AnyObjectID {
        guard key != 0, let context else {
            if state == .invalidated {
                preconditionFailure("\(entity.name) \(objectIDDescription) was used after \(invalidationReason ?? "its context was reset").")
            }
            preconditionFailure("This \(entity.name) has no object ID: insert it into a context first.")
        }
        return AnyObjectID(storeIdentifier: context.coordinator.storeIdentifier, entityName: entity.name, primaryKey: key)
    }

    func load(_ row: StoreRow) {
        values = row.values.map { $0 }
        committed = row.values
        version = row.version
        state = .loaded
    }

    func invalidate(reason: String) {
        state = .invalidated
        invalidationReason = reason
        values = []
        context = nil
    }

    func changedValues() -> [String: StoredValue] {
        if state == .fault { return [:] }
        var out: [String: StoredValue] = [:]
        for (i, attribute) in entity.attributes.enumerated() {
            let now = values[i] ?? .null
            if let committed {
                if !committed[i].isSame(as: now) || committed[i].kindName != now.kindName { out[attribute.name] = now }
            } else {
                out[attribute.name] = now
            }
        }
        return out
    }

    func committedValues(forKeys keys: [String]?) -> [String: StoredValue] {
        if state == .fault, let context { context.fulfillFault(self) }
        guard let committed else { return [:] }
        var out: [String: StoredValue] = [:]
        for (i, attribute) in entity.attributes.enumerated() where keys?.contains(attribute.name) ?? true {
            out[attribute.name] = committed[i]
        }
        return out
    }
}

extension StoredValue {
    var kindName: String {
        switch self {
        case .null: "NULL"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }
}
