import Foundation

/// The description of one kind of object: its name, attributes, relationships, uniqueness
/// constraints and indexes. An entity is stored as one table.
///
/// `@Model` generates a class's entity as `static let entity`. For a schema built in code:
///
/// ```swift
/// let book = EntityDescription(name: "Book", modelType: nil, attributes: [
///     AttributeDescription(name: "isbn", valueType: String.self, isUnique: true),
///     AttributeDescription(name: "title", valueType: String.self),
/// ], relationships: [
///     RelationshipDescription(name: "author", destination: "Author", kind: .toOne, inverse: "books"),
/// ])
/// ```
/// Objects of an entity without a model type are ``DynamicObject``s.
///
/// An entity may have a ``superentity`` (`@Model class BusinessTrip: Trip`): it inherits the
/// superentity's attributes, relationships, uniqueness constraints and indexes, which come
/// first in its own lists, in the same positions, followed by its own. An abstract entity
/// (``isAbstract``, `@Model(abstract: true)`) has no objects of its own, only its
/// sub-entities' (see ``Schema/subentities(of:)``).
///
/// An object's stored values are laid out in *slots*: one per attribute, in order, then one
/// per to-one relationship (the destination's primary key, a foreign key), then one per
/// ordered to-many relationship (the order of its objects). To-many relationships without
/// order take no slot: they are recorded on the other side (its foreign key, or a join table).
public final class EntityDescription: Sendable, CustomStringConvertible {
    /// The entity name; also its table name.
    public let name: String
    /// The entity this one inherits from, if any (Core Data's `superentity`).
    public let superentity: EntityDescription?
    /// Whether the entity has no objects of its own, only those of its sub-entities (Core
    /// Data's `isAbstract`): inserting one is refused with ``LoomError/Code/abstractEntity``.
    public let isAbstract: Bool
    /// How many of ``properties`` the entity inherits from its ``superentity``: they come first.
    public let inheritedPropertyCount: Int
    /// The names of the entities made so far that inherit from this one, directly or not: an
    /// ``ObjectID`` of a sub-entity types as its ancestors' without a schema at hand.
    private let descendantNames = Locked<Set<String>>([])
    /// The entity's name in the previous model version, when it was renamed
    /// (`@Model(originalName:)`): a store saved with that name keeps its objects.
    public let originalName: String?
    /// The stored attributes, in declaration order (their positions are fixed).
    public let attributes: [AttributeDescription]
    /// The relationships, in declaration order.
    public let relationships: [RelationshipDescription]
    /// Sets of attribute (or to-one relationship) names whose values must be unique together.
    /// Includes the attributes and to-one relationships marked unique as one-element sets.
    public let uniquenessConstraints: [[String]]
    /// Sets of attribute (or to-one relationship) names the store indexes. Foreign keys are
    /// always indexed and are not listed here.
    public let indexes: [[String]]
    /// How many stored values an object of this entity has: see the type's discussion.
    @_spi(LoomStore) public let storedValueCount: Int
    let modelTypeBox: ModelTypeBox?
    let indexByName: [String: Int]
    let slotByName: [String: Int]
    let relationshipIndexByName: [String: Int]
    /// An empty, loaded list for each to-many relationship, by relationship index: what a new
    /// object's lists start as (see `ObjectBacking.startEmptyLists()`), shared by all of them.
    let emptyToManyLists: [Int: MemberList]
    /// For each property in declaration order: its attribute index, or `-1 - relationship index`.
    @usableFromInline
    let propertyTable: [Int]
    /// For each relationship: the slot of its foreign key (to-one) or order (ordered to-many), else -1.
    let relationshipSlots: [Int]
    /// For each slot past the attributes: the relationship it belongs to.
    let slotRelationships: [Int]
    /// For each slot: the declaration position of the property it belongs to.
    let slotProperties: [Int]
    /// For each relationship: the declaration position of its property.
    let relationshipProperties: [Int]
    /// Problems found while building, reported by ``Schema``.
    let buildProblems: [String]
    /// A new object's values before its defaults are evaluated: NULL everywhere.
    let nullValues: [StoredValue]
    /// Each attribute's type and optionality, for checking rows without copying descriptions.
    let attributeKinds: [(type: AttributeType, isOptional: Bool)]
    /// For each stored slot, the ``StoredValue/kindBit``s of the values it accepts (NULL only
    /// where the slot may be empty): a fetched row is checked with one AND a value. A UUID
    /// slot accepts blobs here and is checked in full by ``slotsCheckedInFull``.
    let acceptedKinds: [UInt8]
    /// The slots whose values must also pass ``AttributeType/accepts(_:)`` (a UUID's 16 bytes).
    let slotsCheckedInFull: [Int]
    /// The attributes whose values a deletion's history tombstone keeps.
    let preservedOnDeletion: [Int]
    /// The attributes with a default value (evaluated per object: a default may be `Date()`).
    let defaultMakers: [(index: Int, make: @Sendable () -> StoredValue?)]

