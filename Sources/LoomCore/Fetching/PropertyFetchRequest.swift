public import Foundation

/// A fetch of values instead of objects: chosen attributes of each object, distinct
/// combinations of them, or counts, sums, minimums, maximums and averages, overall or per
/// group (Core Data's `.dictionaryResultType` with `propertiesToFetch`,
/// `propertiesToGroupBy`, `returnsDistinctResults` and `NSExpressionDescription`).
///
/// ```swift
/// var request = PropertyFetchRequest<Book>(
///     properties: [.value(\.genre), .count(as: "books"), .sum(\.pages, as: "pages")],
///     groupBy: [\.genre])
/// request.sortBy = [ResultSort("pages", order: .reverse)]
/// for row in try context.fetch(request) {
///     print(try row["genre", as: Genre.self], try row["books", as: Int.self], try row["pages", as: Int.self])
/// }
/// ```
///
/// The store computes the answer (one SQL statement for SQLite), without creating objects.
/// Unlike Core Data, whose dictionary results ignore unsaved changes, Loom reflects them when
/// ``includesPendingChanges`` is `true` (the default) and the context has unsaved changes to
/// the entity or to the objects the properties read: the answer is then computed in memory,
/// with SQLite's rules, over exactly the objects a ``FetchRequest`` with the same predicate
/// would return.
///
/// When ``groupBy`` is not empty, or any property is an aggregate, each result row stands for
/// a group of objects (all of them when ``groupBy`` is empty), and every ``FetchedProperty/value(_:as:)``
/// property must be one of ``groupBy`` — as in Core Data.
public struct PropertyFetchRequest<Model: PersistentModel>: Sendable {
    /// Which objects to read; all when `nil`.
    public var predicate: Predicate<Model>?
    /// The values of each result row, in order; each has a name, unique in the request.
    public var properties: [FetchedProperty<Model>]
    /// Key paths to attributes (of `Model`, or reached through to-one relationships) whose
    /// equal values make a group.
    public var groupBy: [any PartialKeyPath<Model> & Sendable]
    /// The order of the results, by result name. Ties are ordered by every value (distinct),
    /// else by the group values (grouped), else by primary key (one row per object), so the
    /// order is always the same on every store.
    public var sortBy: [ResultSort]
    /// At most this many results; skip `fetchOffset` first.
    public var fetchLimit: Int?
    public var fetchOffset: Int
    /// Whether identical result rows are returned once (default `false`).
    public var returnsDistinctResults: Bool
    /// Whether this context's unsaved inserts, changes and deletions are reflected (default
    /// `true`). `false` answers from what the context's parent, or the store, holds.
    public var includesPendingChanges: Bool

    /// Creates a request; see the properties for what each argument means.
    public init(predicate: Predicate<Model>? = nil, properties: [FetchedProperty<Model>], groupBy: [any PartialKeyPath<Model> & Sendable] = [],
                sortBy: [ResultSort] = [], fetchLimit: Int? = nil, fetchOffset: Int = 0) {
        self.predicate = predicate
        self.properties = properties
        self.groupBy = groupBy
        self.sortBy = sortBy
        self.fetchLimit = fetchLimit
        self.fetchOffset = fetchOffset
        self.returnsDistinctResults = false
        self.includesPendingChanges = true
    }

    /// The store query, the result names, and the attributes summed (for overflow messages).
    func aggregateQuery(for entity: EntityDescription, in schema: Schema) throws(LoomError) -> (query: AggregateQuery, names: [String], summed: [String]) {
        let predicateNode = try FetchRequest<Model>(predicate: predicate, fetchLimit: fetchLimit, fetchOffset: fetchOffset)
            .storeQuery(for: entity, in: schema).predicate
        guard !properties.isEmpty else {
            throw LoomError(.invalidRequest, "A values fetch of \(entity.name) names no properties; add .value(\\.attribute), .count(as:) or another FetchedProperty.", entity: entity.name)
        }
        func resolve(_ keyPath: any PartialKeyPath<Model> & Sendable, _ use: String) throws(LoomError) -> (node: PredicateNode, name: String, owner: EntityDescription, attribute: AttributeDescription) {
            guard let (path, index) = FetchRequest<Model>.sortTarget(keyPath, entity, schema) else {
                throw LoomError(.invalidRequest, "A key path to \(use) on \(entity.name) does not name a stored attribute; use a key path to one of \(entity.attributes.map(\.name).joined(separator: ", ")), or to an attribute of an object reached through to-one relationships (\\.author?.name).", entity: entity.name)
            }
            let owner = path.last?.destination ?? entity
            let node = path.reversed().reduce(PredicateNode.attribute(index)) { .toOne($1.reference, $0) }
            let name = (path.map(\.description.name) + [owner.attributes[index].name]).joined(separator: ".")
            return (node, name, owner, owner.attributes[index])
        }
        var groups: [PredicateNode] = []
        for keyPath in groupBy { groups.append(try resolve(keyPath, "group by").node) }
        var columns: [AggregateQuery.Column] = []
        var names: [String] = []
        var summed: [String] = []
        var ungrouped: [String] = []
        for property in properties {
            switch property.kind {
            case .countRows:
                columns.append(.countRows)
                names.append(property.name ?? "count")
            case .value:
                let target = try resolve(property.keyPath!, "fetch")
                columns.append(.value(target.node))
                names.append(property.name ?? target.name)
                if !groups.contains(target.node) { ungrouped.append(target.name) }
            case .aggregate(let function):
                let target = try resolve(property.keyPath!, function.rawValue)
                let type = target.attribute.type
                switch function {
                case .sum, .average:
                    guard [.integer16, .integer32, .integer64, .double, .float].contains(type) else {
                        throw LoomError(.invalidRequest, "\(target.owner.name).\(target.attribute.name) is \(English.a(type.rawValue)) attribute; \(function == .sum ? "sum" : "average") needs a numeric one (an integer, Double or Float).", entity: entity.name, attributes: [target.name])
                    }
                    if function == .sum { summed.append(target.name) }
                case .min, .max:
                    guard type.isOrderable else {
                        throw LoomError(.invalidRequest, "\(target.owner.name).\(target.attribute.name) is \(English.a(type.rawValue)) attribute, whose stored form does not order like its values; min and max need an orderable one.", entity: entity.name, attributes: [target.name])
                    }
                case .count: break
                }
                columns.append(.aggregate(function, target.node))
                names.append(property.name ?? "\(function.rawValue)(\(target.name))")
            }
        }
        var seen: Set<String> = []
        for name in names where !seen.insert(name).inserted {
            throw LoomError(.invalidRequest, "A values fetch of \(entity.name) has two results named \"\(name)\"; give each property its own name with as:.", entity: entity.name)
        }
        let isGrouped = !groups.isEmpty || columns.contains(where: \.isAggregate)
        if isGrouped, !ungrouped.isEmpty {
            throw LoomError(.invalidRequest, "A values fetch of \(entity.name) groups its results but also fetches \(ungrouped.joined(separator: ", ")), which is not grouped by; add it to groupBy, or fetch an aggregate of it.", entity: entity.name, attributes: ungrouped)
        }
        var sortKeys: [AggregateQuery.SortKey] = []
        for sort in sortBy {
            guard let column = names.firstIndex(of: sort.name) else {
                throw LoomError(.unsupportedSort, "A values fetch of \(entity.name) sorts by \"\(sort.name)\", which is not one of its results (\(names.joined(separator: ", "))).", entity: entity.name)
            }
            sortKeys.append(AggregateQuery.SortKey(column: column, ascending: sort.order == .forward))
        }
        let query = AggregateQuery(entity: entity, predicate: predicateNode, columns: columns, groupBy: groups, isDistinct: returnsDistinctResults,
                                   sortKeys: sortKeys, fetchOffset: fetchOffset, fetchLimit: fetchLimit)
        return (query, names, summed)
    }
}

