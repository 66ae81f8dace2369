public import Foundation

/// The state of one translation from a Foundation `Predicate` to a ``PredicateNode``.
struct PredicateTranslator {
    let entity: EntityDescription
    let propertyName: (AnyKeyPath) -> String?
    /// What each predicate variable stands for: the object itself, or an already translated value.
    var bindings: [PredicateExpressions.VariableID: Binding] = [:]

    enum Binding {
        case object
        case value(PredicateNode)
    }

    func unsupported(_ what: String) -> LoomError {
        LoomError(.unsupportedPredicate, "A predicate on \(entity.name) uses \(what), which Loom cannot translate into a store query. Rewrite it with comparisons, &&, ||, !, ??, contains, starts(with:) or localizedStandardContains.", entity: entity.name)
    }

    func translate(_ expression: some PredicateExpression) throws(LoomError) -> PredicateNode {
        guard let translatable = expression as? any LoomTranslatableExpression else {
            throw unsupported("`\(PredicateTranslator.name(of: type(of: expression)))`")
        }
        return try translatable.loomNode(self)
    }

    func translate(any expression: Any) throws(LoomError) -> PredicateNode {
        guard let translatable = expression as? any LoomTranslatableExpression else {
            throw unsupported("`\(PredicateTranslator.name(of: type(of: expression)))`")
        }
        return try translatable.loomNode(self)
    }

    /// `PredicateExpressions.Equal<…>` → `Equal`.
    static func name(of type: Any.Type) -> String {
        let full = String(describing: type)
        return String(full.prefix { $0 != "<" })
    }

    func constant(_ value: Any) throws(LoomError) -> PredicateNode {
        if let stored = StoredValue.converting(value) {
            if case .text(let text) = stored, text.utf8.contains(0) {
                throw unsupported("a string constant containing a NUL character, which stores cannot compare exactly")
            }
            return .constant(stored)
        }
        if let id = value as? any LoomObjectIDConvertible {
            return .constant(.integer(id.loomErased.primaryKey))
        }
        throw unsupported("a constant of type \(type(of: value))")
    }

    func attributeNode(named name: String) throws(LoomError) -> PredicateNode {
        guard let index = entity.attributeIndex(named: name) else {
            throw unsupported("the key path to '\(name)', which is not a stored attribute of \(entity.name)")
        }
        return .attribute(index)
    }

    /// Rejects ordering on attributes whose Swift order differs from their stored order.
    func checkOrderable(_ node: PredicateNode) throws(LoomError) {
        if case .attribute(let i) = node, !entity.attributes[i].type.isOrderable {
            throw unsupported("an ordering comparison on \(entity.name).\(entity.attributes[i].name), a \(entity.attributes[i].type.rawValue) attribute whose stored form does not sort like its values")
        }
    }
}

/// A Foundation predicate expression Loom can translate.
protocol LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode
}

protocol LoomObjectIDConvertible { var loomErased: AnyObjectID { get } }
extension AnyObjectID: LoomObjectIDConvertible { var loomErased: AnyObjectID { self } }
extension ObjectID: LoomObjectIDConvertible { var loomErased: AnyObjectID { erased } }

extension PredicateExpressions.Value: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { try t.constant(value) }
}

extension PredicateExpressions.NilLiteral: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .constant(.null) }
}

extension PredicateExpressions.Variable: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        switch t.bindings[key] {
        case .value(let node): return node
        case .object: return .primaryKey
        case nil: throw t.unsupported("a variable from an enclosing scope")
        }
    }
}

extension PredicateExpressions.KeyPath: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        // `$0.attribute`
        if let variable = root as? any LoomVariableExpression, case .object = t.bindings[variable.loomKey] {
            if let name = t.propertyName(keyPath) { return try t.attributeNode(named: name) }
            throw t.unsupported("the key path \(keyPath), which is not a stored attribute of \(t.entity.name)")
        }
        // Properties of a value: `$0.title.count`, `.isEmpty`, `.localizedLowercase`.
        let base = try t.translate(root)
        let path: AnyKeyPath = keyPath
        if path == \String.count || path == \Data.count { return .length(base) }
        if path == \String.isEmpty || path == \Data.isEmpty { return .compare(.equal, .length(base), .constant(.integer(0))) }
        if path == \String.localizedLowercase { return .lowercase(base) }
        throw t.unsupported("the key path \(keyPath)")
    }
}

protocol LoomVariableExpression { var loomKey: PredicateExpressions.VariableID { get } }
extension PredicateExpressions.Variable: LoomVariableExpression { var loomKey: PredicateExpressions.VariableID { key } }

extension PredicateExpressions.Conjunction: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .and(try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.Disjunction: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .or(try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.Negation: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .not(try t.translate(wrapped)) }
}

