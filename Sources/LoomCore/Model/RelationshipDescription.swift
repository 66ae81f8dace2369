/// What happens to the objects at the other end of a relationship when its object is deleted.
///
/// Rules are applied when the context processes pending changes (at the end of every `perform`,
/// at the end of the main actor's turn for the view context, and at the start of every save),
/// as Core Data applies them.
public enum DeleteRule: String, Sendable, Hashable, Codable, CaseIterable {
    /// Remove the deleted object from the other side: a to-one there becomes `nil`, a to-many
    /// loses it. The default.
    case nullify
    /// Delete the objects at the other end too, each following its own rules.
    case cascade
    /// Refuse the deletion while the relationship holds objects: the save fails with
    /// ``LoomError/Code/deleteDenied`` naming the object and the relationship.
    case deny
    /// Do nothing: objects at the other end keep referring to the deleted object. Reading such
    /// a reference after the save gives a deleted object (see
    /// ``ManagedObjectContext/deletesInaccessibleFaults``); prefer ``nullify``.
    case noAction
}

/// One relationship of an entity: its name, where it leads, its inverse, its cardinality and
/// its delete rule.
///
/// `@Model` writes these for you from properties typed `Author?` (to-one), `Set<Book>`
/// (to-many) or `[Book]` (ordered to-many). For a schema built in code:
///
/// ```swift
/// let books = RelationshipDescription(name: "books", destination: "Book", kind: .toMany,
///                                     inverse: "author", deleteRule: .cascade)
/// ```
///
/// Every relationship has an inverse, named on at least one of the two sides; ``Schema``
/// refuses a model where it is missing or inconsistent.
public struct RelationshipDescription: Sendable {
    /// How many objects a relationship holds, and whether their order is kept.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// At most one object (`Author?`), stored as a foreign key on this side.
        case toOne
        /// Any number of objects, without order (`Set<Book>`).
        case toMany
        /// Any number of distinct objects in the order they were given (`[Book]`).
        case orderedToMany

        /// Whether the relationship holds a collection.
        public var isToMany: Bool { self != .toOne }
    }

    /// The property name.
    public let name: String
    /// To-one, to-many or ordered to-many.
    public let kind: Kind
    /// What deleting this relationship's object does to the objects at the other end.
    public let deleteRule: DeleteRule
    /// For a to-one: whether it may be `nil` at save. To-many relationships may always be empty.
    public let isOptional: Bool
    /// For a to-one: whether no two objects may refer to the same destination.
    public let isUnique: Bool
    /// The name of the inverse relationship in the destination entity, when this side names it.
    /// `nil` when the other side names this one as its inverse.
    public let inverseName: String?
    /// The relationship's name in the previous model version, when it was renamed
    /// (`@Relationship(originalName:)`): a store saved with that name keeps its links.
    public let originalName: String?
    let destination: Destination
    /// A mistake found while describing the relationship, reported by ``Schema``.
    let problem: String?

    enum Destination: Sendable {
        case named(String)
        case model(ModelTypeBox)
    }

    /// Describes a relationship to the entity named `destination`.
    ///
    /// - Parameters:
    ///   - name: the property name.
    ///   - destination: the name of the entity it leads to.
    ///   - kind: to-one, to-many or ordered to-many.
    ///   - inverse: the name of the inverse relationship in the destination; may be `nil` when
    ///     the destination's relationship names this one as its inverse.
    ///   - deleteRule: what deleting an object does to the objects it relates to.
    ///   - isOptional: for a to-one, whether `nil` is allowed at save.
    ///   - isUnique: for a to-one, whether two objects may not share a destination.
    ///   - originalName: its name in the previous model version, if it was renamed.
    public init(
        name: String, destination: String, kind: Kind, inverse: String?, deleteRule: DeleteRule = .nullify,
        isOptional: Bool = true, isUnique: Bool = false, originalName: String? = nil
    ) {
        self.init(name: name, destination: .named(destination), kind: kind, inverse: inverse, deleteRule: deleteRule,
                  isOptional: isOptional, isUnique: isUnique, originalName: originalName, problem: nil)
    }

    init(
        name: String, destination: Destination, kind: Kind, inverse: String?, deleteRule: DeleteRule,
        isOptional: Bool, isUnique: Bool, originalName: String? = nil, problem: String?
    ) {
        self.originalName = originalName
        self.name = name
        self.destination = destination
        self.kind = kind
        self.inverseName = inverse
        self.deleteRule = deleteRule
        self.isOptional = kind.isToMany ? true : isOptional
        self.isUnique = kind == .toOne && isUnique
        self.problem = problem
    }

    /// The name of the entity the relationship leads to.
    ///
    /// For `@Model` classes this is the destination class's entity name, read on first use
    /// (never while the class's own entity is being built, so two models may refer to each other).
    public var destinationEntityName: String {
        switch destination {
        case .named(let name): name
        case .model(let box): box.type.entity.name
        }
    }

    /// Whether the relationship holds a collection.
    public var isToMany: Bool { kind.isToMany }
}

