public import Foundation

/// The state of one translation from a Foundation `Predicate` to a ``PredicateNode``.
struct PredicateTranslator {
    let schema: Schema
    /// The entity of the objects the predicate tests (inside `contains(where:)`, the related
    /// objects').
    let entity: EntityDescription
    let propertyName: (AnyKeyPath) -> String?
    /// What each predicate variable stands for: the object itself, an object a chain of to-one
    /// relationships leads to, or an already translated value.
    var bindings: [PredicateExpressions.VariableID: Binding] = [:]

    enum Binding {
        case object
        case related([ResolvedRelationship])
        case value(PredicateNode)
    }

    func unsupported(_ what: String) -> LoomError {
        LoomError(.unsupportedPredicate, "A predicate on \(entity.name) uses \(what), which Loom cannot translate into a store query. Rewrite it with comparisons, &&, ||, !, ??, contains, starts(with:), localizedStandardContains, optional chaining through to-one relationships (author?.name), or contains(where:), allSatisfy, isEmpty and count on to-many relationships.", entity: entity.name)
    }

    /// A translator for the objects of a to-many relationship, inside `contains(where:)` or
    /// `allSatisfy`: `variable` is the related object; variables of the enclosing closure are
    /// out of reach.
    func scope(_ destination: EntityDescription, _ variable: PredicateExpressions.VariableID) -> PredicateTranslator {
        PredicateTranslator(schema: schema, entity: destination, propertyName: { destination.modelType?.loomPropertyName(for: $0) },
                            bindings: [variable: .object])
    }

    /// The property a key path names in `entity`. A key path rooted at a class `entity`
    /// inherits from (`(trip as? BusinessTrip)?.company` on a `ConferenceTrip`) names it too.
    func name(of keyPath: AnyKeyPath, in entity: EntityDescription) -> String? {
        if entity === self.entity, let name = propertyName(keyPath) { return name }
        var owner: EntityDescription? = entity
        while let current = owner {
            if let name = current.modelType?.loomPropertyName(for: keyPath) { return name }
            owner = current.superentity
        }
        return nil
    }

    /// Whether the objects this translation tests are of `type`'s entity or one of its
    /// sub-entities (for `is` and `as?`): a fetch across a hierarchy translates its predicate
    /// for each entity, so the answer is known here.
    func entityIsKind(of type: Any.Type) throws(LoomError) -> Bool {
        guard let model = type as? any PersistentModel.Type else {
            throw unsupported("a type test or cast to \(type), which is not a model class")
        }
        return entity.isKind(of: model.entity)
    }

    /// Always true (or always false) for every object, in every store's SQL.
    static func always(_ value: Bool) -> PredicateNode {
        .compare(value ? .equal : .notEqual, .primaryKey, .primaryKey)
    }

    /// `node` evaluated at the end of a chain of to-one relationships.
    func wrap(_ path: [ResolvedRelationship], _ node: PredicateNode) -> PredicateNode {
        path.reversed().reduce(node) { .toOne($1.reference, $0) }
    }

    /// The key a chain of to-one relationships leads to (NULL when one is empty).
    func foreignKey(_ path: [ResolvedRelationship]) -> PredicateNode {
        guard let last = path.last else { return .primaryKey }
        return wrap(Array(path.dropLast()), .attribute(last.storage.foreignKeySlot))
    }

    /// The chain of to-one relationships a predicate variable stands for (`[]` for the object
    /// itself), or `nil` when it is not an object.
    func objectPath(ofVariable key: PredicateExpressions.VariableID) -> [ResolvedRelationship]? {
        switch bindings[key] {
        case .object: []
        case .related(let path): path
        default: nil
        }
    }

