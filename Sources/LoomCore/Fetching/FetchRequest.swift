public import Foundation

/// What to fetch: objects of one model type, optionally filtered, sorted and windowed.
///
/// ```swift
/// var request = FetchRequest<Book>(
///     predicate: #Predicate { $0.pages > 300 && $0.title.localizedStandardContains("swift") },
///     sortBy: [SortDescriptor(\.title)])
/// request.fetchLimit = 20
/// let books = try context.fetch(request)
/// ```
///
/// Predicates are translated to the store's query language with every value bound as a
/// parameter. A construct Loom cannot translate is an error naming it (``LoomError/Code/unsupportedPredicate``),
/// never a silently wrong answer. Strings compare by their UTF-8 bytes (code-point order), in
/// the store and in memory alike.
public struct FetchRequest<Model: PersistentModel>: Sendable {
    /// Which objects to return; all when `nil`.
    public var predicate: Predicate<Model>?
    /// The order of the results; ties (and an empty list) are ordered by primary key.
    public var sortBy: [SortDescriptor<Model>]
    /// At most this many results.
    public var fetchLimit: Int?
    /// Skip this many results first.
    public var fetchOffset: Int
    /// Whether unsaved inserts, changes and deletions of the context are reflected (default
    /// `true`, as in Core Data).
    public var includesPendingChanges: Bool
    /// Whether objects come back as faults whose values load on first use (default `true`).
    /// Each fault keeps the row its fetch read, so firing it does no I/O; if a save through
    /// the same coordinator changed or deleted that row since, the fault reads the current one
    /// instead (a deleted one reads as deleted), never the replaced values. With a
    /// ``ManagedObjectContext/stalenessInterval``, the rows go to the coordinator's shared
    /// cache, which knows their age.
    public var returnsObjectsAsFaults: Bool
    /// Relationships to load for all the results at once: one query per relationship, instead
    /// of one per object when each is first used (Core Data's
    /// `relationshipKeyPathsForPrefetching`).
    ///
    /// ```swift
    /// var request = FetchRequest<Book>()
    /// request.relationshipKeyPathsForPrefetching = [\.author, \.tags]
    /// for book in try context.fetch(request) {
    ///     print(book.title, book.author?.name ?? "-", book.tags.count)   // no more queries
    /// }
    /// ```
    ///
    /// A to-one's destinations are loaded into the shared row cache (their objects stay
    /// faults that fill without I/O); a to-many is loaded for every result. Each key path names
    /// one relationship of `Model`; a key path to anything else makes the fetch throw
    /// ``LoomError/Code/unsupportedPredicate``.
    public var relationshipKeyPathsForPrefetching: [any PartialKeyPath<Model> & Sendable]
    /// Whether a fetch of an entity with sub-entities returns their objects too, each of its
    /// own class (default `true`, as Core Data's `includesSubentities`). Off, only objects of
    /// `Model`'s own entity come back (none for an abstract entity).
    ///
    /// ```swift
    /// let trips = try context.fetch(FetchRequest<Trip>())        // Trips and BusinessTrips
    /// var own = FetchRequest<Trip>()
    /// own.includesSubentities = false                            // Trips only
    /// ```
    ///
    /// A fetch across a hierarchy asks each entity's table and merges the answers in the
    /// request's order; sorted, its objects come loaded rather than as faults.
    public var includesSubentities: Bool

    /// Creates a request; see the properties for what each argument means.
    public init(
        predicate: Predicate<Model>? = nil, sortBy: [SortDescriptor<Model>] = [],
        fetchLimit: Int? = nil, fetchOffset: Int = 0
    ) {
        self.predicate = predicate
        self.sortBy = sortBy
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
        self.includesPendingChanges = true
        self.returnsObjectsAsFaults = true
        self.relationshipKeyPathsForPrefetching = []
        self.includesSubentities = true
    }

