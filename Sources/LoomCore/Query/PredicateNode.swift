import Foundation

/// A store-independent filter: what a `#Predicate` becomes once Loom has translated it.
///
/// Stores translate nodes to their query language (SQLite: SQL with bound parameters); the
/// same nodes are evaluated in memory for unsaved changes and by ``InMemoryStore``. Both follow
/// SQLite's rules (three-valued logic with NULL, numeric comparison across integer and real,
/// binary string comparison), so a query gives the same answer wherever it runs.
///
/// Nodes inside ``toOne(_:_:)``, ``anyRelated(_:_:)`` and ``allRelated(_:_:)`` are evaluated on
/// the related object: their ``attribute(_:)`` positions are the destination entity's.
@_spi(LoomStore) public indirect enum PredicateNode: Sendable, Hashable {
    /// A constant, bound as a parameter.
    case constant(StoredValue)
    /// An attribute of the object being tested, by position.
    case attribute(Int)
    /// The object's primary key.
    case primaryKey
    case compare(ComparisonOperator, PredicateNode, PredicateNode)
    case and(PredicateNode, PredicateNode)
    case or(PredicateNode, PredicateNode)
    case not(PredicateNode)
    /// The first operand unless it is NULL, else the second (`??`).
    case coalesce(PredicateNode, PredicateNode)
    /// NULL when the first operand is NULL, else the second (`optional.flatMap { … }`).
    case nullPropagating(PredicateNode, PredicateNode)
    /// `test ? a : b`.
    case conditional(PredicateNode, PredicateNode, PredicateNode)
    case string(StringOperator, PredicateNode, PredicateNode)
    /// Lowercased text.
    case lowercase(PredicateNode)
    /// Text length in characters, or blob length in bytes.
    case length(PredicateNode)
    /// Whether the value is one of the constants.
    case isIn(PredicateNode, [StoredValue])
    case arithmetic(ArithmeticOperator, PredicateNode, PredicateNode)
    case negate(PredicateNode)
    /// The node evaluated on the object a to-one relationship leads to; NULL when it is empty
    /// (`$0.author?.name`).
    case toOne(RelationshipReference, PredicateNode)
    /// 1 when at least one object of a to-many relationship satisfies the test (true, not
    /// NULL), else 0 (`$0.books.contains { … }`, SQL `EXISTS`).
    case anyRelated(RelationshipReference, PredicateNode)
    /// 1 when every object of a to-many relationship satisfies the test (true, not NULL), else
    /// 0; 1 for an empty relationship (`$0.books.allSatisfy { … }`).
    case allRelated(RelationshipReference, PredicateNode)
    /// How many objects a to-many relationship holds (`$0.books.count`).
    case relatedCount(RelationshipReference)

    /// How `.compare` compares its two operands.
    public enum ComparisonOperator: String, Sendable, Hashable {
        /// Equality where NULL equals NULL (SQL `IS`), as Swift's `==` on optionals.
        case equal
        /// Inequality where NULL equals NULL (SQL `IS NOT`), as Swift's `!=` on optionals.
        case notEqual
        case less, lessOrEqual, greater, greaterOrEqual
    }

    /// What `.string` tests of its first operand with its second.
    public enum StringOperator: String, Sendable, Hashable {
        case contains, hasPrefix, hasSuffix
        /// Case- and diacritic-insensitive containment (`localizedStandardContains`).
        case containsIgnoringCaseAndDiacritics
    }

    /// SQLite arithmetic: integer overflow becomes real, division by zero NULL.
    public enum ArithmeticOperator: String, Sendable, Hashable {
        case add, subtract, multiply, divide, remainder
    }
}

/// The string semantics shared by SQL functions and the in-memory evaluator, so that both give
/// the same answer. Non-text operands give NULL.
@_spi(LoomStore) public enum LoomStringFunctions {
    /// Applies a string operator, as both the SQL functions and the in-memory evaluator do.
    public static func evaluate(_ op: PredicateNode.StringOperator, _ a: String, _ b: String) -> Bool {
        switch op {
        case .contains: b.isEmpty || a.contains(b)
        case .hasPrefix: a.hasPrefix(b)
        case .hasSuffix: a.hasSuffix(b)
        case .containsIgnoringCaseAndDiacritics:
            b.isEmpty || a.range(of: b, options: [.caseInsensitive, .diacriticInsensitive]) != nil
        }
    }

    /// Lowercases text (`localizedLowercase` in a predicate).
    public static func lowercase(_ a: String) -> String { a.lowercased() }

    /// Characters of text, bytes of a blob, NULL otherwise (`.count` in a predicate).
    public static func length(_ value: StoredValue) -> StoredValue {
        switch value {
        case .text(let s): .integer(Int64(s.count))
        case .blob(let d): .integer(Int64(d.count))
        case .null: .null
        default: .null
        }
    }
}

extension PredicateNode {
    /// Evaluates the node for one object. `value(i)` returns the value in slot `i`.
    /// Relationship nodes see empty relationships here; stores and contexts evaluate them
    /// against their objects.
    public func evaluate(key: Int64, _ value: (Int) -> StoredValue) -> StoredValue {
        withoutActuallyEscaping(value) { value in
            evaluate((), in: FlatPredicateGraph(rowKey: key, values: value))
        }
    }

    /// Whether an object matches: the node evaluates to true (not false, not NULL).
    public func matches(key: Int64, _ value: (Int) -> StoredValue) -> Bool {
        evaluate(key: key, value).truth == true
    }

    /// Whether `row` of `graph` matches.
    func matches<G: PredicateGraph>(_ row: G.Row, in graph: G) -> Bool {
        evaluate(row, in: graph).truth == true
    }

