/// The description of one kind of object: its name, attributes, uniqueness constraints and
/// indexes. An entity is stored as one table.
///
/// `@Model` generates a class's entity as `static let entity`. For a schema built in code:
///
/// ```swift
/// let book = EntityDescription(name: "Book", modelType: nil, attributes: [
///     AttributeDescription(name: "isbn", valueType: String.self, isUnique: true),
///     AttributeDescription(name: "title", valueType: String.self),
/// ])
/// ```
/// Objects of an entity without a model type are ``DynamicObject``s.
public final class EntityDescription: Sendable, CustomStringConvertible {
    /// The entity name; also its table name.
    public let name: String
    /// The stored attributes, in declaration order (their positions are fixed).
    public let attributes: [AttributeDescription]
    /// Sets of attribute names whose values must be unique together. Includes the attributes
    /// marked `isUnique` as one-element sets.
    public let uniquenessConstraints: [[String]]
    /// Sets of attribute names the store indexes.
    public let indexes: [[String]]
    let modelTypeBox: ModelTypeBox?
    let indexByName: [String: Int]

    /// Creates an entity description.
    public init(
        name: String, modelType: (any PersistentModel.Type)?, attributes: [AttributeDescription],
        uniquenessConstraints: [[String]] = [], indexes: [[String]] = []
    ) {
        self.name = name
        self.attributes = attributes
        self.modelTypeBox = modelType.map(ModelTypeBox.init)
        var unique = attributes.filter(\.isUnique).map { [$0.name] }
        for constraint in uniquenessConstraints where !unique.contains(constraint) {
            unique.append(constraint)
        }
        self.uniquenessConstraints = unique
        var allIndexes = attributes.filter(\.isIndexed).map { [$0.name] }
        for index in indexes where !allIndexes.contains(index) { allIndexes.append(index) }
        self.indexes = allIndexes
        var byName: [String: Int] = [:]
        for (i, attribute) in attributes.enumerated() where byName[attribute.name] == nil {
            byName[attribute.name] = i
        }
        self.indexByName = byName
    }

    /// The Swift class of this entity's objects, when the schema was built from `@Model` classes.
    public var modelType: (any PersistentModel.Type)? { modelTypeBox?.type }

    /// The position of an attribute, or `nil` when the entity has no attribute of that name.
    public func attributeIndex(named name: String) -> Int? { indexByName[name] }

    /// The attribute of that name, if any.
    public func attribute(named name: String) -> AttributeDescription? {
        indexByName[name].map { attributes[$0] }
    }

    public var description: String { "Entity \(name) (\(attributes.map(\.name).joined(separator: ", ")))" }

    /// Problems that make this entity unusable, as sentences.
    func validationProblems() -> [String] {
        var problems: [String] = []
        if name.isEmpty { problems.append("an entity has an empty name") }
        if name.lowercased().hasPrefix("loom_") || name.lowercased().hasPrefix("sqlite_") {
            problems.append("entity name '\(name)' is reserved (names starting with loom_ or sqlite_ are Loom's)")
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
        for set in uniquenessConstraints + indexes {
            for attributeName in set where indexByName[attributeName] == nil {
                problems.append("\(name): a uniqueness constraint or index names '\(attributeName)', which is not one of its attributes")
            }
        }
        return problems
    }
}

/// Carries a model metatype across isolation domains.
///
/// `@unchecked Sendable`: a metatype is immutable; the box only exists because protocol
/// metatypes are not inferred `Sendable`.
struct ModelTypeBox: @unchecked Sendable {
    let type: any PersistentModel.Type
}