    /// The chain of to-one relationships a model-typed expression stands for (`[]` for the
    /// object itself), or `nil` when the expression is not an object.
    func objectPath(_ expression: Any) throws(LoomError) -> [ResolvedRelationship]? {
        if let variable = expression as? any LoomVariableExpression { return objectPath(ofVariable: variable.loomKey) }
        if let unwrap = expression as? any LoomForcedUnwrapExpression { return try objectPath(unwrap.loomInner) }
        // `($0 as? Podcast)?.host`: the fetched object's relationship, where it is of that
        // entity (``castIsNull(_:)`` answers for the others).
        if let flatMap = expression as? any LoomOptionalFlatMapExpression, let cast = try castOfFetchedObject(flatMap.loomWrapped),
           try entityIsKind(of: cast.loomDesiredType) {
            var inner = self
            inner.bindings[flatMap.loomVariable] = .object
            return try inner.objectPath(flatMap.loomTransform)
        }
        // `$0.author?.publisher`: a flatMap whose result is itself an object.
        if let flatMap = expression as? any LoomOptionalFlatMapExpression, let base = try objectPath(flatMap.loomWrapped), !base.isEmpty {
            var inner = self
            inner.bindings[flatMap.loomVariable] = .related(base)
            return try inner.objectPath(flatMap.loomTransform)
        }
        if let keyPath = expression as? any LoomKeyPathExpression, let base = try objectPath(keyPath.loomRoot) {
            let owner = base.last?.destination ?? entity
            guard let name = name(of: keyPath.loomKeyPath, in: owner), let j = owner.relationshipIndex(named: name),
                  owner.relationships[j].kind == .toOne else { return nil }
            return base + [schema.relationship(j, of: owner)]
        }
        return nil
    }

    /// Whether `expression` reads through a cast of the fetched object to an entity it is not
    /// of (`($0 as? Podcast)?.host` on a film): nil for every object of this translation.
    func castIsNull(_ expression: Any) throws(LoomError) -> Bool {
        guard let flatMap = expression as? any LoomOptionalFlatMapExpression else { return false }
        if let cast = try castOfFetchedObject(flatMap.loomWrapped) { return try !entityIsKind(of: cast.loomDesiredType) }
        return try castIsNull(flatMap.loomWrapped)
    }

    /// `expression` as a cast of the fetched object (`$0 as? Podcast`), or `nil`.
    func castOfFetchedObject(_ expression: Any) throws(LoomError) -> (any LoomConditionalCastExpression)? {
        guard let cast = expression as? any LoomConditionalCastExpression, try objectPath(cast.loomInput)?.isEmpty == true else { return nil }
        return cast
    }

    /// The to-many relationship a collection-typed expression reads, with the chain of to-one
    /// relationships leading to its owner.
    func collectionPath(_ expression: Any) throws(LoomError) -> (path: [ResolvedRelationship], relationship: ResolvedRelationship)? {
        guard let keyPath = expression as? any LoomKeyPathExpression, let base = try objectPath(keyPath.loomRoot) else { return nil }
        let owner = base.last?.destination ?? entity
        guard let name = name(of: keyPath.loomKeyPath, in: owner), let j = owner.relationshipIndex(named: name),
              owner.relationships[j].isToMany else { return nil }
        return (base, schema.relationship(j, of: owner))
    }

    func translate(_ expression: some PredicateExpression) throws(LoomError) -> PredicateNode {
        try translate(any: expression)
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
            return .constant(stored)
        }
        if let id = value as? any LoomObjectIDConvertible {
            return .constant(.integer(id.loomErased.primaryKey))
        }
        throw unsupported("a constant of type \(type(of: value))")
    }

    /// Rejects ordering on attributes whose Swift order differs from their stored order.
    func checkOrderable(_ node: PredicateNode) throws(LoomError) {
        var node = node
        var owner = entity
        while case .toOne(let reference, let inner) = node, let r = schema.relationship(reference) {
            owner = r.destination
            node = inner
        }
        if case .attribute(let i) = node, i < owner.attributes.count, !owner.attributes[i].type.isOrderable {
            throw unsupported("an ordering comparison on \(owner.name).\(owner.attributes[i].name), \(English.a(owner.attributes[i].type.rawValue)) attribute whose stored form does not sort like its values")
        }
    }
}

extension PredicateNode {
    /// Whether the node is read at the end of exactly these to-one relationships.
    func follows(_ path: [RelationshipReference]) -> Bool {
        guard let first = path.first else { return true }
        if case .toOne(let reference, let inner) = self, reference == first { return inner.follows(Array(path.dropFirst())) }
        return false
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
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        if let stored = StoredValue.convertingCommon(value) { return .constant(stored) }
        return try t.constant(value)
    }
}

extension StoredValue {
    /// ``converting(_:)`` for the most common constant types, told by a metadata comparison
    /// instead of an existential cast (costly, for every constant); `nil` for any other
    /// type, which ``converting(_:)`` handles. The same conversion (`storedValue`) either way.
    static func convertingCommon<T>(_ value: T) -> StoredValue? {
        if T.self == Int.self { return unsafeBitCast(value, to: Int.self).storedValue }
        if T.self == Double.self { return unsafeBitCast(value, to: Double.self).storedValue }
        if T.self == Int64.self { return unsafeBitCast(value, to: Int64.self).storedValue }
        if T.self == Bool.self { return unsafeBitCast(value, to: Bool.self).storedValue }
        if T.self == Date.self { return unsafeBitCast(value, to: Date.self).storedValue }
        if T.self == String.self, let string = value as? String { return string.storedValue }
        return nil
    }
}

