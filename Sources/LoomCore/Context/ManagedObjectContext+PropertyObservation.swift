/// Telling the observers of `@Model` objects about changes that do not go through a
/// property's setter; see ``PropertyObservers``. Runs on the context's isolation.
extension ManagedObjectContext {
    var propertyObservers: PropertyObservers { PropertyObservers(context: self) }

    /// See ``PropertyObservers/notifyObservers(of:valuesFrom:to:)``.
    func notifyObservers(of backing: ObjectBacking, valuesFrom before: [StoredValue], to after: [StoredValue]) {
        propertyObservers.notifyObservers(of: backing, valuesFrom: before, to: after)
    }

    /// See ``PropertyObservers/notifyObservers(ofSlot:of:)``.
    func notifyObservers(ofSlot slot: Int, of backing: ObjectBacking) { propertyObservers.notifyObservers(ofSlot: slot, of: backing) }

    /// See ``PropertyObservers/notifyObservers(ofSlot:of:object:)``.
    func notifyObservers(ofSlot slot: Int, of backing: ObjectBacking, object: any BackedObject) {
        propertyObservers.notifyObservers(ofSlot: slot, of: backing, object: object)
    }

    /// See ``PropertyObservers/notifyObservers(ofRelationship:of:key:)``.
    func notifyObservers(ofRelationship j: Int, of entity: EntityDescription, key: Int64) {
        propertyObservers.notifyObservers(ofRelationship: j, of: entity, key: key)
    }

    /// See ``PropertyObservers/notifyObservers(ofRelationship:of:object:)``.
    func notifyObservers(ofRelationship j: Int, of entity: EntityDescription, object: any BackedObject) {
        propertyObservers.notifyObservers(ofRelationship: j, of: entity, object: object)
    }

    /// See ``PropertyObservers/notifyObservers(of:properties:)``.
    func notifyObservers(of backing: ObjectBacking, properties names: Set<String>?) {
        propertyObservers.notifyObservers(of: backing, properties: names)
    }
}
