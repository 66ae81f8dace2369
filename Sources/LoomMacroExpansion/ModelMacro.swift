import SwiftDiagnostics
public import SwiftSyntax
import SwiftSyntaxBuilder
public import SwiftSyntaxMacros

/// `@Model`: makes a class a persistent model whose stored properties live in an `ObjectBacking`.
///
/// The member-attribute role marks each persistent property `@_PersistedProperty(index:)`; the
/// member role adds the backing, the observation slot, the entity description, `init(backing:)`,
/// `init(context:)`, `_loomPropertyName(for:)` and what tells observers of changes; the extension
/// role adds the `PersistentModel` conformance (which makes the class `Observable`).
///
/// The generated code is laid out by hand rather than by swift-syntax's formatter, which would
/// break each `defaultValue: { 0 }` closure over three lines.
///
/// The compiler plugin (`LoomMacros`) declares `ModelMacro` conforming to this protocol, since
/// the compiler finds a macro's type by its module and name; the tests declare their own. Its
/// expansions are nonisolated and static, like every macro's: the compiler's plugin process runs
/// them.
public protocol ModelMacroExpansion: MemberMacro, MemberAttributeMacro, ExtensionMacro {}

extension ModelMacroExpansion {
    public static var formatMode: FormatMode { .disabled }
}

extension ModelMacroExpansion {
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let classDeclaration = declaration.as(ClassDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: LoomDiagnostic.notAClass))
            return []
        }
        var model = ModelDeclaration(classDeclaration)
        if case .argumentList(let arguments) = node.arguments {
            model.originalName = arguments.first { $0.label?.text == "originalName" }?.expression.trimmed
            if let abstract = arguments.first(where: { $0.label?.text == "abstract" })?.expression {
                guard let literal = abstract.as(BooleanLiteralExprSyntax.self) else {
                    context.diagnose(Diagnostic(node: abstract, message: LoomDiagnostic.abstractNotALiteral))
                    return []
                }
                model.isAbstract = literal.literal.tokenKind == .keyword(.true)
            }
        }
        // The compiler asks for the conformances a class lacks: a class that already is a
        // `PersistentModel` without saying so inherits it from a model superclass (SE-0407).
        let asked = protocols.contains { $0.trimmedDescription.hasSuffix("PersistentModel") }
        let saysSo = classDeclaration.inheritanceClause?.inheritedTypes.contains {
            $0.type.trimmedDescription.hasSuffix("PersistentModel")
        } ?? false
        if !asked && !saysSo { model.hierarchy = .subentity }
        model.settleConstraintNames()
        for diagnostic in model.diagnostics + (model.hierarchy == .subentity ? [] : model.unknownConstraintNames) {
            context.diagnose(diagnostic)
        }
        if model.isGeneric { return [] }
        // A subclass shares its root's slots and reaches them through the root's members.
        let storage = model.hierarchy == .subentity ? [] : [
            model.slotDeclaration,
            model.backingDeclaration,
            model.withBackingFunction,
            model.observationDeclaration,
            model.mayBeObservedDeclaration,
        ]
        return storage + [
            model.propertyDidChangeFunction,
        ] + model.entityDeclarations + [
            model.propertyOffsetDeclaration,
            model.backingInitializer,
        ] + (model.isAbstract ? [] : [model.contextInitializer]) + model.propertyNameFunctions + model.keyPathFunctions
    }
}

extension ModelMacroExpansion {
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingAttributesFor member: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        guard let classDeclaration = declaration.as(ClassDeclSyntax.self),
            let variable = member.as(VariableDeclSyntax.self)
        else { return [] }
        let model = ModelDeclaration(classDeclaration)
        guard !model.isGeneric, let index = model.index(of: variable) else { return [] }
        return ["@_PersistedProperty(index: \(literal: index))"]
    }
}

extension ModelMacroExpansion {
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard let classDeclaration = declaration.as(ClassDeclSyntax.self),
            classDeclaration.genericParameterClause == nil, !protocols.isEmpty
        else { return [] }
        let conformances = protocols.map(\.trimmedDescription).joined(separator: ", ")
        return [try ExtensionDeclSyntax("extension \(type.trimmed): \(raw: conformances) {}")]
    }
}