extension PredicateExpressions.NilLiteral: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode { .constant(.null) }
}

extension PredicateExpressions.Variable: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        switch t.bindings[key] {
        case .value(let node): return node
        case .object: return .primaryKey
        case .related(let path): return t.foreignKey(path)
        case nil: throw t.unsupported("a variable from an enclosing scope (inside contains(where:) or allSatisfy, only the related object is in reach)")
        }
    }
}

extension PredicateExpressions.KeyPath: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        let path: AnyKeyPath = keyPath
        // A property of the object or of an object reached through to-one relationships:
        // `$0.title`, `$0.author?.name`, `$0.author!.publisher?.name`, `$0.objectID`. The
        // common root, a variable, is told by its type (a metadata comparison) rather than by
        // `objectPath`'s existential casts, costly for every key path of every query.
        let objectBase: [ResolvedRelationship]? = if Root.self == PredicateExpressions.Variable<Root.Output>.self {
            t.objectPath(ofVariable: unsafeBitCast(root, to: PredicateExpressions.Variable<Root.Output>.self).key)
        } else {
            try t.objectPath(root)
        }
        if let base = objectBase {
            let owner = base.last?.destination ?? t.entity
            // A stored property (one table lookup), else `objectID` (a key-path literal, which
            // is instantiated at every comparison: asked second).
            guard let name = t.name(of: path, in: owner) else {
                if let model = owner.modelType, model._loomIsObjectIDKeyPath(path) { return t.foreignKey(base) }
                throw t.unsupported("the key path \(keyPath), which is not a stored property of \(owner.name)")
            }
            if let i = owner.attributeIndex(named: name) { return t.wrap(base, .attribute(i)) }
            if let j = owner.relationshipIndex(named: name) {
                if owner.relationships[j].kind == .toOne { return t.wrap(base, .attribute(owner.relationshipSlots[j])) }
                throw t.unsupported("the to-many relationship \(owner.name).\(name) as a value (use contains(where:), allSatisfy, isEmpty or count on it)")
            }
            throw t.unsupported("the key path \(keyPath), which is not a stored property of \(owner.name)")
        }
        // `$0.books.count`, `$0.books.isEmpty`.
        if let (base, relationship) = try t.collectionPath(root) {
            switch relationship.destination.modelType?._loomCollectionProperty(path) {
            case .count?: return t.wrap(base, .relatedCount(relationship.reference))
            case .isEmpty?: return t.wrap(base, .compare(.equal, .relatedCount(relationship.reference), .constant(.integer(0))))
            case nil: throw t.unsupported("the key path \(keyPath) on the to-many relationship \(relationship.reference)")
            }
        }
        // Properties of a value: `$0.title.count`, `.isEmpty`, `.localizedLowercase`.
        let value = try t.translate(root)
        if path == \String.count || path == \Data.count { return .length(value) }
        if path == \String.isEmpty || path == \Data.isEmpty { return .compare(.equal, .length(value), .constant(.integer(0))) }
        if path == \String.localizedLowercase { return .lowercase(value) }
        throw t.unsupported("the key path \(keyPath)")
    }
}

protocol LoomVariableExpression { var loomKey: PredicateExpressions.VariableID { get } }
extension PredicateExpressions.Variable: LoomVariableExpression { var loomKey: PredicateExpressions.VariableID { key } }

protocol LoomKeyPathExpression {
    var loomRoot: Any { get }
    var loomKeyPath: AnyKeyPath { get }
}
extension PredicateExpressions.KeyPath: LoomKeyPathExpression {
    var loomRoot: Any { root }
    var loomKeyPath: AnyKeyPath { keyPath }
}

protocol LoomForcedUnwrapExpression { var loomInner: Any { get } }

