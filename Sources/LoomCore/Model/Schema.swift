import Foundation

/// The set of entities a store holds, with a stable version hash.
///
/// ```swift
/// let schema = try Schema(Author.self, Book.self)
/// print(schema.versionHash)
/// ```
/// The schema is also saved inside every store, so that a tool can open a store it was not
/// compiled against (`Schema/init(record:)`), and so that opening a store with a different
/// model is an error that names what differs.
public struct Schema: Sendable {
    /// The entities, in the order given.
    public let entities: [EntityDescription]
    let entityByName: [String: EntityDescription]
    let resolved: [ObjectIdentifier: [ResolvedRelationship]]
    /// The join tables of the many-to-many relationships.
    @_spi(LoomStore) public let joinTables: [JoinTable]
    /// Each entity's direct sub-entities, by name, in the order of ``entities``.
    let subentitiesByName: [String: [EntityDescription]]
    /// ``concreteEntities(of:includingSubentities:)`` of each entity with sub-entities, made once.
    let concreteByEntity: [ObjectIdentifier: [EntityDescription]]
    /// The uniqueness constraints that hold across a hierarchy, in the order of ``entities``.
    @_spi(LoomStore) public let hierarchyConstraints: [HierarchyConstraint]

    /// Builds a schema from entity descriptions; throws ``LoomError/Code/invalidModel`` with
    /// every problem found: duplicate or reserved names, constraints on unknown properties,
    /// relationships to entities not in the schema, and relationships without a consistent
    /// inverse.
    public init(_ entities: [EntityDescription]) throws(LoomError) {
        var problems: [String] = []
        var byName: [String: EntityDescription] = [:]
        for entity in entities {
            if byName[entity.name] != nil { problems.append("entity \(entity.name) is declared twice") }
            byName[entity.name] = entity
            problems += entity.validationProblems()
        }
        let subentities = Schema.hierarchyProblems(entities, byName: byName, problems: &problems)
        let (resolved, joinTables) = Schema.resolveRelationships(entities, byName: byName, subentities: subentities, problems: &problems)
        if !problems.isEmpty {
            throw LoomError(.invalidModel, "The model is invalid: " + problems.joined(separator: "; "))
        }
        self.entities = entities
        self.entityByName = byName
        self.resolved = resolved
        self.joinTables = joinTables
        self.subentitiesByName = subentities
        self.concreteByEntity = Dictionary(uniqueKeysWithValues: entities.filter { subentities[$0.name] != nil }.map {
            (ObjectIdentifier($0), Schema.concreteEntities(of: $0, subentities: subentities))
        })
        self.hierarchyConstraints = entities.flatMap { entity in
            guard subentities[entity.name] != nil else { return [HierarchyConstraint]() }
            let members = Schema.concreteEntities(of: entity, subentities: subentities)
            return entity.uniquenessConstraints.filter { entity.declaringEntity(ofConstraint: $0) === entity }.map {
                HierarchyConstraint(owner: entity, attributes: $0, members: members)
            }
        }
    }

    /// Checks each entity's superentity, and returns each entity's direct sub-entities.
    ///
    /// Each entity of a hierarchy is stored in a table of its own holding the inherited
    /// columns too, and a fetch of a parent entity asks each table (see ``concreteEntities(of:includingSubentities:)``).
    /// A relationship's foreign key holds a key, not a table: a hierarchy has one key space
    /// (no two of its objects share a key), so a key leading to an entity with sub-entities
    /// names one object, whose entity the context finds by key (``ManagedObjectContext``'s
    /// `concreteEntity(of:key:)`). A uniqueness constraint of an entity with sub-entities
    /// holds across their tables (``HierarchyConstraint``).
    private static func hierarchyProblems(
        _ entities: [EntityDescription], byName: [String: EntityDescription], problems: inout [String]
    ) -> [String: [EntityDescription]] {
        var subentities: [String: [EntityDescription]] = [:]
        for entity in entities {
            guard let parent = entity.superentity else { continue }
            guard let known = byName[parent.name] else {
                problems.append("\(entity.name) inherits from \(parent.name), which is not in this model; add it to the model's types")
                continue
            }
            if known !== parent, known.properties.map(\.name) != parent.properties.map(\.name) {
                problems.append("\(entity.name) inherits from another \(parent.name) than this model's (its properties differ)")
            }
            subentities[parent.name, default: []].append(entity)
        }
        return subentities
    }