/// One value of each row a ``PropertyFetchRequest`` returns: an attribute, or an aggregate
/// over the objects the row stands for, with the name it has in the row.
///
/// ```swift
/// let properties: [FetchedProperty<Novel>] = [
///     .value(\.author?.name, as: "author"),   // an attribute reached through a to-one
///     .count(as: "novels"),
///     .average(\.pages, as: "averagePages"),
/// ]
/// ```
///
/// A name defaults to the attribute's (`"title"`, `"author.name"`) for a value, `"count"` for
/// ``count(as:)``, and `"sum(pages)"` and the like for the other aggregates.
public struct FetchedProperty<Model: PersistentModel>: Sendable {
    enum Kind: Sendable {
        case value, countRows
        case aggregate(AggregateQuery.Function)
    }

    let kind: Kind
    let keyPath: (any PartialKeyPath<Model> & Sendable)?
    /// The name of the value in each result row, when given.
    public let name: String?

    /// The value of an attribute, of `Model` or of an object reached through to-one
    /// relationships (`\.author?.name`): NULL when a relationship on the way is empty.
    public static func value(_ keyPath: any PartialKeyPath<Model> & Sendable, as name: String? = nil) -> Self {
        Self(kind: .value, keyPath: keyPath, name: name)
    }

    /// How many objects the row stands for (`COUNT(*)`): 0 for an empty result.
    public static func count(as name: String = "count") -> Self {
        Self(kind: .countRows, keyPath: nil, name: name)
    }

    /// How many of the objects have a value (not `nil`) at `keyPath`.
    public static func count(of keyPath: any PartialKeyPath<Model> & Sendable, as name: String? = nil) -> Self {
        Self(kind: .aggregate(.count), keyPath: keyPath, name: name)
    }

    /// The sum of a numeric attribute, `nil` values ignored; `nil` when there are no values.
    /// An integer attribute sums to an integer, and an overflow throws
    /// ``LoomError/Code/integerOverflow``; a `Double` or `Float` one to a `Double`.
    public static func sum(_ keyPath: any PartialKeyPath<Model> & Sendable, as name: String? = nil) -> Self {
        Self(kind: .aggregate(.sum), keyPath: keyPath, name: name)
    }

    /// The smallest value, in the store's order; `nil` when there are no values.
    public static func min(_ keyPath: any PartialKeyPath<Model> & Sendable, as name: String? = nil) -> Self {
        Self(kind: .aggregate(.min), keyPath: keyPath, name: name)
    }

    /// The largest value, in the store's order; `nil` when there are no values.
    public static func max(_ keyPath: any PartialKeyPath<Model> & Sendable, as name: String? = nil) -> Self {
        Self(kind: .aggregate(.max), keyPath: keyPath, name: name)
    }

    /// The mean of a numeric attribute as a `Double`, `nil` values ignored; `nil` when there
    /// are no values.
    public static func average(_ keyPath: any PartialKeyPath<Model> & Sendable, as name: String? = nil) -> Self {
        Self(kind: .aggregate(.average), keyPath: keyPath, name: name)
    }
}

/// One ordering term of a ``PropertyFetchRequest``: a result, by name.
///
/// ```swift
/// request.sortBy = [ResultSort("books", order: .reverse), ResultSort("genre")]
/// ```
public struct ResultSort: Sendable, Hashable {
    /// The result's name, as given to its ``FetchedProperty``.
    public var name: String
    /// `.forward` for ascending, `.reverse` for descending.
    public var order: SortOrder

    public init(_ name: String, order: SortOrder = .forward) {
        self.name = name
        self.order = order
    }
}