    /// The attribute a sort key path leads to: one of `entity`'s, or one of an object reached
    /// through up to three to-one relationships (`\.author?.publisher?.name`).
    ///
    /// Swift cannot take a key path apart, so candidates are built from the models' key-path
    /// tables (`@Model` generates them) and compared with the descriptor's key path.
    ///
    /// A path built by appending is never `==` to the literal it spells (appending marks its
    /// components differently), so a candidate matches by its description instead. That
    /// description prints each computed component's getter, and an attribute a sub-entity
    /// inherits has no literal on the sub-entity's type to take it from: `\Walk.dog?.name`
    /// (with `name` declared on `Animal`) uses a getter made for `Dog`, the candidate one made
    /// for any `Root: Animal`. Such a candidate matches when it has the same type, the same
    /// hash (made of the components' property identities, which agree) and the same
    /// description once the getters' addresses are left out.
    static func sortTarget(_ keyPath: AnyKeyPath, _ entity: EntityDescription, _ schema: Schema) -> (path: [ResolvedRelationship], attributeIndex: Int)? {
        if let name = Model.loomPropertyName(for: keyPath), let index = entity.attributeIndex(named: name) { return ([], index) }
        let wanted = String(describing: keyPath)
        let wantedHash = keyPath.hashValue
        let wantedShape = withoutAddresses(wanted)
        func matches(_ candidate: AnyKeyPath) -> Bool {
            if candidate == keyPath { return true }
            let description = String(describing: candidate)
            if description == wanted { return true }
            return type(of: candidate) == type(of: keyPath) && candidate.hashValue == wantedHash && withoutAddresses(description) == wantedShape
        }
        func search(_ prefix: AnyKeyPath?, optional: Bool, _ owner: EntityDescription, _ path: [ResolvedRelationship]) -> (path: [ResolvedRelationship], attributeIndex: Int)? {
            guard let model = owner.modelType else { return nil }
            func extend(_ name: String) -> AnyKeyPath? {
                guard let prefix else { return model._loomKeyPath(for: name, optionalChained: false) }
                return model._loomKeyPath(for: name, optionalChained: optional).flatMap { prefix.appending(path: $0) }
            }
            if !path.isEmpty {
                for (i, attribute) in owner.attributes.enumerated() {
                    if let candidate = extend(attribute.name), matches(candidate) { return (path, i) }
                }
            }
            guard path.count < 3 else { return nil }
            for (j, relationship) in owner.relationships.enumerated() where relationship.kind == .toOne {
                guard let next = extend(relationship.name) else { continue }
                let r = schema.relationship(j, of: owner)
                if let found = search(next, optional: optional || relationship.isOptional, r.destination, path + [r]) { return found }
            }
            return nil
        }
        return search(nil, optional: false, entity, [])
    }

    /// `description` without its hexadecimal addresses (`0x…`).
    private static func withoutAddresses(_ description: String) -> String {
        var result = ""
        var rest = Substring(description)
        while let start = rest.range(of: "0x") {
            result += rest[..<start.lowerBound]
            rest = rest[start.upperBound...].drop { $0.isHexDigit }
        }
        return result + rest
    }

    /// The relationships to prefetch, by index in `entity`.
    func prefetchedRelationships(in entity: EntityDescription) throws(LoomError) -> [Int] {
        var indexes: [Int] = []
        for keyPath in relationshipKeyPathsForPrefetching {
            guard let name = Model.loomPropertyName(for: keyPath), let j = entity.relationshipIndex(named: name) else {
                throw LoomError(.unsupportedPredicate, "A key path to prefetch on \(entity.name) does not name one of its relationships (\(entity.relationships.map(\.name).joined(separator: ", "))); paths through several relationships are not supported yet.", entity: entity.name)
            }
            if !indexes.contains(j) { indexes.append(j) }
        }
        return indexes
    }

    /// Translates this request into a store query for `entity` of `schema`.
    func storeQuery(for entity: EntityDescription, in schema: Schema) throws(LoomError) -> StoreQuery {
        var node: PredicateNode?
        if let predicate {
            var translator = PredicateTranslator(schema: schema, entity: entity, propertyName: Model.loomPropertyName(for:))
            translator.bindings[predicate.variable.key] = .object
            node = try translator.translate(predicate: predicate.expression)
        }
        var keys: [SortKey] = []
        for descriptor in sortBy {
            guard let keyPath = descriptor.keyPath,
                  let (path, index) = Self.sortTarget(keyPath, entity, schema) else {
                throw LoomError(.unsupportedSort, "A sort descriptor on \(entity.name) does not name a stored attribute; sort by a key path to one of \(entity.attributes.map(\.name).joined(separator: ", ")), or to an attribute of an object reached through to-one relationships (\\.author?.name).", entity: entity.name)
            }
            let owner = path.last?.destination ?? entity
            let name = owner.attributes[index].name
            if descriptor.stringComparator != nil {
                throw LoomError(.unsupportedSort, "Sorting \(owner.name).\(name) with a localized string comparator is not supported; use SortDescriptor(\\.\(name)) for code-point order.", entity: entity.name, attributes: [name])
            }
            if !owner.attributes[index].type.isOrderable {
                throw LoomError(.unsupportedSort, "\(owner.name).\(name) is \(English.a(owner.attributes[index].type.rawValue)) attribute, whose stored form does not sort like its values.", entity: entity.name, attributes: [name])
            }
            keys.append(SortKey(attributeIndex: index, ascending: descriptor.order == .forward, relationshipPath: path.map(\.reference)))
        }
        try StoreQuery.checkWindow(offset: fetchOffset, limit: fetchLimit, entity: entity)
        return StoreQuery(entity: entity, predicate: node, sortKeys: keys, fetchOffset: fetchOffset, fetchLimit: fetchLimit)
    }
}

/// A fetch of an entity by name, for schemas without Swift classes: results are
/// ``DynamicObject``s.
public struct DynamicFetchRequest: Sendable {
    /// The entity to fetch, by name.
    public var entityName: String
    /// A filter in Loom's own form (``PredicateNode``).
    @_spi(LoomStore) public var predicate: PredicateNode?
    /// Attribute names with their direction.
    public var sortBy: [(name: String, ascending: Bool)]
    /// At most this many results; skip `fetchOffset` first; reflect unsaved changes (default `true`).
    public var fetchLimit: Int?
    public var fetchOffset: Int
    public var includesPendingChanges: Bool