extension ModelDeclaration {
    /// `_loomSlot`, which holds the object's backing (made on first use for an object the app
    /// creates) and takes the object out of its context's registry when it is destroyed.
    /// Every property access reads it; `@exclusivity(unchecked)` spares each read a run-time
    /// exclusivity check. Safe: its only writes are `init(backing:)`
    /// and the first use's `makeBacking`, which call nothing that could read it meanwhile.
    fileprivate var slotDeclaration: DeclSyntax {
        """
        @exclusivity(unchecked) \(raw: sharedPrefix)var \(raw: Self.slotName) = _ObjectSlot()
        """
    }

    /// `private ` for a final class; `final ` for a class whose subclasses use the member.
    private var sharedPrefix: String { hierarchy == .finalRoot ? "private " : "final " }

    /// The entity of the object's own class: static for a final class, dynamic otherwise.
    private var ownEntity: String { hierarchy == .finalRoot ? "\(typeName).entity" : "Self.entity" }

    /// `var _loomBacking`, which holds the values of the persistent properties.
    fileprivate var backingDeclaration: DeclSyntax {
        """
        \(raw: accessPrefix)\(raw: hierarchy == .finalRoot ? "" : "final ")var \(raw: Self.backingName): _ObjectBacking {
            if let backing = \(raw: Self.slotName).current { return backing }
            return \(raw: Self.slotName).makeBacking(for: \(raw: hierarchy == .finalRoot ? "\(typeName).entity" : "type(of: self).entity"))
        }
        """
    }

    /// `_loomWithBacking(_:)`, through which every generated accessor reaches the backing: without
    /// a retain and a release of its own when the backing exists (`ObjectSlot.withCurrentBacking`),
    /// else through `_loomBacking`, which makes it (an object the app created, on first use).
    fileprivate var withBackingFunction: DeclSyntax {
        """
        @inline(__always) \(raw: sharedPrefix)func \(raw: Self.withBackingName)<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
            if let result = \(raw: Self.slotName).withCurrentBacking(body) { return result }
            return body(\(raw: Self.backingName))
        }
        """
    }

    /// `_loomObservation`, which holds the object's `ObservationRegistrar` once a property was
    /// read inside a tracking scope. `@exclusivity(unchecked)` like `_loomSlot`: its only write is
    /// the first tracked read's making of the registrar, and whatever runs meanwhile (an
    /// observer's `onChange` reading the object during a change) has already read the registrar,
    /// or its absence, and never reads it again.
    fileprivate var observationDeclaration: DeclSyntax {
        """
        @exclusivity(unchecked) \(raw: sharedPrefix)var \(raw: Self.observationName) = _ObservationSlot()
        """
    }

    /// `_loomMayBeObserved`, which spares the context telling objects that no one observes.
    fileprivate var mayBeObservedDeclaration: DeclSyntax {
        """
        \(raw: accessPrefix)var _loomMayBeObserved: Bool { \(raw: Self.observationName).mayBeObserved }
        """
    }

    /// `_loomPropertyDidChange(at:)`, through which the context tells the observers of a property
    /// about a change that did not go through its setter (a merge, a refresh, an inverse).
    fileprivate var propertyDidChangeFunction: DeclSyntax {
        let cases = properties.enumerated().map { index, property in
            "    case \(index): \(Self.observationName).didChange(self, keyPath: \\.\(property.identifier))\n"
        }
        if hierarchy == .subentity {
            // Positions count the inherited properties first; the superclass tells of those.
            return """
                \(raw: accessPrefix)override func _loomPropertyDidChange(at index: Int) {
                    switch index - \(typeName).\(raw: Self.propertyOffsetName) {
                \(raw: cases.joined())    default: super._loomPropertyDidChange(at: index)
                    }
                }
                """
        }
        return """
            \(raw: accessPrefix)func _loomPropertyDidChange(at index: Int) {
                switch index {
            \(raw: cases.joined())    default: break
                }
            }
            """
    }