    /// Creates an entity description from attributes and relationships.
    public convenience init(
        name: String, modelType: (any PersistentModel.Type)?, attributes: [AttributeDescription],
        relationships: [RelationshipDescription] = [], uniquenessConstraints: [[String]] = [], indexes: [[String]] = [],
        originalName: String? = nil, superentity: EntityDescription? = nil, isAbstract: Bool = false
    ) {
        self.init(name: name, modelType: modelType,
                  properties: attributes.map(PropertyDescription.attribute) + relationships.map(PropertyDescription.relationship),
                  uniquenessConstraints: uniquenessConstraints, indexes: indexes, originalName: originalName,
                  superentity: superentity, isAbstract: isAbstract)
    }

    /// Creates an entity description from its properties in declaration order; what `@Model`
    /// generates.
    ///
    /// - Parameters:
    ///   - name: the entity's name (its table's).
    ///   - modelType: the `@Model` class its objects are, or `nil` for a schema read from a store.
    ///   - ownProperties: its attributes and relationships, in declaration order.
    ///   - ownUniquenessConstraints: the sets of attribute names whose values are unique together.
    ///   - ownIndexes: the sets of attribute names with an index.
    ///   - originalName: the entity's name in the previous model version, if it was
    ///     renamed (`@Model(originalName:)`).
    ///   - superentity: the entity this one inherits from: its properties, uniqueness
    ///     constraints and indexes come first, before `ownProperties`.
    ///   - isAbstract: whether the entity has no objects of its own, only its sub-entities'.
    public init(
        name: String, modelType: (any PersistentModel.Type)?, properties ownProperties: [PropertyDescription],
        uniquenessConstraints ownUniquenessConstraints: [[String]] = [], indexes ownIndexes: [[String]] = [],
        originalName: String? = nil, superentity: EntityDescription? = nil, isAbstract: Bool = false
    ) {
        self.originalName = originalName
        self.superentity = superentity
        self.isAbstract = isAbstract
        var ancestor = superentity
        while let parent = ancestor {
            parent.descendantNames.withLock { _ = $0.insert(name) }
            ancestor = parent.superentity
        }
        let inherited = superentity?.properties ?? []
        self.inheritedPropertyCount = inherited.count
        let properties = inherited + ownProperties
        let uniquenessConstraints = (superentity?.uniquenessConstraints ?? []) + ownUniquenessConstraints
        let indexes = (superentity?.indexes ?? []) + ownIndexes
        var attributes: [AttributeDescription] = []
        var relationships: [RelationshipDescription] = []
        var table: [Int] = []
        for property in properties {
            switch property {
            case .attribute(let a):
                table.append(attributes.count)
                attributes.append(a)
            case .relationship(let r):
                table.append(-1 - relationships.count)
                relationships.append(r)
            }
        }
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
        self.propertyTable = table
        self.modelTypeBox = modelType.map(ModelTypeBox.init)

        var slots = Array(repeating: -1, count: relationships.count)
        var slotRelationships: [Int] = []
        var next = attributes.count
        for (j, r) in relationships.enumerated() where r.kind == .toOne {
            slots[j] = next; next += 1; slotRelationships.append(j)
        }
        for (j, r) in relationships.enumerated() where r.kind == .orderedToMany {
            slots[j] = next; next += 1; slotRelationships.append(j)
        }
        self.relationshipSlots = slots
        self.slotRelationships = slotRelationships
        let attributeProperties = table.indices.filter { table[$0] >= 0 }
        let relationshipProperties = table.indices.filter { table[$0] < 0 }
        self.relationshipProperties = relationshipProperties
        self.slotProperties = attributeProperties + slotRelationships.map { relationshipProperties[$0] }
        self.storedValueCount = next
        self.nullValues = Array(repeating: .null, count: next)
        self.attributeKinds = attributes.map { ($0.type, $0.isOptional) }
        // Read off `AttributeType.accepts` (one value of each kind; a 16-byte blob, which a
        // UUID accepts too), so that the rules are stated once. Foreign keys and orders as in
        // `slotAccepts`: NULL or an integer, NULL or a blob.
        let samples: [StoredValue] = [.null, .integer(0), .real(0), .text(""), .blob(Data(count: 16))]
        self.acceptedKinds = attributes.map { attribute in
            samples.reduce(0) { mask, sample in
                attribute.type.accepts(sample) && (attribute.isOptional || !sample.isNull) ? mask | sample.kindBit : mask
            }
        } + Array(repeating: StoredValue.null.kindBit | StoredValue.integer(0).kindBit, count: slotRelationships.count { relationships[$0].kind == .toOne })
          + Array(repeating: StoredValue.null.kindBit | StoredValue.blob(Data()).kindBit, count: slotRelationships.count { relationships[$0].kind == .orderedToMany })
        self.slotsCheckedInFull = attributes.indices.filter { attributes[$0].type == .uuid }
        self.preservedOnDeletion = attributes.indices.filter { attributes[$0].preservesValueOnDeletion }
        self.defaultMakers = attributes.enumerated().compactMap { i, a in a.makeDefault.map { (i, $0) } }

        var byName: [String: Int] = [:]
        for (i, attribute) in attributes.enumerated() where byName[attribute.name] == nil {
            byName[attribute.name] = i
        }
        self.indexByName = byName
        var slotByName = byName
        var relationshipIndexByName: [String: Int] = [:]
        for (j, r) in relationships.enumerated() {
            if relationshipIndexByName[r.name] == nil { relationshipIndexByName[r.name] = j }
            if r.kind == .toOne, slotByName[r.name] == nil { slotByName[r.name] = slots[j] }
        }
        self.slotByName = slotByName
        self.relationshipIndexByName = relationshipIndexByName
        var emptyLists: [Int: MemberList] = [:]
        for (j, r) in relationships.enumerated() where r.kind != .toOne { emptyLists[j] = MemberList() }
        self.emptyToManyLists = emptyLists

        var unique = attributes.filter(\.isUnique).map { [$0.name] } + relationships.filter(\.isUnique).map { [$0.name] }
        for constraint in uniquenessConstraints where !unique.contains(constraint) {
            unique.append(constraint)
        }
        self.uniquenessConstraints = unique
        var allIndexes = attributes.filter(\.isIndexed).map { [$0.name] }
        for index in indexes where !allIndexes.contains(index) { allIndexes.append(index) }
        self.indexes = allIndexes
        self.buildProblems = relationships.compactMap { r in r.problem.map { "\(name).\(r.name): \($0)" } }
    }

