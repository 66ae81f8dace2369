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
