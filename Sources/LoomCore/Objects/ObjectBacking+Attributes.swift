/// The attribute accessors that `@Model` generates calls to: reads and writes by property
/// position, with the fast path for a loaded object inlined into the model's module.
extension _ObjectBacking {
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
        setStoredAttribute(value.storedValue, at: index, of: owner)
    }

    /// Writes an optional attribute of a ``PersistentValue`` type.
    @inlinable
    public func setValue<T: PersistentValue>(_ value: T?, at index: Int, of owner: any BackedObject) {
        setStoredAttribute(value?.storedValue ?? .null, at: index, of: owner)
    }

    /// The stored value of the attribute declared at property position `index`. Inlined into
    /// generated accessors: a loaded object's value is read straight from its slot; anything
    /// else (a fault, a check to make, a property that is not an attribute) takes the full path.
    @inlinable @inline(__always)
    func storedAttribute(at index: Int) -> StoredValue {
        if state == .loaded, !ConcurrencyDebugging.checksEnabled {
            let table = entity.propertyTable
            if index >= 0, index < table.count, table[index] >= 0 { return currentValues[table[index]] }
        }
        return storedAttributeFullPath(at: index)
    }

    /// ``storedAttribute(at:)`` for anything but a loaded object with checks off: fires a fault,
    /// runs the concurrency check, traps for a relationship or an invalidated object.
    @usableFromInline
    func storedAttributeFullPath(at index: Int) -> StoredValue {
        storedValue(at: attributeSlot(forProperty: index))
    }

    /// Sets the stored value of the attribute declared at property position `index` of `owner`,
    /// the object this backing belongs to.
    @usableFromInline
    func setStoredAttribute(_ stored: StoredValue, at index: Int, of owner: any BackedObject) {
        setStoredValue(stored, at: attributeSlot(forProperty: index), of: owner)
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

    /// Writes the attribute declared at property position `index`, through its codec, on the
    /// object's context's isolation. For accessors written by hand: generated setters call the
    /// form that also passes the object (`setValue(_:at:of:)`), which lets its context record
    /// the first change without looking the object up.
    public func setValue<T>(_ value: T, at index: Int) {
        let attributeIndex = attributeSlot(forProperty: index)
        setStoredValue(encode(value, at: attributeIndex), at: attributeIndex)
    }

    /// `value` as attribute `attributeIndex` stores it, through its codec; traps saying why it
    /// cannot be.
    private func encode<T>(_ value: T, at attributeIndex: Int) -> StoredValue {
        do {
            return try entity.attributes[attributeIndex].codec.encode(value)
        } catch {
            fatalError("\(entity.name).\(entity.attributes[attributeIndex].name) cannot store \(English.a(Swift.type(of: value))): \(error.message)")
        }
    }

    /// Writes the attribute declared at property position `index` of `owner`. Generated setters
    /// call this form, which relationships need (see ``setValue(_:at:of:)-(M?,_,_)``).
    public func setValue<T>(_ value: T, at index: Int, of owner: any BackedObject) {
        let attributeIndex = attributeSlot(forProperty: index)
        setStoredValue(encode(value, at: attributeIndex), at: attributeIndex, of: owner)
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
}