    /// The attributes and relationships in declaration order: the inherited ones first.
    public var properties: [PropertyDescription] {
        propertyTable.map { $0 >= 0 ? .attribute(attributes[$0]) : .relationship(relationships[-1 - $0]) }
    }

    /// Whether this entity is `other` or inherits from it, directly or not (entities are
    /// compared by name: within a schema, names are unique).
    public func isKind(of other: EntityDescription) -> Bool {
        var entity: EntityDescription? = self
        while let current = entity {
            if current === other || current.name == other.name { return true }
            entity = current.superentity
        }
        return false
    }

    /// Whether an object of the entity named `entityName` is one of this entity's: the entity
    /// itself, or one made as inheriting from it.
    func isKind(named entityName: String) -> Bool {
        entityName == name || descendantNames.withLock { $0.contains(entityName) }
    }

    /// Whether this entity is the one named `entityName` or inherits from it, directly or not.
    func isOrInherits(fromEntityNamed entityName: String) -> Bool {
        var entity: EntityDescription? = self
        while let current = entity {
            if current.name == entityName { return true }
            entity = current.superentity
        }
        return false
    }

    /// The entity that declares relationship `index`: the highest of this entity and its
    /// ancestors that has it (inherited relationships come first, in the same positions).
    func declaringEntity(ofRelationship index: Int) -> EntityDescription {
        var owner = self
        while let parent = owner.superentity, index < parent.relationships.count { owner = parent }
        return owner
    }