    /// `static let entity`, which describes the class to the store; in a hierarchy, `class var
    /// entity` over a private `_loomEntityDescription`, and `_loomSuperentity()`, through which
    /// a subclass's entity inherits its superclass's.
    fileprivate var entityDeclarations: [DeclSyntax] {
        switch hierarchy {
        case .finalRoot:
            return [entityDeclaration]
        case .openRoot:
            return [
                "private static let \(raw: Self.entityStorageName): EntityDescription = \(raw: entityInitializer)",
                "\(raw: accessPrefix)class var entity: EntityDescription { \(raw: Self.entityStorageName) }",
            ]
        case .subentity:
            return [
                "private static let \(raw: Self.entityStorageName): EntityDescription = \(raw: entityInitializer)",
                "private static func \(raw: Self.superentityName)() -> EntityDescription { super.entity }",
                "\(raw: accessPrefix)override class var entity: EntityDescription { \(raw: Self.entityStorageName) }",
            ]
        }
    }

    /// `_loomPropertyOffset`: how many properties the class inherits, which its accessors add
    /// to the position of their own (0, and folded away, for a class without a model superclass).
    fileprivate var propertyOffsetDeclaration: DeclSyntax {
        if hierarchy == .subentity {
            return "private static let \(raw: Self.propertyOffsetName) = \(raw: Self.entityStorageName).inheritedPropertyCount"
        }
        return "private static var \(raw: Self.propertyOffsetName): Int { 0 }"
    }

    /// `static let entity`, which describes the class to the store.
    private var entityDeclaration: DeclSyntax {
        """
        \(raw: accessPrefix)static let entity: EntityDescription = \(raw: entityInitializer)
        """
    }

    /// `EntityDescription(name: …, properties: […], …)`.
    private var entityInitializer: String {
        var arguments = [
            "name: \(StringLiteralExprSyntax(content: entityName))",
            "modelType: \(typeName).self",
        ]
        if properties.isEmpty {
            arguments.append("properties: []")
        } else {
            let descriptions = properties.map { "        \($0.propertyDescription)," }
            arguments.append("properties: [\n\(descriptions.joined(separator: "\n"))\n    ]")
        }
        if !uniquenessConstraints.isEmpty {
            arguments.append("uniquenessConstraints: \(Self.arrayLiteral(uniquenessConstraints))")
        }
        if !indexes.isEmpty {
            arguments.append("indexes: \(Self.arrayLiteral(indexes))")
        }
        if let originalName {
            arguments.append("originalName: \(originalName)")
        }
        if hierarchy == .subentity {
            arguments.append("superentity: \(Self.superentityName)()")
        }
        if isAbstract {
            arguments.append("isAbstract: true")
        }
        let argumentList = arguments.map { "    \($0)" }.joined(separator: ",\n")
        return "EntityDescription(\n\(argumentList)\n)"
    }

    /// `init(backing:)`, through which the runtime makes objects for stored rows.
    fileprivate var backingInitializer: DeclSyntax {
        if hierarchy == .subentity {
            return """
                \(raw: accessPrefix)required init(backing: _ObjectBacking) {
                    super.init(backing: backing)
                }
                """
        }
        let required = isFinal ? "" : "required "
        return """
            \(raw: accessPrefix)\(raw: required)init(backing: _ObjectBacking) {
                self.\(raw: Self.slotName) = _ObjectSlot(backing)
            }
            """
    }

    /// `init(context:)`, which makes a new object and inserts it into a context.
    fileprivate var contextInitializer: DeclSyntax {
        """
        \(raw: accessPrefix)convenience init(context: ManagedObjectContext) {
            self.init(backing: _ObjectBacking(entity: \(raw: ownEntity)))
            context.insert(self)
        }
        """
    }