    /// The direct sub-entities of `entity` in this schema (Core Data's `subentities`).
    public func subentities(of entity: EntityDescription) -> [EntityDescription] {
        subentitiesByName[entity.name] ?? []
    }

    /// Throws ``LoomError/Code/invalidRequest`` when `operation` on `entity` would have to
    /// cover its sub-entities, or ``LoomError/Code/abstractEntity`` when, abstract, it has no
    /// table of its own to work on (a batch insert); `includingSubentities` false asks for the
    /// entity's own table only.
    func requireOwnTable(of entity: EntityDescription, for operation: String, includingSubentities: Bool = true) throws(LoomError) {
        let subentities = includingSubentities ? concreteEntities(of: entity).filter { $0 !== entity } : []
        if subentities.isEmpty && !entity.isAbstract { return }
        let names = concreteEntities(of: entity).filter { $0 !== entity }.map(\.name).joined(separator: ", ")
        if subentities.isEmpty {
            throw LoomError(.abstractEntity, "\(operation) of \(entity.name) is refused: \(entity.name) is abstract, it has no objects of its own; run it on one of its sub-entities (\(names.isEmpty ? "it has none" : names)).", entity: entity.name)
        }
        throw LoomError(.invalidRequest, "\(operation) of \(entity.name) would have to cover its sub-entities (\(names.isEmpty ? "none" : names)), which Loom does not do yet (fetches, counts, batched fetches, values and aggregates, live queries, batch updates and deletes do); run it on each sub-entity's own class\(entity.isAbstract ? "" : ", or with includesSubentities = false where the request has it").", entity: entity.name)
    }

    /// The entities whose objects a fetch of `entity` returns: the entity itself unless it is
    /// abstract, and, when `includingSubentities`, every entity that inherits from it, directly
    /// or not (parents before their sub-entities).
    public func concreteEntities(of entity: EntityDescription, includingSubentities: Bool = true) -> [EntityDescription] {
        guard includingSubentities else { return entity.isAbstract ? [] : [entity] }
        if let known = concreteByEntity[ObjectIdentifier(entity)] { return known }
        return Schema.concreteEntities(of: entity, subentities: subentitiesByName)
    }

    private static func concreteEntities(of entity: EntityDescription, subentities: [String: [EntityDescription]]) -> [EntityDescription] {
        var out: [EntityDescription] = entity.isAbstract ? [] : [entity]
        var pending = subentities[entity.name] ?? []
        while !pending.isEmpty {
            let next = pending.removeFirst()
            if !next.isAbstract { out.append(next) }
            pending += subentities[next.name] ?? []
        }
        return out
    }

    /// The constraint across a hierarchy that `constraint` of `entity` is part of, if any:
    /// `nil` when it is declared on an entity without sub-entities (a table's unique index holds it).
    @_spi(LoomStore) public func hierarchyConstraint(of entity: EntityDescription, _ constraint: [String]) -> HierarchyConstraint? {
        let owner = entity.declaringEntity(ofConstraint: constraint)
        guard subentitiesByName[owner.name] != nil else { return nil }
        return hierarchyConstraints.first { $0.owner === owner && $0.attributes == constraint }
    }

    /// Builds a schema from `@Model` classes.
    public init(_ types: any PersistentModel.Type...) throws(LoomError) {
        try self.init(types.map { $0.entity })
    }

    /// Builds a schema from `@Model` classes.
    public init(_ types: [any PersistentModel.Type]) throws(LoomError) {
        try self.init(types.map { $0.entity })
    }

    /// The entity of that name, if any.
    public func entity(named name: String) -> EntityDescription? { entityByName[name] }

    /// Whether `entity` is one of this schema's entities (the same description, not only the
    /// same name).
    func contains(_ entity: EntityDescription) -> Bool { resolved[ObjectIdentifier(entity)] != nil }