    /// The entity that declares `constraint`, one of ``uniquenessConstraints``: the highest of
    /// this entity and its ancestors that has it (a sub-entity inherits its parent's). A
    /// constraint declared on an entity with sub-entities holds across all of them.
    public func declaringEntity(ofConstraint constraint: [String]) -> EntityDescription {
        var owner = self
        while let parent = owner.superentity, parent.uniquenessConstraints.contains(constraint) { owner = parent }
        return owner
    }

    /// The entity at the top of this entity's hierarchy (itself when it has no superentity).
    public var rootEntity: EntityDescription {
        var entity = self
        while let parent = entity.superentity { entity = parent }
        return entity
    }

    /// The Swift class of this entity's objects, when the schema was built from `@Model` classes.
    public var modelType: (any PersistentModel.Type)? { modelTypeBox?.type }

    /// The position of an attribute, or `nil` when the entity has no attribute of that name.
    public func attributeIndex(named name: String) -> Int? { indexByName[name] }

    /// The attribute of that name, if any.
    public func attribute(named name: String) -> AttributeDescription? {
        indexByName[name].map { attributes[$0] }
    }

    /// The position of a relationship, or `nil` when the entity has none of that name.
    public func relationshipIndex(named name: String) -> Int? { relationshipIndexByName[name] }

    /// The relationship of that name, if any.
    public func relationship(named name: String) -> RelationshipDescription? {
        relationshipIndexByName[name].map { relationships[$0] }
    }

    /// The slot holding an attribute's value or a to-one relationship's foreign key, by name.
    @_spi(LoomStore) public func storedValueIndex(named name: String) -> Int? { slotByName[name] }

    /// The slot of a to-one relationship's foreign key or of an ordered to-many's order; `nil`
    /// for a to-many without order.
    @_spi(LoomStore) public func storedValueIndex(ofRelationship index: Int) -> Int? {
        let slot = relationshipSlots[index]
        return slot < 0 ? nil : slot
    }

    /// What a slot holds.
    @_spi(LoomStore) public func storedValue(at slot: Int) -> StoredValueSlot {
        if slot < attributes.count { return .attribute(attributes[slot]) }
        let j = slotRelationships[slot - attributes.count]
        return relationships[j].kind == .toOne ? .foreignKey(relationships[j]) : .order(relationships[j])
    }

    /// The property name a slot belongs to.
    @_spi(LoomStore) public func storedValueName(at slot: Int) -> String {
        if slot < attributes.count { return attributes[slot].name }
        return relationships[slotRelationships[slot - attributes.count]].name
    }

