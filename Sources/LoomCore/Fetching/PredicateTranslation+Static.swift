import Foundation

/// A predicate expression whose tree Loom translates with static calls, known from its type.
///
/// The general translation (``LoomTranslatableExpression``) sees each operand as `Any` and
/// finds what it is with a dynamic cast: a costly cast, and often an allocation, per node and
/// per query (a query that runs again has a `#Predicate` of the same type every time, with
/// other constants). The logical operators and comparisons below conform to this protocol when
/// their operands do, so a tree made of them and of the expressions translated as before
/// (``LoomDelegatingStaticExpression``) conforms as a whole: one cast at the root, which the
/// runtime answers from its conformance cache after the first time, then witness calls. Each
/// conformance builds the node the general translation builds; a tree with anything else
/// falls back to it (and its error for what Loom cannot translate).
protocol LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode
}

/// An expression that joins the static translation as a leaf: it is translated as the general
/// translation does, operands included.
protocol LoomDelegatingStaticExpression: LoomStaticExpression, LoomTranslatableExpression {}

extension LoomDelegatingStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { try loomNode(t) }
}

extension PredicateTranslator {
    /// Translates a predicate's expression: statically when its type allows, else through
    /// dynamic casts.
    func translate(predicate expression: Any) throws(LoomError) -> PredicateNode {
        if let expression = expression as? any LoomStaticExpression { return try expression.loomStaticNode(self) }
        return try translate(any: expression)
    }
}

extension PredicateExpressions.Conjunction: LoomStaticExpression where LHS: LoomStaticExpression, RHS: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .and(try lhs.loomStaticNode(t), try rhs.loomStaticNode(t)) }
}

extension PredicateExpressions.Disjunction: LoomStaticExpression where LHS: LoomStaticExpression, RHS: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .or(try lhs.loomStaticNode(t), try rhs.loomStaticNode(t)) }
}

extension PredicateExpressions.Negation: LoomStaticExpression where Wrapped: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .not(try wrapped.loomStaticNode(t)) }
}

extension PredicateExpressions.Equal: LoomStaticExpression where LHS: LoomStaticExpression, RHS: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .compare(.equal, try lhs.loomStaticNode(t), try rhs.loomStaticNode(t))
    }
}

extension PredicateExpressions.NotEqual: LoomStaticExpression where LHS: LoomStaticExpression, RHS: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .compare(.notEqual, try lhs.loomStaticNode(t), try rhs.loomStaticNode(t))
    }
}

extension PredicateExpressions.Comparison: LoomStaticExpression where LHS: LoomStaticExpression, RHS: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        try t.comparison(op, try lhs.loomStaticNode(t), try rhs.loomStaticNode(t))
    }
}

extension PredicateExpressions.NilCoalesce: LoomStaticExpression where LHS: LoomStaticExpression, RHS: LoomStaticExpression {
    func loomStaticNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .coalesce(try lhs.loomStaticNode(t), try rhs.loomStaticNode(t))
    }
}

extension PredicateExpressions.Value: LoomDelegatingStaticExpression {}
extension PredicateExpressions.Variable: LoomDelegatingStaticExpression {}
extension PredicateExpressions.KeyPath: LoomDelegatingStaticExpression {}
extension PredicateExpressions.NilLiteral: LoomDelegatingStaticExpression {}
extension PredicateExpressions.ForcedUnwrap: LoomDelegatingStaticExpression {}
extension PredicateExpressions.OptionalFlatMap: LoomDelegatingStaticExpression {}
extension PredicateExpressions.TypeCheck: LoomDelegatingStaticExpression {}
extension PredicateExpressions.Conditional: LoomDelegatingStaticExpression {}
extension PredicateExpressions.CollectionContainsCollection: LoomDelegatingStaticExpression {}
extension PredicateExpressions.SequenceStartsWith: LoomDelegatingStaticExpression {}
extension PredicateExpressions.SequenceContainsWhere: LoomDelegatingStaticExpression {}
extension PredicateExpressions.SequenceAllSatisfy: LoomDelegatingStaticExpression {}
extension PredicateExpressions.SequenceContains: LoomDelegatingStaticExpression {}
extension PredicateExpressions.StringLocalizedStandardContains: LoomDelegatingStaticExpression {}
extension PredicateExpressions.Arithmetic: LoomDelegatingStaticExpression {}
extension PredicateExpressions.IntDivision: LoomDelegatingStaticExpression {}
extension PredicateExpressions.FloatDivision: LoomDelegatingStaticExpression {}
extension PredicateExpressions.IntRemainder: LoomDelegatingStaticExpression {}
extension PredicateExpressions.UnaryMinus: LoomDelegatingStaticExpression {}