    /// The entity of that name, or an error that says it is not in this schema.
    func requireEntity(named name: String) throws(LoomError) -> EntityDescription {
        guard let entity = entityByName[name] else {
            throw LoomError(.unknownEntity, "Entity '\(name)' is not in this store's model (\(entities.map(\.name).joined(separator: ", "))).", entity: name)
        }
        return entity
    }

    /// A hash of everything that decides the store's layout: entity, attribute and relationship
    /// names, types, optionality, uniqueness, and where relationships lead. Indexes and delete
    /// rules do not count (they can change without migration).
    /// Stable across runs, machines and Loom versions.
    public var versionHash: String {
        SchemaRecord(self).versionHash
    }

    /// The schema as saved in a store.
    @_spi(LoomStore) public var record: SchemaRecord { SchemaRecord(self) }

    /// Rebuilds a schema from what a store saved. Its entities have no model types: their
    /// objects are ``DynamicObject``s.
    @_spi(LoomStore) public init(record: SchemaRecord) throws(LoomError) {
        // A sub-entity is built after its superentity, from the properties it adds.
        var built: [String: EntityDescription] = [:]
        func build(_ entity: SchemaRecord.Entity, depth: Int) throws(LoomError) -> EntityDescription {
            if let done = built[entity.name] { return done }
            var parent: EntityDescription?
            if let parentName = entity.superentity {
                guard depth < record.entities.count, let parentRecord = record.entities.first(where: { $0.name == parentName }) else {
                    throw LoomError(.invalidModel, "The saved model is invalid: \(entity.name) inherits from \(parentName), which is not in it or inherits from \(entity.name).", entity: entity.name)
                }
                parent = try build(parentRecord, depth: depth + 1)
            }
            let inherited = Set(parent?.properties.map(\.name) ?? [])
            let inheritedConstraints = parent?.uniquenessConstraints ?? [], inheritedIndexes = parent?.indexes ?? []
            let description = EntityDescription(
                name: entity.name, modelType: nil,
                attributes: entity.attributes.filter { !inherited.contains($0.name) }.map {
                    AttributeDescription(name: $0.name, type: $0.type, isOptional: $0.isOptional, isUnique: $0.isUnique, isIndexed: $0.isIndexed)
                },
                relationships: (entity.relationships ?? []).filter { !inherited.contains($0.name) }.map {
                    RelationshipDescription(name: $0.name, destination: $0.destination, kind: $0.kind, inverse: $0.inverse,
                                            deleteRule: $0.deleteRule, isOptional: $0.isOptional, isUnique: $0.isUnique)
                },
                uniquenessConstraints: entity.uniquenessConstraints.filter { !inheritedConstraints.contains($0) },
                indexes: entity.indexes.filter { !inheritedIndexes.contains($0) },
                superentity: parent, isAbstract: entity.isAbstract ?? false)
            built[entity.name] = description
            return description
        }
        var entities: [EntityDescription] = []
        for entity in record.entities { entities.append(try build(entity, depth: 0)) }
        try self.init(entities)
    }
}

/// A uniqueness constraint declared on an entity with sub-entities: it holds across the tables
/// of all of them, as Core Data's does across a hierarchy's one table. Each entity of a
/// hierarchy has a table of its own, whose unique index sees its rows only; a SQL store keeps
/// the constraint's values of every member's rows in one more table with a unique index
/// (``name``), filled by triggers on the members' tables, so the database itself refuses a
/// duplicate, whichever tables the two rows are in and however many writers there are.
@_spi(LoomStore) public struct HierarchyConstraint: Sendable {
    /// The entity that declares it.
    public let owner: EntityDescription
    /// Its attributes (or to-one relationships), by name.
    public let attributes: [String]
    /// The entities whose objects it covers: the owner unless abstract, and every entity that
    /// inherits from it that is not abstract.
    public let members: [EntityDescription]

    /// The name of the table that holds it in a SQL store.
    public var name: String { Self.fitting("loom_hierarchy_\(owner.name)_\(attributes.joined(separator: "_"))") }
    /// The names of its table's unique index and of its index by key.
    public var uniqueIndexName: String { Self.fitting("loom_hierarchy_\(owner.name)_\(attributes.joined(separator: "_"))_unique") }
    public var keyIndexName: String { Self.fitting("loom_hierarchy_\(owner.name)_\(attributes.joined(separator: "_"))_key") }

