/// Telling the observers of `@Model` objects (the Observation framework) about changes that do
/// not go through a property's setter: merges, refreshes, rollbacks, inverse relationships.
///
/// A setter tells its own property's observers itself. Everything here runs on the context's
/// isolation and tells only objects that may be observed (``BackedObject/_loomMayBeObserved``):
/// for the others it costs a registry lookup or less.
extension ManagedObjectContext {
    /// The registered object of `backing`, if anything may observe it.
    private func observedObject(of backing: ObjectBacking) -> (any BackedObject)? {
        observedObject(of: backing.entity, key: backing.key, backing: backing)
    }

    private func observedObject(of entity: EntityDescription, key: Int64, backing: ObjectBacking? = nil) -> (any BackedObject)? {
        guard let entry = identityMap[RowCacheKey(entity: ObjectIdentifier(entity), key: key)],
              backing == nil || entry.backing === backing,
              entry.object._loomMayBeObserved
        else { return nil }
        return entry.object
    }

    /// Tells observers which properties of a loaded object changed when its stored values went
    /// from `before` to `after`: each property whose slot differs, and the inverse to-many
    /// relationship of every object a changed foreign key left or now leads to.
    func notifyObservers(of backing: ObjectBacking, valuesFrom before: [StoredValue], to after: [StoredValue]) {
        guard before.count == after.count else { return }
        let entity = backing.entity
        let object = observedObject(of: backing)
        for slot in before.indices where !before[slot].isIdentical(to: after[slot]) {
            object?._loomPropertyDidChange(at: entity.slotProperties[slot])
            guard slot >= entity.attributes.count else { continue }
            let r = coordinator.schema.relationship(entity.slotRelationships[slot - entity.attributes.count], of: entity)
            guard case .foreignKey = r.storage else { continue }
            for case .integer(let owner) in [before[slot], after[slot]] {
                notifyObservers(ofRelationship: r.inverseIndex, of: r.destination, key: owner)
            }
        }
    }

    /// Tells the observers of one stored value of an object that it changed.
    func notifyObservers(ofSlot slot: Int, of backing: ObjectBacking) {
        observedObject(of: backing)?._loomPropertyDidChange(at: backing.entity.slotProperties[slot])
    }

    /// Tells the observers of relationship `j` of the registered object for `key`, if any, that
    /// it changed.
    func notifyObservers(ofRelationship j: Int, of entity: EntityDescription, key: Int64) {
        observedObject(of: entity, key: key)?._loomPropertyDidChange(at: entity.relationshipProperties[j])
    }

    /// Tells the observers of the named properties of an object that they changed (a save
    /// changed them), or of every property when the names are unknown.
    func notifyObservers(of backing: ObjectBacking, properties names: Set<String>?) {
        guard let object = observedObject(of: backing) else { return }
        let entity = backing.entity
        guard let names else {
            for index in entity.propertyTable.indices { object._loomPropertyDidChange(at: index) }
            return
        }
        for name in names {
            if let a = entity.attributeIndex(named: name) {
                object._loomPropertyDidChange(at: entity.slotProperties[a])
            } else if let j = entity.relationshipIndex(named: name) {
                object._loomPropertyDidChange(at: entity.relationshipProperties[j])
            }
        }
    }
}
