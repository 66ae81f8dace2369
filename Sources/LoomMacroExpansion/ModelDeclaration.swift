import SwiftDiagnostics
import SwiftSyntax

/// What `@Model` reads from the body of a class: its persistent properties, its `#Unique` and
/// `#Index` constraints, and the mistakes it found along the way.
///
/// Every role of `@Model` builds the same reading from the same class, so the index a property
/// gets from the member-attribute role matches its place in the entity the member role writes.
/// Only the member role reports ``diagnostics``, so each mistake is reported once.
struct ModelDeclaration {
    /// The class name as written, for generated code.
    let typeName: TokenSyntax

    /// The class name as the entity is named in the store.
    var entityName: String { typeName.plainName }

    /// `"public "`, `"package "` or `""`: what the members that satisfy `PersistentModel` need.
    let accessPrefix: String

    /// Whether the class is `final`; the initializer a protocol requires is `required` otherwise.
    let isFinal: Bool

    /// Whether the class has generic parameters, which `@Model` doesn't support.
    let isGeneric: Bool

    /// Where the class stands in a hierarchy of models, which decides what the member role
    /// generates (see ``Hierarchy``).
    var hierarchy: Hierarchy = .finalRoot

    /// `@Model(abstract: true)`: the entity has no objects of its own, only its sub-entities'.
    var isAbstract = false

    /// Where a `@Model` class stands in a hierarchy of models.
    enum Hierarchy {
        /// A final class with no model superclass: its members are static and private, as
        /// they were before Loom had inheritance (the fastest form).
        case finalRoot
        /// A non-final class with no model superclass: it holds the slots its subclasses
        /// share, and its entity, key paths and property names dispatch on the class.
        case openRoot
        /// A subclass of a model class (the compiler asks for no `PersistentModel`
        /// conformance: the class already has it): it overrides what its superclass dispatches.
        case subentity
    }

    /// The persistent properties, in declaration order; a property's index is its place here.
    private(set) var properties: [PersistentProperty] = []

    /// The names of each `#Unique` constraint, in declaration order.
    private(set) var uniquenessConstraints: [[String]] = []

    /// The names of each `#Index` index, in declaration order.
    private(set) var indexes: [[String]] = []
    /// `@Model(originalName: "…")`: the entity's name in the previous model version, as written.
    var originalName: ExprSyntax?

    /// The mistakes found in the class body.
    private(set) var diagnostics: [Diagnostic] = []
    /// `#Unique` and `#Index` names that are not properties of the class body: mistakes, unless
    /// the class is a sub-entity (they may be inherited; its entity description checks them
    /// when the schema is built).
    private(set) var unknownConstraintNames: [Diagnostic] = []
    private var unknownNames: Set<String> = []

    /// Once ``hierarchy`` is known: a class that is not a sub-entity cannot inherit, so the
    /// names of its body that are not properties leave its constraints (their diagnostics say
    /// so); a sub-entity's stay, for its entity description to check.
    mutating func settleConstraintNames() {
        guard hierarchy != .subentity, !unknownNames.isEmpty else { return }
        let unknown = unknownNames
        uniquenessConstraints = uniquenessConstraints.map { $0.filter { !unknown.contains($0) } }.filter { !$0.isEmpty }
        indexes = indexes.map { $0.filter { !unknown.contains($0) } }.filter { !$0.isEmpty }
    }

    /// The name of the stored property that `@Model` adds; it is never persistent.
    static let backingName = "_loomBacking"
    /// The name of the stored property that holds the backing (see `ObjectSlot`).
    static let slotName = "_loomSlot"
    /// The name of the function through which accessors reach the backing.
    static let withBackingName = "_loomWithBacking"
    /// The name of the stored property that holds the observation registrar (see `ObservationSlot`).
    static let observationName = "_loomObservation"
    /// The name of the static member that holds how many properties the class inherits.
    static let propertyOffsetName = "_loomPropertyOffset"
    /// The name of the private static property that holds a class's entity in a hierarchy.
    static let entityStorageName = "_loomEntityDescription"
    /// The name of the private static function through which a subclass reads its superentity.
    static let superentityName = "_loomSuperentity"