/// Where the objects of a relationship are recorded in a store.
@_spi(LoomStore) public enum RelationshipStorage: Sendable, Hashable {
    /// A to-one: the destination's key in the source's own values, at this position.
    case foreignKey(slot: Int)
    /// A to-many whose inverse is a to-one: the destinations' own foreign key, at this position
    /// of the destination's values.
    case inverseForeignKey(slot: Int)
    /// A to-many whose inverse is a to-many: rows of a join table, where `ownColumn` holds the
    /// source's key and `otherColumn` the destination's.
    case joinTable(JoinTable, ownColumn: String, otherColumn: String)
}

/// The table that records a many-to-many relationship: one row per related pair.
///
/// Named `Z_<Entity>_<relationship>` after the side whose `"Entity.relationship"` sorts first;
/// `Z_SOURCE` holds that side's keys and `Z_TARGET` the other side's.
@_spi(LoomStore) public struct JoinTable: Sendable, Hashable {
    /// The table name.
    public let name: String
    /// The entity whose keys `Z_SOURCE` holds.
    public let sourceEntityName: String
    /// The entity whose keys `Z_TARGET` holds.
    public let targetEntityName: String
    /// The column that holds the owning side's keys.
    public static let sourceColumn = "Z_SOURCE"
    /// The column that holds the other side's keys.
    public static let targetColumn = "Z_TARGET"
}

/// A relationship of a schema with everything resolved: both entities, the inverse, and how it
/// is stored. Built by ``Schema``.
@_spi(LoomStore) public struct ResolvedRelationship: Sendable {
    /// The entity the relationship belongs to.
    public let source: EntityDescription
    /// Its position in ``EntityDescription/relationships``.
    public let index: Int
    /// The entity it leads to.
    public let destination: EntityDescription
    /// The position of the inverse in the destination's relationships.
    public let inverseIndex: Int
    /// How the store records it.
    public let storage: RelationshipStorage
    /// Whether the destination has sub-entities whose objects the relationship may hold too:
    /// their rows are in their own tables (see ``concreteDestinations(in:)``).
    public let leadsToSubentities: Bool
    /// Whether this is a relationship to an entity with sub-entities narrowed to the objects
    /// of one of them (``narrowed(to:)``): its destination is that entity.
    public let isNarrowed: Bool

    /// A relationship resolved by ``Schema``, or narrowed by ``narrowed(to:)``. Not isolated: a
    /// value, usable anywhere.
    public init(source: EntityDescription, index: Int, destination: EntityDescription, inverseIndex: Int,
                storage: RelationshipStorage, leadsToSubentities: Bool = false, isNarrowed: Bool = false) {
        self.source = source
        self.index = index
        self.destination = destination
        self.inverseIndex = inverseIndex
        self.storage = storage
        self.leadsToSubentities = leadsToSubentities
        self.isNarrowed = isNarrowed
    }

    /// What tells resolved relationships apart, as a dictionary key: the entity it belongs to,
    /// its position, and the entity it leads to (a narrowed relationship's is one of its
    /// destination's sub-entities).
    public struct Identity: Hashable, Sendable {
        let source: ObjectIdentifier
        let index: Int
        let destination: ObjectIdentifier
    }

    /// This relationship's ``Identity``.
    public var identity: Identity {
        Identity(source: ObjectIdentifier(source), index: index, destination: ObjectIdentifier(destination))
    }

    /// This relationship as it reaches the objects of `entity` alone, one of the destination's
    /// concrete entities (itself or a sub-entity): the rows of `entity`'s table. The inverse keeps
    /// its position; a foreign key on the destination's side is at `entity`'s slot for it.
    public func narrowed(to entity: EntityDescription) -> ResolvedRelationship {
        var storage = storage
        if case .inverseForeignKey = storage { storage = .inverseForeignKey(slot: entity.relationshipSlots[inverseIndex]) }
        return ResolvedRelationship(source: source, index: index, destination: entity, inverseIndex: inverseIndex, storage: storage, isNarrowed: true)
    }

    /// The relationship narrowed to each entity whose objects it may hold (see
    /// ``narrowed(to:)``): itself alone when the destination has no sub-entities.
    public func concreteDestinations(in schema: Schema) -> [ResolvedRelationship] {
        guard leadsToSubentities else { return [self] }
        return schema.concreteEntities(of: destination).map(narrowed(to:))
    }

    /// The relationship's description.
    public var description: RelationshipDescription { source.relationships[index] }
    /// The inverse relationship's description.
    public var inverse: RelationshipDescription { destination.relationships[inverseIndex] }
    /// A reference to this relationship, for predicates.
    public var reference: RelationshipReference { RelationshipReference(entityName: source.name, name: description.name) }
}

/// Names one relationship of one entity, for `PredicateNode` and `SortKey`.
public struct RelationshipReference: Sendable, Hashable, CustomStringConvertible {
    /// The entity the relationship belongs to.
    public let entityName: String
    /// The relationship's name.
    public let name: String

    /// Names relationship `name` of entity `entityName`; the schema resolves it when used.
    public init(entityName: String, name: String) {
        self.entityName = entityName
        self.name = name
    }

    public var description: String { "\(entityName).\(name)" }
}
