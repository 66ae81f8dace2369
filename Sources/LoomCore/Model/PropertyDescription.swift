/// One persistent property of a `@Model` class: an attribute or a relationship.
///
/// `@Model` lists a class's properties as `.property(...)` calls in declaration order, and the
/// Swift type of each decides what it is: a property typed with a model class (`Author?`,
/// `Author`, `Set<Book>`, `[Book]`) is a relationship, anything else an attribute. Properties
/// marked `@Relationship(deleteRule:inverse:)` become `.relationship(...)` calls, which accept
/// model types only. You only write these when building an entity by hand with
/// `EntityDescription/init(name:modelType:properties:uniquenessConstraints:indexes:)`.
public enum PropertyDescription: Sendable {
    /// A stored value.
    case attribute(AttributeDescription)
    /// A relationship to objects of another (or the same) entity.
    case relationship(RelationshipDescription)

    /// The property name.
    public var name: String {
        switch self {
        case .attribute(let a): a.name
        case .relationship(let r): r.name
        }
    }

    // MARK: Properties whose type decides

    /// An attribute holding values of type `T`; `originalName` is its name in the previous
    /// model version when it was renamed (`@Attribute(originalName:)`).
    public static func property<T>(
        name: String, valueType: T.Type, isUnique: Bool = false, isIndexed: Bool = false,
        defaultValue: (@Sendable () -> T)? = nil, originalName: String? = nil, preservesValueOnDeletion: Bool = false
    ) -> PropertyDescription {
        .attribute(AttributeDescription(name: name, valueType: T.self, isUnique: isUnique, isIndexed: isIndexed, defaultValue: defaultValue, originalName: originalName, preservesValueOnDeletion: preservesValueOnDeletion))
    }

    /// An optional to-one relationship (`var author: Author?`), with the default delete rule
    /// (nullify) and the inverse named by the other side.
    public static func property<M: PersistentModel>(
        name: String, valueType: M?.Type, isUnique: Bool = false, isIndexed: Bool = false,
        defaultValue: (@Sendable () -> M?)? = nil, originalName: String? = nil, preservesValueOnDeletion: Bool = false
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .toOne, isOptional: true, isUnique: isUnique, deleteRule: .nullify, inverse: nil, originalName: originalName))
    }

    /// A required to-one relationship (`var author: Author`): it must be set before a save.
    public static func property<M: PersistentModel>(
        name: String, valueType: M.Type, isUnique: Bool = false, isIndexed: Bool = false,
        defaultValue: (@Sendable () -> M)? = nil, originalName: String? = nil, preservesValueOnDeletion: Bool = false
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .toOne, isOptional: false, isUnique: isUnique, deleteRule: .nullify, inverse: nil, originalName: originalName))
    }

    /// A to-many relationship without order (`var books: Set<Book>`).
    public static func property<M: PersistentModel>(
        name: String, valueType: Set<M>.Type, isUnique: Bool = false, isIndexed: Bool = false,
        defaultValue: (@Sendable () -> Set<M>)? = nil, originalName: String? = nil, preservesValueOnDeletion: Bool = false
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .toMany, isOptional: true, isUnique: false, deleteRule: .nullify, inverse: nil, originalName: originalName))
    }

    /// An ordered to-many relationship (`var chapters: [Chapter]`).
    public static func property<M: PersistentModel>(
        name: String, valueType: [M].Type, isUnique: Bool = false, isIndexed: Bool = false,
        defaultValue: (@Sendable () -> [M])? = nil, originalName: String? = nil, preservesValueOnDeletion: Bool = false
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .orderedToMany, isOptional: true, isUnique: false, deleteRule: .nullify, inverse: nil, originalName: originalName))
    }

    // MARK: @Relationship properties

    /// An optional to-one relationship declared with `@Relationship`.
    public static func relationship<M: PersistentModel>(
        name: String, valueType: M?.Type, deleteRule: DeleteRule = .nullify, inverse: PartialKeyPath<M>? = nil,
        isUnique: Bool = false, isIndexed: Bool = false, defaultValue: (@Sendable () -> M?)? = nil, originalName: String? = nil
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .toOne, isOptional: true, isUnique: isUnique, deleteRule: deleteRule, inverse: inverse, originalName: originalName))
    }

    /// A required to-one relationship declared with `@Relationship`.
    public static func relationship<M: PersistentModel>(
        name: String, valueType: M.Type, deleteRule: DeleteRule = .nullify, inverse: PartialKeyPath<M>? = nil,
        isUnique: Bool = false, isIndexed: Bool = false, defaultValue: (@Sendable () -> M)? = nil, originalName: String? = nil
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .toOne, isOptional: false, isUnique: isUnique, deleteRule: deleteRule, inverse: inverse, originalName: originalName))
    }

    /// A to-many relationship declared with `@Relationship`.
    public static func relationship<M: PersistentModel>(
        name: String, valueType: Set<M>.Type, deleteRule: DeleteRule = .nullify, inverse: PartialKeyPath<M>? = nil,
        isUnique: Bool = false, isIndexed: Bool = false, defaultValue: (@Sendable () -> Set<M>)? = nil, originalName: String? = nil
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .toMany, isOptional: true, isUnique: false, deleteRule: deleteRule, inverse: inverse, originalName: originalName))
    }

    /// An ordered to-many relationship declared with `@Relationship`.
    public static func relationship<M: PersistentModel>(
        name: String, valueType: [M].Type, deleteRule: DeleteRule = .nullify, inverse: PartialKeyPath<M>? = nil,
        isUnique: Bool = false, isIndexed: Bool = false, defaultValue: (@Sendable () -> [M])? = nil, originalName: String? = nil
    ) -> PropertyDescription {
        .relationship(make(name, M.self, .orderedToMany, isOptional: true, isUnique: false, deleteRule: deleteRule, inverse: inverse, originalName: originalName))
    }

    /// `@Relationship` on a property whose type is not a model: a compile-time error.
    @available(*, unavailable, message: "@Relationship needs a property typed with a @Model class: Author?, Author, Set<Book> or [Book]")
    public static func relationship<T>(
        name: String, valueType: T.Type, deleteRule: DeleteRule = .nullify, inverse: AnyKeyPath? = nil,
        isUnique: Bool = false, isIndexed: Bool = false, defaultValue: (@Sendable () -> T)? = nil, originalName: String? = nil
    ) -> PropertyDescription {
        fatalError("unavailable")
    }

    private static func make<M: PersistentModel>(
        _ name: String, _: M.Type, _ kind: RelationshipDescription.Kind, isOptional: Bool, isUnique: Bool,
        deleteRule: DeleteRule, inverse: PartialKeyPath<M>?, originalName: String?
    ) -> RelationshipDescription {
        var inverseName: String?
        var problem: String?
        if let inverse {
            // Only the destination's key-path table is consulted, never its entity: two models
            // may name each other while their entities are being built.
            inverseName = M._loomPropertyName(for: inverse)
            if inverseName == nil {
                problem = "the inverse key path given for '\(name)' does not lead to a persistent property of \(M.self)"
            }
        }
        return RelationshipDescription(
            name: name, destination: .model(ModelTypeBox(type: M.self)), kind: kind, inverse: inverseName,
            deleteRule: deleteRule, isOptional: isOptional, isUnique: isUnique, originalName: originalName, problem: problem)
    }
}