    /// The column a store keeps a slot in: the attribute's name, `Z_<name>` for a foreign key,
    /// `Z_<name>_ORDER` for an order.
    @_spi(LoomStore) public func columnName(at slot: Int) -> String {
        switch storedValue(at: slot) {
        case .attribute(let a): a.name
        case .foreignKey(let r): "Z_\(r.name)"
        case .order(let r): "Z_\(r.name)_ORDER"
        }
    }

    /// Whether a stored value may be kept in a slot (its storage class fits).
    func slotAccepts(_ slot: Int, _ value: StoredValue) -> Bool {
        switch storedValue(at: slot) {
        case .attribute(let a): a.type.accepts(value)
        case .foreignKey: value.isNull || { if case .integer = value { true } else { false } }()
        case .order: value.isNull || { if case .blob = value { true } else { false } }()
        }
    }

    public var description: String {
        "Entity \(name) (\((attributes.map(\.name) + relationships.map(\.name)).joined(separator: ", ")))"
    }

    /// Problems that make this entity unusable on its own, as sentences.
    func validationProblems() -> [String] {
        var problems = buildProblems
        if name.isEmpty { problems.append("an entity has an empty name") }
        let lowered = name.lowercased()
        if lowered.hasPrefix("loom_") || lowered.hasPrefix("sqlite_") || name.hasPrefix("Z_") {
            problems.append("entity name '\(name)' is reserved (names starting with loom_, sqlite_ or Z_ are Loom's)")
        }
        if name.contains("\"") || name.contains("\0") { problems.append("entity name '\(name)' contains a quote or NUL") }
        var seen: Set<String> = []
        for attribute in attributes {
            if !seen.insert(attribute.name.lowercased()).inserted {
                problems.append("\(name).\(attribute.name) is declared twice")
            }
            if attribute.name.hasPrefix("Z_") || attribute.name.isEmpty || attribute.name.contains("\"") || attribute.name.contains("\0") {
                problems.append("\(name).\(attribute.name) is not a valid attribute name (empty, quoted, or starting with Z_)")
            }
            if let reason = attribute.codec.unsupportedReason {
                problems.append("\(name).\(attribute.name): \(reason)")
            }
        }
        for relationship in relationships {
            if !seen.insert(relationship.name.lowercased()).inserted {
                problems.append("\(name).\(relationship.name) is declared twice")
            }
            if relationship.name.hasPrefix("Z_") || relationship.name.isEmpty || relationship.name.contains("\"") || relationship.name.contains("\0") {
                problems.append("\(name).\(relationship.name) is not a valid relationship name (empty, quoted, or starting with Z_)")
            }
        }
        var columns: Set<String> = []
        for slot in 0..<storedValueCount where !columns.insert(columnName(at: slot).lowercased()).inserted {
            problems.append("\(name): two properties are stored in the same column \(columnName(at: slot)); rename one")
        }
        for set in uniquenessConstraints + indexes {
            for propertyName in set where slotByName[propertyName] == nil {
                if relationshipIndexByName[propertyName] != nil {
                    problems.append("\(name): a uniqueness constraint or index names '\(propertyName)', a to-many relationship; only attributes and to-one relationships can be constrained or indexed")
                } else {
                    problems.append("\(name): a uniqueness constraint or index names '\(propertyName)', which is not one of its attributes")
                }
            }
        }
        return problems
    }
}

/// What one slot of an object's stored values holds; see ``EntityDescription``.
@_spi(LoomStore) public enum StoredValueSlot: Sendable {
    /// An attribute's value.
    case attribute(AttributeDescription)
    /// A to-one relationship's destination key (NULL when empty).
    case foreignKey(RelationshipDescription)
    /// An ordered to-many relationship's order: its objects' keys, 8 bytes each, little-endian.
    case order(RelationshipDescription)
}

/// Carries a model metatype across isolation domains.
///
/// `@unchecked Sendable`: a metatype is immutable; the box only exists because protocol
/// metatypes are not inferred `Sendable`.
struct ModelTypeBox: @unchecked Sendable {
    let type: any PersistentModel.Type
}