protocol LoomOptionalFlatMapExpression {
    var loomWrapped: Any { get }
    var loomVariable: PredicateExpressions.VariableID { get }
    var loomTransform: Any { get }
}
extension PredicateExpressions.OptionalFlatMap: LoomOptionalFlatMapExpression {
    var loomWrapped: Any { wrapped }
    var loomVariable: PredicateExpressions.VariableID { variable.key }
    var loomTransform: Any { transform }
}
extension PredicateExpressions.ForcedUnwrap: LoomForcedUnwrapExpression { var loomInner: Any { inner } }

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
        try t.comparison(op, try t.translate(lhs), try t.translate(rhs))
    }
}

extension PredicateTranslator {
    /// An ordering comparison of two translated operands.
    func comparison(_ op: PredicateExpressions.ComparisonOperator, _ l: PredicateNode, _ r: PredicateNode) throws(LoomError) -> PredicateNode {
        try checkOrderable(l)
        try checkOrderable(r)
        let op: PredicateNode.ComparisonOperator = switch op {
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

extension PredicateExpressions.TypeCheck: LoomTranslatableExpression {
    /// `$0 is BusinessTrip`: true for the objects of `BusinessTrip`'s entity and its sub-entities.
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        guard let path = try t.objectPath(input), path.isEmpty else {
            throw t.unsupported("a type test (is) on anything but the fetched object")
        }
        return PredicateTranslator.always(try t.entityIsKind(of: Desired.self))
    }
}

/// `$0 as? BusinessTrip`, as the optional of an `OptionalFlatMap` (`($0 as? BusinessTrip)?.company`).
protocol LoomConditionalCastExpression {
    var loomInput: Any { get }
    var loomDesiredType: Any.Type { get }
}
extension PredicateExpressions.ConditionalCast: LoomConditionalCastExpression {
    var loomInput: Any { input }
    var loomDesiredType: Any.Type { Desired.self }
}

extension PredicateExpressions.ConditionalCast: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        throw t.unsupported("a cast (as?) used other than to read a property of its result, as in ($0 as? BusinessTrip)?.company")
    }
}

extension PredicateExpressions.OptionalFlatMap: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        // `($0 as? BusinessTrip)?.…`: the object itself where it is one, else NULL.
        if let cast = wrapped as? any LoomConditionalCastExpression {
            guard let path = try t.objectPath(cast.loomInput), path.isEmpty else {
                throw t.unsupported("a cast (as?) of anything but the fetched object")
            }
            guard try t.entityIsKind(of: cast.loomDesiredType) else { return .constant(.null) }
            var inner = t
            inner.bindings[variable.key] = .object
            return try inner.translate(transform)
        }
        // `($0 as? Podcast)?.host?.…` on another entity: nil throughout.
        if try t.castIsNull(wrapped) { return .constant(.null) }
        // `$0.author?.…`: inside, the variable is the related object.
        if let path = try t.objectPath(wrapped), !path.isEmpty {
            var inner = t
            inner.bindings[variable.key] = .related(path)
            let node = try inner.translate(transform)
            // A value read through the same relationships is NULL already when one is empty.
            if node.follows(path.map(\.reference)) { return node }
            return .nullPropagating(t.foreignKey(path), node)
        }
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

extension PredicateExpressions.SequenceContainsWhere: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        try t.relatedTest("contains(where:)", sequence, variable.key, test, PredicateNode.anyRelated)
    }
}

extension PredicateExpressions.SequenceAllSatisfy: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        try t.relatedTest("allSatisfy", sequence, variable.key, test, PredicateNode.allRelated)
    }
}

extension PredicateTranslator {
    /// `$0.books.contains { … }` and `allSatisfy`: `test` on the members of a to-many
    /// relationship, with `variable` bound to each member.
    func relatedTest(_ name: String, _ sequence: Any, _ variable: PredicateExpressions.VariableID, _ test: Any,
                     _ make: (RelationshipReference, PredicateNode) -> PredicateNode) throws(LoomError) -> PredicateNode {
        guard let (path, relationship) = try collectionPath(sequence) else {
            throw unsupported("`\(name)` on something other than a to-many relationship")
        }
        let node = try scope(relationship.destination, variable).translate(any: test)
        return wrap(path, make(relationship.reference, node))
    }
}

extension PredicateExpressions.SequenceContains: LoomTranslatableExpression {
    func loomNode(_ t: PredicateTranslator) throws(LoomError) -> PredicateNode {
        // `[constants].contains($0.attribute)`
        guard let constant = sequence as? any LoomConstantExpression else {
            throw t.unsupported("`contains` on a sequence that is not a constant (for a to-many relationship, use contains(where:) with the object's ID)")
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
