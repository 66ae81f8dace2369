/// What to compute for a values fetch: chosen values of each matching row, distinct values, or
/// aggregates per group (Core Data's dictionary result type). The store SPI behind
/// ``ManagedObjectContext/fetch(_:)-(PropertyFetchRequest<Model>)``.
///
/// The query's shape decides what a result row is:
/// - no aggregate column and no ``groupBy``: one row per matching object (one per distinct
///   combination of values with ``isDistinct``);
/// - otherwise one row per group of objects whose ``groupBy`` values are equal (SQLite's
///   equality: NULLs form one group, `1` equals `1.0`), or one row for all of them when
///   ``groupBy`` is empty, even when no object matches (`COUNT` 0, the others NULL).
///
/// Every column is computed with SQLite's rules, in the store and in memory alike: aggregates
/// ignore NULLs; `sum` of integers is an integer and throws
/// ``LoomError/Code/integerOverflow`` past 64 bits, `sum` with any real is real; `average` is
/// real; `min` and `max` compare as ``StoredValue/compare(_:_:)``; `sum`, `min`, `max` and
/// `average` of no values are NULL.
///
/// Rows come back ordered by ``sortKeys``, then by every column ascending (distinct), else by
/// the group values ascending (grouped), else by primary key (one row per object), so that
/// every store gives the same rows in the same order. ``fetchOffset`` and ``fetchLimit`` then
/// apply.
@_spi(LoomStore) public struct AggregateQuery: Sendable {
    /// An aggregate function over the values of one node.
    public enum Function: String, Sendable, Hashable {
        /// How many values are not NULL.
        case count
        case sum, min, max, average
    }

    /// One column of the result.
    public enum Column: Sendable, Hashable {
        /// A value of the object (one row per object), or of its group (the node must then be
        /// one of ``AggregateQuery/groupBy``).
        case value(PredicateNode)
        /// How many objects the row stands for (`COUNT(*)`).
        case countRows
        /// An aggregate of a value over the objects the row stands for.
        case aggregate(Function, PredicateNode)

        /// Whether the column aggregates several objects.
        public var isAggregate: Bool {
            if case .value = self { return false }
            return true
        }
    }

    /// One ordering term: a column, by position in ``AggregateQuery/columns``.
    public struct SortKey: Sendable, Hashable {
        public var column: Int
        public var ascending: Bool

        public init(column: Int, ascending: Bool = true) {
            self.column = column
            self.ascending = ascending
        }
    }

    /// The entity queried and the filter (all objects when `nil`).
    public var entity: EntityDescription
    public var predicate: PredicateNode?
    /// The result's columns, in order.
    public var columns: [Column]
    /// The values that make a group; see the type's description.
    public var groupBy: [PredicateNode]
    /// Whether identical rows are returned once (SQL `DISTINCT`).
    public var isDistinct: Bool
    /// The order; ties are broken as the type's description says.
    public var sortKeys: [SortKey]
    public var fetchOffset: Int
    public var fetchLimit: Int?

    public init(entity: EntityDescription, predicate: PredicateNode? = nil, columns: [Column], groupBy: [PredicateNode] = [],
                isDistinct: Bool = false, sortKeys: [SortKey] = [], fetchOffset: Int = 0, fetchLimit: Int? = nil) {
        self.entity = entity
        self.predicate = predicate
        self.columns = columns
        self.groupBy = groupBy
        self.isDistinct = isDistinct
        self.sortKeys = sortKeys
        self.fetchOffset = fetchOffset
        self.fetchLimit = fetchLimit
    }

    /// Whether a row stands for a group of objects rather than for one object.
    public var isGrouped: Bool { !groupBy.isEmpty || columns.contains(where: \.isAggregate) }

    /// The nodes the columns and groups read, besides the predicate.
    var valueNodes: [PredicateNode] {
        var nodes = groupBy
        for column in columns {
            switch column {
            case .value(let node), .aggregate(_, let node): nodes.append(node)
            case .countRows: break
            }
        }
        return nodes
    }

    /// Every chain of to-one relationships the columns and groups follow.
    var valueRelationshipPaths: [[RelationshipReference]] { valueNodes.flatMap(\.relationshipPaths) }
}

extension LoomError.Code {
    /// An integer result does not fit in 64 bits (SQLite's "integer overflow", raised by `SUM`).
    public static let integerOverflow = LoomError.Code(rawValue: "integerOverflow")
}

extension StoreReading {
    /// Computes an aggregate query in memory over the rows ``fetch(_:)`` returns, following
    /// to-one relationships with ``rows(of:keys:)``: the default for stores without a query
    /// language of their own. ``InMemoryStore`` uses it; `SQLiteStore` runs SQL instead.
    ///
    /// - Complexity: one fetch, plus one ``rows(of:keys:)`` per relationship the columns follow.
    @_spi(LoomStore) public func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        let rows = try fetch(StoreQuery(entity: query.entity, predicate: query.predicate))
        let graph = StoreGraph(store: self)
        let graphRows = rows.map { StoreGraph.Row(entity: query.entity, row: $0) }
        for node in query.valueNodes { try graph.warm(node, from: graphRows) }
        return try AggregateEvaluator.evaluate(query, rows: graphRows, in: graph)
    }
}

/// A store's rows as a predicate graph that follows to-one relationships by key, loading each
/// level of a path for all rows in one ``PersistentStore/rows(of:keys:)`` call.
///
/// Not `Sendable`: built for one query.
final class StoreGraph: PredicateGraph {
    struct Row {
        let entity: EntityDescription
        let row: StoreRow
    }

    let store: any StoreReading
    private var loaded: [ObjectIdentifier: [Int64: StoreRow]] = [:]

    init(store: any StoreReading) { self.store = store }

    func key(of row: Row) -> Int64 { row.row.key }
    func value(_ index: Int, of row: Row) -> StoredValue { row.row.values[index] }

    func destination(of row: Row, _ relationship: RelationshipReference) -> Row? {
        guard let r = store.schema.relationship(relationship), case .foreignKey(let slot) = r.storage,
              case .integer(let key) = row.row.values[slot] else { return nil }
        return loaded[ObjectIdentifier(r.destination)]?[key].map { Row(entity: r.destination, row: $0) }
    }

    /// Aggregate value nodes follow to-one relationships only.
    func destinations(of row: Row, _ relationship: RelationshipReference) -> [Row] {
        destination(of: row, relationship).map { [$0] } ?? []
    }

    /// Loads, level by level, the objects `node`'s to-one chains reach from `rows`. Only
    /// objects loaded here are seen by ``destination(of:_:)``.
    func warm(_ node: PredicateNode, from rows: [Row]) throws(LoomError) {
        for path in node.relationshipPaths {
            var level = rows
            for reference in path {
                guard let r = store.schema.relationship(reference), case .foreignKey(let slot) = r.storage else { break }
                let id = ObjectIdentifier(r.destination)
                var keys: Set<Int64> = []
                for row in level {
                    if case .integer(let key) = row.row.values[slot], loaded[id]?[key] == nil { keys.insert(key) }
                }
                for found in try store.rows(of: r.destination, keys: keys.sorted()) { loaded[id, default: [:]][found.key] = found }
                level = level.compactMap { destination(of: $0, reference) }
            }
        }
    }
}