    /// Evaluates the node for `row` of `graph`.
    func evaluate<G: PredicateGraph>(_ row: G.Row, in graph: G) -> StoredValue {
        func eval(_ node: PredicateNode) -> StoredValue { node.evaluate(row, in: graph) }
        switch self {
        case .constant(let v): return v
        case .attribute(let i): return graph.value(i, of: row)
        case .primaryKey: return .integer(graph.key(of: row))
        case .toOne(let relationship, let node):
            guard let destination = graph.destination(of: row, relationship) else { return .null }
            return node.evaluate(destination, in: graph)
        case .anyRelated(let relationship, let test):
            for destination in graph.destinations(of: row, relationship) where test.matches(destination, in: graph) { return .bool(true) }
            return .bool(false)
        case .allRelated(let relationship, let test):
            for destination in graph.destinations(of: row, relationship) where !test.matches(destination, in: graph) { return .bool(false) }
            return .bool(true)
        case .relatedCount(let relationship):
            return .integer(Int64(graph.destinations(of: row, relationship).count))
        case .compare(let op, let l, let r):
            let a = eval(l), b = eval(r)
            switch op {
            case .equal: return .bool(a.isSame(as: b))
            case .notEqual: return .bool(!a.isSame(as: b))
            default:
                if a.isNull || b.isNull { return .null }
                let c = StoredValue.compare(a, b)
                switch op {
                case .less: return .bool(c < 0)
                case .lessOrEqual: return .bool(c <= 0)
                case .greater: return .bool(c > 0)
                default: return .bool(c >= 0)
                }
            }
        case .and(let l, let r):
            let a = eval(l).truth
            if a == false { return .bool(false) }
            let b = eval(r).truth
            if b == false { return .bool(false) }
            if a == nil || b == nil { return .null }
            return .bool(true)
        case .or(let l, let r):
            let a = eval(l).truth
            if a == true { return .bool(true) }
            let b = eval(r).truth
            if b == true { return .bool(true) }
            if a == nil || b == nil { return .null }
            return .bool(false)
        case .not(let n):
            guard let t = eval(n).truth else { return .null }
            return .bool(!t)
        case .coalesce(let l, let r):
            let a = eval(l)
            return a.isNull ? eval(r) : a
        case .nullPropagating(let test, let then):
            return eval(test).isNull ? .null : eval(then)
        case .conditional(let test, let a, let b):
            return eval(test).truth == true ? eval(a) : eval(b)
        case .string(let op, let l, let r):
            guard case .text(let a) = eval(l), case .text(let b) = eval(r) else { return .null }
            return .bool(LoomStringFunctions.evaluate(op, a, b))
        case .lowercase(let n):
            guard case .text(let a) = eval(n) else { return .null }
            return .text(LoomStringFunctions.lowercase(a))
        case .length(let n):
            return LoomStringFunctions.length(eval(n))
        case .isIn(let n, let list):
            let a = eval(n)
            if a.isNull { return .null }
            var sawNull = false
            for item in list {
                if item.isNull { sawNull = true; continue }
                if StoredValue.compare(a, item) == 0 { return .bool(true) }
            }
            return sawNull ? .null : .bool(false)
        case .arithmetic(let op, let l, let r):
            return StoredValue.arithmetic(op, eval(l), eval(r))
        case .negate(let n):
            switch eval(n) {
            case .integer(let v): return v == .min ? .real(-Double(v)) : .integer(-v)
            case .real(let v): return .real(-v)
            default: return .null
            }
        }
    }

}

extension StoredValue {
    static func bool(_ b: Bool) -> StoredValue { .integer(b ? 1 : 0) }

    /// SQL truth: NULL is unknown (`nil`), numbers are true when non-zero.
    var truth: Bool? {
        switch self {
        case .null: nil
        case .integer(let v): v != 0
        case .real(let v): v != 0
        case .text(let s): (Double(s) ?? 0) != 0
        case .blob: false
        }
    }

    /// SQLite arithmetic: integers overflow into reals, division by zero is NULL.
    static func arithmetic(_ op: PredicateNode.ArithmeticOperator, _ a: StoredValue, _ b: StoredValue) -> StoredValue {
        switch (a, b) {
        case (.integer(let x), .integer(let y)):
            switch op {
            case .add:
                let (r, o) = x.addingReportingOverflow(y); return o ? .real(Double(x) + Double(y)) : .integer(r)
            case .subtract:
                let (r, o) = x.subtractingReportingOverflow(y); return o ? .real(Double(x) - Double(y)) : .integer(r)
            case .multiply:
                let (r, o) = x.multipliedReportingOverflow(by: y); return o ? .real(Double(x) * Double(y)) : .integer(r)
            case .divide:
                if y == 0 { return .null }
                if x == .min && y == -1 { return .real(-Double(x)) }
                return .integer(x / y)
            case .remainder:
                if y == 0 { return .null }
                if y == -1 { return .integer(0) }
                return .integer(x % y)
            }
        default:
            guard let x = a.numeric, let y = b.numeric else { return .null }
            switch op {
            case .add: return .real(x + y)
            case .subtract: return .real(x - y)
            case .multiply: return .real(x * y)
            case .divide: return y == 0 ? .null : .real(x / y)
            case .remainder:
                // SQLite casts both operands to integers for %.
                let xi = Int64(exactly: x.rounded(.towardZero)) ?? 0, yi = Int64(exactly: y.rounded(.towardZero)) ?? 0
                if yi == 0 { return .null }
                return .real(Double(yi == -1 ? 0 : xi % yi))
            }
        }
    }

    var numeric: Double? {
        switch self {
        case .integer(let v): Double(v)
        case .real(let v): v
        default: nil
        }
    }
}