    /// The name of the trigger (a SQLite store's, with a suffix per event) or of the function
    /// and trigger (a PostgreSQL store's) that fill the table from `member`'s.
    public func triggerName(for member: EntityDescription) -> String {
        Self.fitting("loom_hierarchy_\(owner.name)_\(attributes.joined(separator: "_"))_\(member.name)")
    }

    /// `text` when it fits PostgreSQL's identifiers (63 bytes; longer ones are cut, and two
    /// names cut alike would be one object); else its start and a hash of all of it, which keep
    /// the names of two constraints or members apart.
    static func fitting(_ text: String) -> String {
        guard text.utf8.count > 63 else { return text }
        var hash: UInt64 = 0xcbf29ce484222325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100000001b3 }
        var start = ""
        for character in text where start.utf8.count + character.utf8.count <= 46 { start.append(character) }
        let hex = String(hash, radix: 16)
        return start + "_" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The `Codable` form of a ``Schema`` that stores save alongside the data.
@_spi(LoomStore) public struct SchemaRecord: Codable, Sendable, Equatable {
    /// An attribute as saved in the store.
    public struct Attribute: Codable, Sendable, Equatable {
        public var name: String
        public var type: AttributeType
        public var isOptional: Bool
        public var isUnique: Bool
        public var isIndexed: Bool
    }
    /// A relationship as saved in the store.
    public struct Relationship: Codable, Sendable, Equatable {
        public var name: String
        public var destination: String
        /// Always the inverse's name, whichever side named it in the model.
        public var inverse: String
        public var kind: RelationshipDescription.Kind
        public var deleteRule: DeleteRule
        public var isOptional: Bool
        public var isUnique: Bool
    }
    /// An entity as saved in the store.
    public struct Entity: Codable, Sendable, Equatable {
        public var name: String
        public var attributes: [Attribute]
        /// `nil` for an entity without relationships (and in stores saved before Loom had them).
        public var relationships: [Relationship]?
        public var uniquenessConstraints: [[String]]
        public var indexes: [[String]]
        /// The entity it inherits from; `nil` for none (and in stores saved before Loom had
        /// inheritance). Its attributes and relationships above include the inherited ones.
        public var superentity: String?
        /// `true` for an abstract entity; `nil` otherwise.
        public var isAbstract: Bool?
    }
    /// Every entity of the schema.
    public var entities: [Entity]

    /// The record of a schema, as a store saves it.
    public init(_ schema: Schema) {
        entities = schema.entities.map { entity in
            Entity(
                name: entity.name,
                attributes: entity.attributes.map {
                    Attribute(name: $0.name, type: $0.type, isOptional: $0.isOptional, isUnique: $0.isUnique, isIndexed: $0.isIndexed)
                },
                relationships: entity.relationships.isEmpty ? nil : schema.relationships(of: entity).map { r in
                    let d = r.description
                    return Relationship(name: d.name, destination: r.destination.name, inverse: r.inverse.name, kind: d.kind,
                                        deleteRule: d.deleteRule, isOptional: d.isOptional, isUnique: d.isUnique)
                },
                uniquenessConstraints: entity.uniquenessConstraints, indexes: entity.indexes,
                superentity: entity.superentity?.name, isAbstract: entity.isAbstract ? true : nil)
        }
    }