    init(_ declaration: ClassDeclSyntax) {
        typeName = declaration.name.trimmed
        let modifiers = declaration.modifiers
        if modifiers.contains(anyOf: [.public, .open]) {
            accessPrefix = "public "
        } else if modifiers.contains(anyOf: [.package]) {
            accessPrefix = "package "
        } else {
            accessPrefix = ""
        }
        isFinal = modifiers.contains(anyOf: [.final])
        hierarchy = isFinal ? .finalRoot : .openRoot
        isGeneric = declaration.genericParameterClause != nil
        if let generics = declaration.genericParameterClause {
            diagnostics.append(Diagnostic(node: generics, message: LoomDiagnostic.genericClass))
        }

        let members = declaration.memberBlock.members.map(\.decl)
        for member in members {
            guard let variable = member.as(VariableDeclSyntax.self) else { continue }
            let reading = Self.reading(variable)
            if let property = reading.property { properties.append(property) }
            diagnostics += reading.diagnostics
        }
        let names = Set(properties.map(\.name))
        for member in members {
            guard let expansion = member.as(MacroExpansionDeclSyntax.self) else { continue }
            switch expansion.macroName.plainName {
            case "Unique":
                uniquenessConstraints += readConstraint(expansion, persistentNames: names)
            case "Index":
                indexes += readConstraint(expansion, persistentNames: names)
            default:
                break
            }
        }
    }

    /// The index of the persistent property that `variable` declares, if it declares one.
    func index(of variable: VariableDeclSyntax) -> Int? {
        guard let property = Self.reading(variable).property else { return nil }
        return properties.firstIndex { $0.name == property.name }
    }

    // MARK: - Properties

    /// The persistent property that `variable` declares, if any, and the mistakes in it.
    ///
    /// `static`, `class`, `lazy` and computed properties are not persistent, nor are `@Transient`
    /// ones, which need an initial value because no initializer that Loom writes sets them.
    private static func reading(
        _ variable: VariableDeclSyntax
    ) -> (property: PersistentProperty?, diagnostics: [Diagnostic]) {
        if variable.modifiers.contains(anyOf: [.static, .class, .lazy]) { return (nil, []) }
        let bindings = variable.bindings

        if variable.attributes.attribute(named: "Transient") != nil {
            let isVar = variable.bindingSpecifier.tokenKind == .keyword(.var)
            // Not `bindings.filter`, which makes a new collection whose nodes have no source location.
            let uninitialized = bindings.compactMap { binding -> PatternSyntax? in
                let needsValue = binding.accessorBlock.isStored && binding.initializer == nil
                    && !(isVar && binding.typeAnnotation?.type.isImplicitlyNil == true)
                return needsValue ? binding.pattern : nil
            }
            let message = LoomDiagnostic.transientWithoutInitialValue
            return (nil, uninitialized.map { Diagnostic(node: $0, message: message) })
        }

        if bindings.contains(where: { $0.accessorBlock.isComputed }) { return (nil, []) }
        if let accessors = bindings.lazy.compactMap(\.accessorBlock).first {
            let diagnostic = Diagnostic(
                node: accessors, message: LoomDiagnostic.observedProperty, fixIt: addTransient(to: variable))
            return (nil, [diagnostic])
        }
        if variable.bindingSpecifier.tokenKind == .keyword(.let) {
            let replaceWithVar = FixIt(
                message: LoomFixIt.replaceLetWithVar,
                changes: [.replace(
                    oldNode: Syntax(variable.bindingSpecifier),
                    newNode: Syntax(variable.bindingSpecifier.with(\.tokenKind, .keyword(.var))))])
            let diagnostic = Diagnostic(
                node: variable.bindingSpecifier, message: LoomDiagnostic.persistentLet,
                fixIts: [replaceWithVar, addTransient(to: variable)])
            return (nil, [diagnostic])
        }
        guard bindings.count == 1, let binding = bindings.first,
            let pattern = binding.pattern.as(IdentifierPatternSyntax.self)
        else {
            return (nil, [Diagnostic(node: bindings, message: LoomDiagnostic.multipleBindings)])
        }
        if [backingName, slotName, observationName].contains(pattern.identifier.plainName) { return (nil, []) }
        guard let type = binding.typeAnnotation?.type else {
            let message = LoomDiagnostic.missingType(pattern.identifier.plainName)
            return (nil, [Diagnostic(node: pattern, message: message)])
        }
        let property = PersistentProperty(
            identifier: pattern.identifier, type: type, initialValue: binding.initializer?.value,
            attribute: variable.attributes.attribute(named: "Attribute"),
            relationship: variable.attributes.attribute(named: "Relationship"))
        return (property, [])
    }