    /// `_loomPropertyName(for:)`, which maps a key path to the name of a persistent property.
    ///
    /// In a hierarchy the key paths are rooted at the class the method is called on (a
    /// subclass's `\BusinessTrip.name` is not `\Trip.name`), through a generic helper: a
    /// `\Self.name` literal does not survive the run time in Swift 6.3.
    fileprivate var propertyNameFunctions: [DeclSyntax] {
        func tests(_ root: String) -> String {
            properties.map { property in
                "    if keyPath == \\\(root).\(property.identifier) { return \(StringLiteralExprSyntax(content: property.name)) }\n"
            }.joined()
        }
        switch hierarchy {
        case .finalRoot:
            return ["""
                \(raw: accessPrefix)static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                \(raw: tests(typeName.text))    return nil
                }
                """]
        case .openRoot, .subentity:
            let override = hierarchy == .subentity ? "override " : ""
            let inherited = hierarchy == .subentity ? " ?? super._loomPropertyName(for: keyPath)" : ""
            return [
                """
                \(raw: accessPrefix)\(raw: override)class func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                    _loomPropertyName(in: Self.self, for: keyPath)\(raw: inherited)
                }
                """,
                """
                private static func _loomPropertyName<Root: \(typeName)>(in root: Root.Type, for keyPath: AnyKeyPath) -> String? {
                \(raw: tests("Root"))    return nil
                }
                """,
            ]
        }
    }

    /// `_loomKeyPath(for:optionalChained:)`, which gives the key path of a persistent property,
    /// plain or optional-chained, so that sort descriptors through relationships can be matched.
    ///
    /// A final sub-entity names its own properties on its own type (`\Podcast.host`), not
    /// through the generic helper: a literal on a final class reads the property directly,
    /// while one through a generic `Root: Podcast` goes through the class's table, and a
    /// path built on that (`.host?.name`) then differs from the user's in both equality and
    /// description, so a sort through a leaf's relationship was not recognised.
    fileprivate var keyPathFunctions: [DeclSyntax] {
        func cases(_ root: String) -> String {
            properties.map { property in
                "    case \(StringLiteralExprSyntax(content: property.name)): optionalChained ? \\\(root)?.?.\(property.identifier) : \\\(root).\(property.identifier)\n"
            }.joined()
        }
        switch hierarchy {
        case .finalRoot:
            return ["""
                \(raw: accessPrefix)static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                    switch name {
                \(raw: cases(typeName.text))    default: nil
                    }
                }
                """]
        case .subentity where isFinal:
            return ["""
                \(raw: accessPrefix)override class func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                    switch name {
                \(raw: cases(typeName.text))    default: super._loomKeyPath(for: name, optionalChained: optionalChained)
                    }
                }
                """]
        case .openRoot, .subentity:
            // On the class itself (not a subclass), its own properties' literal key paths: a
            // relationship leading to this class (`\.animal?.name`) is written on its type,
            // and a path built through the generic helper would differ from it.
            let override = hierarchy == .subentity ? "override " : ""
            let inherited = hierarchy == .subentity ? " ?? super._loomKeyPath(for: name, optionalChained: optionalChained)" : ""
            return [
                """
                \(raw: accessPrefix)\(raw: override)class func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                    if Self.self == \(raw: typeName.text).self {
                        return _loomKeyPath(ownPropertyNamed: name, optionalChained: optionalChained)\(raw: inherited)
                    }
                    return _loomKeyPath(in: Self.self, for: name, optionalChained: optionalChained)\(raw: inherited)
                }
                """,
                """
                private static func _loomKeyPath(ownPropertyNamed name: String, optionalChained: Bool) -> AnyKeyPath? {
                    switch name {
                \(raw: cases(typeName.text))    default: nil
                    }
                }
                """,
                """
                private static func _loomKeyPath<Root: \(typeName)>(in root: Root.Type, for name: String, optionalChained: Bool) -> AnyKeyPath? {
                    switch name {
                \(raw: cases("Root"))    default: nil
                    }
                }
                """,
            ]
        }
    }

    /// `[["a", "b"], ["c"]]`.
    private static func arrayLiteral(_ groups: [[String]]) -> String {
        let inner = groups.map { group in
            "[" + group.map { StringLiteralExprSyntax(content: $0).description }.joined(separator: ", ") + "]"
        }
        return "[" + inner.joined(separator: ", ") + "]"
    }
}