    /// See ``Schema/versionHash``.
    public var versionHash: String {
        var canonical = ""
        for entity in entities.sorted(by: { $0.name < $1.name }) {
            canonical += "E\(entity.name){"
            // Only for entities in a hierarchy, so that the hashes of models without one stay.
            if let parent = entity.superentity { canonical += "S(\(parent));" }
            if entity.isAbstract == true { canonical += "A;" }
            for a in entity.attributes.sorted(by: { $0.name < $1.name }) {
                canonical += "\(a.name):\(a.type.rawValue)\(a.isOptional ? "?" : "");"
            }
            for u in entity.uniquenessConstraints.map({ $0.sorted().joined(separator: ",") }).sorted() {
                canonical += "U(\(u));"
            }
            // Delete rules do not change the layout, so they are left out, like indexes.
            for r in (entity.relationships ?? []).sorted(by: { $0.name < $1.name }) {
                canonical += "R\(r.name)>\(r.destination)/\(r.inverse):\(r.kind.rawValue)\(r.isOptional ? "?" : "")\(r.isUnique ? "!" : "");"
            }
            canonical += "}"
        }
        // FNV-1a, 64 bit, twice with different offsets for 128 bits.
        func fnv(_ seed: UInt64) -> UInt64 {
            var h = seed
            for byte in canonical.utf8 { h ^= UInt64(byte); h = h &* 0x100000001b3 }
            return h
        }
        let a = fnv(0xcbf29ce484222325), b = fnv(0x84222325cbf29ce4)
        return String(format: "%016llx%016llx", a, b)
    }

    /// What differs between this (saved) schema and another (the model), as sentences.
    public func differences(from model: SchemaRecord) -> [String] {
        var out: [String] = []
        let saved = Dictionary(entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let wanted = Dictionary(model.entities.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for name in wanted.keys.sorted() where saved[name] == nil {
            out.append("entity \(name) is in the model but not in the store")
        }
        for name in saved.keys.sorted() where wanted[name] == nil {
            out.append("entity \(name) is in the store but not in the model")
        }
        for name in saved.keys.sorted() {
            guard let s = saved[name], let w = wanted[name] else { continue }
            if s.superentity != w.superentity {
                out.append("\(name) inherits from \(s.superentity ?? "nothing") in the store but from \(w.superentity ?? "nothing") in the model")
            }
            if (s.isAbstract ?? false) != (w.isAbstract ?? false) {
                out.append("\(name) is \(s.isAbstract ?? false ? "abstract" : "not abstract") in the store but \(w.isAbstract ?? false ? "abstract" : "not abstract") in the model")
            }
            let sa = Dictionary(s.attributes.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let wa = Dictionary(w.attributes.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            for a in wa.keys.sorted() where sa[a] == nil { out.append("\(name).\(a) is in the model but not in the store") }
            for a in sa.keys.sorted() where wa[a] == nil { out.append("\(name).\(a) is in the store but not in the model") }
            for a in sa.keys.sorted() {
                guard let x = sa[a], let y = wa[a] else { continue }
                if x.type != y.type { out.append("\(name).\(a) is \(x.type.rawValue) in the store but \(y.type.rawValue) in the model") }
                if x.isOptional != y.isOptional {
                    out.append("\(name).\(a) is \(x.isOptional ? "optional" : "required") in the store but \(y.isOptional ? "optional" : "required") in the model")
                }
            }
            let sr = Dictionary((s.relationships ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let wr = Dictionary((w.relationships ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            for r in wr.keys.sorted() where sr[r] == nil { out.append("relationship \(name).\(r) is in the model but not in the store") }
            for r in sr.keys.sorted() where wr[r] == nil { out.append("relationship \(name).\(r) is in the store but not in the model") }
            for r in sr.keys.sorted() {
                guard let x = sr[r], let y = wr[r] else { continue }
                if x.destination != y.destination || x.inverse != y.inverse {
                    out.append("relationship \(name).\(r) leads to \(x.destination).\(x.inverse) in the store but to \(y.destination).\(y.inverse) in the model")
                }
                if x.kind != y.kind { out.append("relationship \(name).\(r) is \(x.kind.rawValue) in the store but \(y.kind.rawValue) in the model") }
                if x.isOptional != y.isOptional {
                    out.append("relationship \(name).\(r) is \(x.isOptional ? "optional" : "required") in the store but \(y.isOptional ? "optional" : "required") in the model")
                }
            }
            let su = Set(s.uniquenessConstraints.map { $0.sorted() }), wu = Set(w.uniquenessConstraints.map { $0.sorted() })
            if su != wu { out.append("\(name)'s uniqueness constraints differ (store: \(su.sorted { $0.description < $1.description }), model: \(wu.sorted { $0.description < $1.description }))") }
        }
        return out
    }
}