    /// The Fix-It that puts `@Transient` before `variable`.
    private static func addTransient(to variable: VariableDeclSyntax) -> FixIt {
        let transient = AttributeSyntax(
            attributeName: IdentifierTypeSyntax(name: .identifier("Transient")),
            trailingTrivia: .space)
        var changed = variable.with(\.leadingTrivia, [])
        changed.attributes.append(.attribute(transient))
        changed.leadingTrivia = variable.leadingTrivia
        return FixIt(
            message: LoomFixIt.addTransient,
            changes: [.replace(oldNode: Syntax(variable), newNode: Syntax(changed))])
    }

    // MARK: - Constraints

    /// The property names of each key path array in a `#Unique` or `#Index`, reporting the ones
    /// that don't name a persistent property.
    private mutating func readConstraint(
        _ expansion: MacroExpansionDeclSyntax, persistentNames: Set<String>
    ) -> [[String]] {
        let macro = expansion.macroName.plainName
        if let argument = expansion.genericArgumentClause?.arguments.first,
            case .type(let type) = argument.argument
        {
            let written = type.trimmedDescription
            if written != "Self", !type.isLoomName(entityName) {
                diagnostics.append(Diagnostic(
                    node: type,
                    message: LoomDiagnostic.wrongModelType(macro, written: written, expected: entityName)))
            }
        }

        var groups: [[String]] = []
        for argument in expansion.arguments {
            guard let array = argument.expression.as(ArrayExprSyntax.self) else {
                diagnostics.append(Diagnostic(
                    node: argument.expression, message: LoomDiagnostic.notAKeyPathArray(macro)))
                continue
            }
            if array.elements.isEmpty {
                diagnostics.append(Diagnostic(node: array, message: LoomDiagnostic.emptyKeyPathArray(macro)))
                continue
            }
            var names: [String] = []
            for element in array.elements {
                guard let name = Self.propertyName(in: element.expression) else {
                    diagnostics.append(Diagnostic(
                        node: element.expression, message: LoomDiagnostic.notAPropertyKeyPath(macro)))
                    continue
                }
                guard persistentNames.contains(name) else {
                    // A subclass may name what it inherits, which its body does not show: the
                    // schema checks those names (see `unknownConstraintNames`).
                    unknownConstraintNames.append(Diagnostic(
                        node: element.expression,
                        message: LoomDiagnostic.notPersistent(macro, property: name, model: entityName)))
                    unknownNames.insert(name)
                    names.append(name)
                    continue
                }
                names.append(name)
            }
            if !names.isEmpty { groups.append(names) }
        }
        return groups
    }

    /// The property that a one-component key path such as `\.title` or `\Book.title` names.
    private static func propertyName(in expression: ExprSyntax) -> String? {
        guard let keyPath = expression.as(KeyPathExprSyntax.self),
            keyPath.components.count == 1,
            let component = keyPath.components.first,
            case .property(let property) = component.component,
            property.genericArgumentClause == nil
        else { return nil }
        return property.declName.baseName.plainName
    }
}