    /// Creates a request for the entity named `entityName`.
    @_spi(LoomStore) public init(entityName: String, predicate: PredicateNode? = nil, sortBy: [(name: String, ascending: Bool)] = [], fetchLimit: Int? = nil, fetchOffset: Int = 0) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortBy = sortBy
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
        self.includesPendingChanges = true
    }

    func storeQuery(in schema: Schema) throws(LoomError) -> StoreQuery {
        let entity = try schema.requireEntity(named: entityName)
        var keys: [SortKey] = []
        for (name, ascending) in sortBy {
            guard let index = entity.attributeIndex(named: name) else {
                throw LoomError(.unsupportedSort, "\(entityName) has no attribute '\(name)' to sort by.", entity: entityName, attributes: [name])
            }
            keys.append(SortKey(attributeIndex: index, ascending: ascending))
        }
        if let predicate { try predicate.validate(for: entity, in: schema) }
        try StoreQuery.checkWindow(offset: fetchOffset, limit: fetchLimit, entity: entity)
        return StoreQuery(entity: entity, predicate: predicate, sortKeys: keys, fetchOffset: fetchOffset, fetchLimit: fetchLimit)
    }
}

extension PredicateNode {
    /// Checks that every attribute position exists in the entity it is evaluated on, and that
    /// every relationship exists and has the right kind.
    func validate(for entity: EntityDescription, in schema: Schema) throws(LoomError) {
        func relationship(_ reference: RelationshipReference, toMany: Bool) throws(LoomError) -> ResolvedRelationship {
            guard reference.entityName == entity.name, let r = schema.relationship(reference), r.description.isToMany == toMany else {
                throw LoomError(.unsupportedPredicate, "A predicate on \(entity.name) refers to \(reference), which is not a \(toMany ? "to-many" : "to-one") relationship of \(entity.name).", entity: entity.name)
            }
            return r
        }
        switch self {
        case .attribute(let i):
            guard i >= 0, i < entity.storedValueCount else {
                throw LoomError(.unsupportedPredicate, "A predicate on \(entity.name) refers to attribute #\(i), which does not exist.", entity: entity.name)
            }
        case .constant, .primaryKey: break
        case .compare(_, let a, let b), .and(let a, let b), .or(let a, let b), .coalesce(let a, let b),
             .nullPropagating(let a, let b), .string(_, let a, let b), .arithmetic(_, let a, let b):
            try a.validate(for: entity, in: schema); try b.validate(for: entity, in: schema)
        case .not(let a), .lowercase(let a), .length(let a), .negate(let a), .isIn(let a, _):
            try a.validate(for: entity, in: schema)
        case .conditional(let a, let b, let c):
            try a.validate(for: entity, in: schema); try b.validate(for: entity, in: schema); try c.validate(for: entity, in: schema)
        case .toOne(let reference, let node):
            try node.validate(for: relationship(reference, toMany: false).destination, in: schema)
        case .anyRelated(let reference, let node), .allRelated(let reference, let node):
            try node.validate(for: relationship(reference, toMany: true).destination, in: schema)
        case .relatedCount(let reference):
            _ = try relationship(reference, toMany: true)
        }
    }

    /// Every chain of relationships the node follows from its entity, each ending at a
    /// relationship the node reads through (prefixes are implied).
    var relationshipPaths: [[RelationshipReference]] {
        switch self {
        case .attribute, .constant, .primaryKey: return []
        case .compare(_, let a, let b), .and(let a, let b), .or(let a, let b), .coalesce(let a, let b),
             .nullPropagating(let a, let b), .string(_, let a, let b), .arithmetic(_, let a, let b):
            return a.relationshipPaths + b.relationshipPaths
        case .not(let a), .lowercase(let a), .length(let a), .negate(let a), .isIn(let a, _):
            return a.relationshipPaths
        case .conditional(let a, let b, let c):
            return a.relationshipPaths + b.relationshipPaths + c.relationshipPaths
        case .toOne(let reference, let node), .anyRelated(let reference, let node), .allRelated(let reference, let node):
            let inner = node.relationshipPaths
            return inner.isEmpty ? [[reference]] : inner.map { [reference] + $0 }
        case .relatedCount(let reference):
            return [[reference]]
        }
    }
}

extension StoreQuery {
    /// Refuses a negative offset or limit, which stores would read differently (SQLite takes a
    /// negative LIMIT as "no limit").
    static func checkWindow(offset: Int, limit: Int?, entity: EntityDescription) throws(LoomError) {
        guard offset >= 0, (limit ?? 0) >= 0 else {
            throw LoomError(.invalidRequest, "A fetch of \(entity.name) has a negative fetchOffset or fetchLimit; use 0 or more, or nil for no limit.", entity: entity.name)
        }
    }
}
