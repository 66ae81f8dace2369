/// The relationship accessors that `@Model` generates calls to: reads give registered objects
/// or faults, writes go to the context's ``ObjectGraph``, which keeps the inverses in step.
extension _ObjectBacking {
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
        setRelated(relationshipIndex(forProperty: index), to: value.map { [$0 as any BackedObject] } ?? [], owner: owner)
    }

    /// Writes a required to-one relationship of `owner`, updating the inverse at once.
    public func setValue<M: PersistentModel>(_ value: M, at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: [value], owner: owner)
    }

    /// Writes a to-many relationship of `owner`, updating the inverse of every object added or
    /// removed.
    public func setValue<M: PersistentModel>(_ value: Set<M>, at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: Self.existentials(value).sorted { $0._loomBacking.key < $1._loomBacking.key }, owner: owner)
    }

    /// Writes an ordered to-many relationship of `owner`: its objects in this order, each once
    /// (the first occurrence of a repeated object counts).
    public func setValue<M: PersistentModel>(_ value: [M], at index: Int, of owner: any BackedObject) {
        setRelated(relationshipIndex(forProperty: index), to: Self.existentials(value), owner: owner)
    }

    /// The objects of a collection of models as `any BackedObject`s, each converted with the
    /// conformance the generic parameter brings. Passing `[M]` where `[any BackedObject]` is
    /// expected instead casts the array at run time, element by element, through the runtime's
    /// conformance lookup.
    private static func existentials<C: Collection>(_ models: C) -> [any BackedObject] where C.Element: PersistentModel {
        models.map { $0 as any BackedObject }
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
        return context.graph.destinationObjects(of: self, relationship: j)
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
            // Deleted elsewhere (see setStoredValue): the context it left refuses its next save.
            if isDeleted, let former = extras?.formerContext {
                former.recordChangeToDeletedObject(self, property: entity.relationships[j].name)
                return
            }
            fatalError("\(entity.name) \(objectIDDescription).\(entity.relationships[j].name) was changed after the object left its context (it was deleted).")
        }
        if isDeleted {
            fatalError("\(entity.name) \(objectIDDescription).\(entity.relationships[j].name) was changed after the object was deleted.")
        }
        context.setRelationship(j, of: self, object: owner, to: objects)
    }
}
