import Foundation
@_spi(LoomStore) import LoomCore

extension SQLGenerator {
    /// The `SELECT` texts of queries already written, by shape.
    ///
    /// Queries that differ only in their constants (an app's `#Predicate` with other values,
    /// a range query run with other bounds) have the same text, since constants are bound as
    /// parameters. Writing it again was a few thousand string appends per query; the shape — the
    /// predicate with each constant replaced by a placeholder of the same kind, the sort and
    /// whether there is a window — is hashed instead, and the constants are collected in the
    /// order the text binds them.
    final class QueryTexts: Sendable {
        /// What a query's text depends on besides the generator's schema and dialect.
        struct Shape: Hashable {
            /// An entity of the schema, which keeps it alive (see ``SQLGenerator/cachedSelect(_:)``).
            let entity: ObjectIdentifier
            let predicate: PredicateNode?
            let sortKeys: [SortKey]
            let windowed: Bool
        }

        /// Beyond this many shapes the texts are forgotten, so that an app making queries of
        /// ever new shapes does not grow the cache without bound.
        static let capacity = 256
        /// Behind Loom's `Locked` (an `NSLock`), not `Mutex`, which ThreadSanitizer cannot see on Linux.
        private let texts = Locked<[Shape: String]>([:])

        func text(for shape: Shape) -> String? {
            texts.withLock { $0[shape] }
        }

        func remember(_ text: String, for shape: Shape) {
            texts.withLock { texts in
                if texts.count >= Self.capacity { texts.removeAll() }
                texts[shape] = text
            }
        }
    }

    /// ``select(_:)`` through ``QueryTexts``: the arguments are collected from the query, the text
    /// is written only for a shape not seen before. A text is remembered only when the collected
    /// arguments are exactly the ones writing it bound, so a shape whose text binds its constants
    /// otherwise is written every time instead of getting wrong arguments.
    func cachedSelect(_ query: StoreQuery) -> (String, [StoredValue]) {
        // An entity outside the schema could be freed and its identifier reused.
        guard texts[ObjectIdentifier(query.entity)] != nil else { return select(query, resultColumns: columns(query.entity, alias: "t0")) }
        var arguments: [StoredValue] = []
        let predicate = query.predicate?.shape(collecting: &arguments)
        let window = Builder.window(limit: query.fetchLimit, offset: query.fetchOffset, dialect)
        if let window { arguments += window }
        let shape = QueryTexts.Shape(entity: ObjectIdentifier(query.entity), predicate: predicate, sortKeys: query.sortKeys, windowed: window != nil)
        if let text = queryTexts.text(for: shape) { return (text, arguments) }
        let (text, written) = select(query, resultColumns: columns(query.entity, alias: "t0"))
        if written == arguments { queryTexts.remember(text, for: shape) }
        return (text, written)
    }
}

extension PredicateNode {
    /// The node with every constant replaced by a placeholder of the same kind (what a query's
    /// text depends on is whether a constant is NULL), and its constants appended to
    /// `constants` in the order ``SQLGenerator`` binds them: depth first, left to right.
    func shape(collecting constants: inout [StoredValue]) -> PredicateNode {
        func inner(_ node: PredicateNode) -> PredicateNode { node.shape(collecting: &constants) }
        // Both operands, the left one's constants first.
        func pair(_ l: PredicateNode, _ r: PredicateNode) -> (PredicateNode, PredicateNode) {
            let a = inner(l)
            return (a, inner(r))
        }
        switch self {
        case .constant(let value):
            constants.append(value)
            return .constant(value.placeholder)
        case .attribute, .primaryKey, .relatedCount:
            return self
        case .compare(let op, let l, let r):
            let (a, b) = pair(l, r)
            return .compare(op, a, b)
        case .and(let l, let r):
            let (a, b) = pair(l, r)
            return .and(a, b)
        case .or(let l, let r):
            let (a, b) = pair(l, r)
            return .or(a, b)
        case .coalesce(let l, let r):
            let (a, b) = pair(l, r)
            return .coalesce(a, b)
        case .nullPropagating(let test, let then):
            let (a, b) = pair(test, then)
            return .nullPropagating(a, b)
        case .string(let op, let l, let r):
            let (a, b) = pair(l, r)
            return .string(op, a, b)
        case .arithmetic(let op, let l, let r):
            let (a, b) = pair(l, r)
            return .arithmetic(op, a, b)
        case .conditional(let test, let a, let b):
            let (t, x) = pair(test, a)
            return .conditional(t, x, inner(b))
        case .isIn(let n, let list):
            let a = inner(n)
            constants += list
            return .isIn(a, list.map(\.placeholder))
        case .not(let n):
            return .not(inner(n))
        case .lowercase(let n):
            return .lowercase(inner(n))
        case .length(let n):
            return .length(inner(n))
        case .negate(let n):
            return .negate(inner(n))
        case .toOne(let reference, let n):
            return .toOne(reference, inner(n))
        case .anyRelated(let reference, let n):
            return .anyRelated(reference, inner(n))
        case .allRelated(let reference, let n):
            return .allRelated(reference, inner(n))
        }
    }
}

extension StoredValue {
    /// A value of the same kind, standing for this one in a ``PredicateNode``'s shape.
    fileprivate var placeholder: StoredValue {
        switch self {
        case .null: .null
        case .integer: .integer(0)
        case .real: .real(0)
        case .text: .text("")
        case .blob: .blob(Data())
        }
    }
}