extension PredicateExpressions.Equal: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .compare(.equal, try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.NotEqual: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .compare(.notEqual, try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.Comparison: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        let l = try t.translate(lhs), r = try t.translate(rhs)
        try t.checkOrderable(l)
        try t.checkOrderable(r)
        let op: PredicateNode.ComparisonOperator = switch self.op {
        case .lessThan: .less
        case .lessThanOrEqual: .lessOrEqual
        case .greaterThan: .greater
        case .greaterThanOrEqual: .greaterOrEqual
        }
        return .compare(op, l, r)
    }
}

extension PredicateExpressions.NilCoalesce: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .coalesce(try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.ForcedUnwrap: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { try t.translate(inner) }
}

extension PredicateExpressions.OptionalFlatMap: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        let wrappedNode = try t.translate(wrapped)
        var inner = t
        inner.bindings[variable.key] = .value(wrappedNode)
        return .nullPropagating(wrappedNode, try inner.translate(transform))
    }
}

extension PredicateExpressions.Conditional: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .conditional(try t.translate(test), try t.translate(trueBranch), try t.translate(falseBranch))
    }
}

extension PredicateExpressions.CollectionContainsCollection: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .string(.contains, try t.translate(base), try t.translate(other))
    }
}

extension PredicateExpressions.SequenceStartsWith: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .string(.hasPrefix, try t.translate(base), try t.translate(prefix))
    }
}

extension PredicateExpressions.SequenceContains: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        // `[constants].contains($0.attribute)`
        guard let constant = sequence as? any LoomConstantExpression else {
            throw t.unsupported("`contains` on a sequence that is not a constant (relationships come later)")
        }
        guard let elements = constant.loomElements else { throw t.unsupported("`contains` on a value that is not a sequence") }
        var list: [StoredValue] = []
        list.reserveCapacity(elements.count)
        for element in elements {
            guard case .constant(let v) = try t.constant(element) else { continue }
            list.append(v)
        }
        return .isIn(try t.translate(element), list)
    }
}

protocol LoomConstantExpression { var loomElements: [Any]? { get } }
extension PredicateExpressions.Value: LoomConstantExpression {
    var loomElements: [Any]? {
        guard let sequence = value as? any Sequence else { return nil }
        return Self.elements(of: sequence)
    }
    private static func elements<S: Sequence>(of s: S) -> [Any] { s.map { $0 as Any } }
}

extension PredicateExpressions.Arithmetic: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        let o: PredicateNode.ArithmeticOperator = switch op {
        case .add: .add
        case .subtract: .subtract
        case .multiply: .multiply
        }
        return .arithmetic(o, try t.translate(lhs), try t.translate(rhs))
    }
}

extension PredicateExpressions.IntDivision: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .arithmetic(.divide, try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.FloatDivision: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .arithmetic(.divide, try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.IntRemainder: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .arithmetic(.remainder, try t.translate(lhs), try t.translate(rhs)) }
}

extension PredicateExpressions.UnaryMinus: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .negate(try t.translate(wrapped)) }
}

extension PredicateExpressions.StringLocalizedStandardContains: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        .string(.containsIgnoringCaseAndDiacritics, try t.translate(root), try t.translate(other))
    }
}

extension PredicateExpressions {
    /// `string.localizedStandardContains(other)` inside `#Predicate`: case- and
    /// diacritic-insensitive containment. Foundation on Apple platforms has its own; Loom adds
    /// it where Foundation lacks it, so the same predicate compiles everywhere.
    public struct StringLocalizedStandardContains<Root: PredicateExpression, Other: PredicateExpression>: PredicateExpression, Sendable
    where Root.Output: StringProtocol, Other.Output: StringProtocol, Root: Sendable, Other: Sendable {
        public typealias Output = Bool
        public let root: Root
        public let other: Other

        public init(root: Root, other: Other) {
            self.root = root
            self.other = other
        }

        public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
            LoomStringFunctions.evaluate(.containsIgnoringCaseAndDiacritics, String(try root.evaluate(bindings)), String(try other.evaluate(bindings)))
        }
    }

    /// Builds ``StringLocalizedStandardContains``; called by the `#Predicate` macro.
    @_disfavoredOverload
    public static func build_localizedStandardContains<Root, Other>(_ root: Root, _ other: Other) -> StringLocalizedStandardContains<Root, Other> {
        StringLocalizedStandardContains(root: root, other: other)
    }
}

extension PredicateExpressions.StringLocalizedStandardContains: StandardPredicateExpression
where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}

extension PredicateExpressions.StringLocalizedStandardContains: Codable where Root: Codable, Other: Codable {}
