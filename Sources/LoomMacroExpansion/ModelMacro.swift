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
        }
        for diagnostic in model.diagnostics {
            context.diagnose(diagnostic)
        }
        if model.isGeneric { return [] }
        return [
            model.slotDeclaration,
            model.backingDeclaration,
            model.withBackingFunction,
            model.observationDeclaration,
            model.mayBeObservedDeclaration,
            model.propertyDidChangeFunction,
            model.entityDeclaration,
            model.backingInitializer,
            model.contextInitializer,
            model.propertyNameFunction,
            model.keyPathFunction,
        ]
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
        @exclusivity(unchecked) private var \(raw: Self.slotName) = _ObjectSlot()
        """
    }

    /// `var _loomBacking`, which holds the values of the persistent properties.
    fileprivate var backingDeclaration: DeclSyntax {
        """
        \(raw: accessPrefix)var \(raw: Self.backingName): _ObjectBacking {
            if let backing = \(raw: Self.slotName).current { return backing }
            return \(raw: Self.slotName).makeBacking(for: \(typeName).entity)
        }
        """
    }

    /// `_loomWithBacking(_:)`, through which every generated accessor reaches the backing: without
    /// a retain and a release of its own when the backing exists (`ObjectSlot.withCurrentBacking`),
    /// else through `_loomBacking`, which makes it (an object the app created, on first use).
    fileprivate var withBackingFunction: DeclSyntax {
        """
        @inline(__always) private func \(raw: Self.withBackingName)<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
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
        @exclusivity(unchecked) private var \(raw: Self.observationName) = _ObservationSlot()
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
        return """
            \(raw: accessPrefix)func _loomPropertyDidChange(at index: Int) {
                switch index {
            \(raw: cases.joined())    default: break
                }
            }
            """
    }

    /// `static let entity`, which describes the class to the store.
    fileprivate var entityDeclaration: DeclSyntax {
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
        let argumentList = arguments.map { "    \($0)" }.joined(separator: ",\n")
        return """
            \(raw: accessPrefix)static let entity: EntityDescription = EntityDescription(
            \(raw: argumentList)
            )
            """
    }

    /// `init(backing:)`, through which the runtime makes objects for stored rows.
    fileprivate var backingInitializer: DeclSyntax {
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
            self.init(backing: _ObjectBacking(entity: \(typeName).entity))
            context.insert(self)
        }
        """
    }

    /// `_loomPropertyName(for:)`, which maps a key path to the name of a persistent property.
    fileprivate var propertyNameFunction: DeclSyntax {
        let tests = properties.map { property in
            "    if keyPath == \\\(typeName).\(property.identifier) { return \(StringLiteralExprSyntax(content: property.name)) }\n"
        }
        return """
            \(raw: accessPrefix)static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
            \(raw: tests.joined())    return nil
            }
            """
    }

    /// `_loomKeyPath(for:optionalChained:)`, which gives the key path of a persistent property,
    /// plain or optional-chained, so that sort descriptors through relationships can be matched.
    fileprivate var keyPathFunction: DeclSyntax {
        let cases = properties.map { property in
            "    case \(StringLiteralExprSyntax(content: property.name)): optionalChained ? \\\(typeName)?.?.\(property.identifier) : \\\(typeName).\(property.identifier)\n"
        }
        return """
            \(raw: accessPrefix)static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                switch name {
            \(raw: cases.joined())    default: nil
                }
            }
            """
    }

    /// `[["a", "b"], ["c"]]`.
    private static func arrayLiteral(_ groups: [[String]]) -> String {
        let inner = groups.map { group in
            "[" + group.map { StringLiteralExprSyntax(content: $0).description }.joined(separator: ", ") + "]"
        }
        return "[" + inner.joined(separator: ", ") + "]"
    }
}
