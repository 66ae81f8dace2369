public import SwiftSyntax
import SwiftSyntaxBuilder
public import SwiftSyntaxMacros

/// `@_PersistedProperty(index:)`: turns a persistent property into accessors of its `ObjectBacking`.
///
/// `@Model` attaches it to each persistent property; users don't write it. A property with an
/// initial value also gets an empty `init` accessor, so that it may keep its initial value: the
/// value itself reaches the store through the entity's default value. The getter reports the
/// read and the setter the change to the Observation framework, through the `ObservationSlot`
/// that `@Model` adds. The compiler plugin (`LoomMacros`) declares `PersistedPropertyMacro`
/// conforming to this protocol. Nonisolated and static, like every macro expansion: the
/// compiler's plugin process runs it.
public protocol PersistedPropertyMacroExpansion: AccessorMacro {}

extension PersistedPropertyMacroExpansion {
    public static func expansion(
        of node: AttributeSyntax,
        providingAccessorsOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self),
            variable.bindings.count == 1, let binding = variable.bindings.first,
            let name = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier.trimmed,
            let type = binding.typeAnnotation?.type,
            let index = index(in: node)
        else { return [] }
        let observation = ModelDeclaration.observationName
        let withBacking = ModelDeclaration.withBackingName
        var accessors: [AccessorDeclSyntax] = []
        if binding.initializer != nil {
            accessors.append("init(initialValue) {}")
        }
        accessors.append(
            """
            get {
                \(raw: observation).access(self, keyPath: \\.\(name))
                return \(raw: withBacking) { $0.value(at: Self.\(raw: ModelDeclaration.propertyOffsetName) &+ \(literal: index), as: \(type.metatypeOperand).self) }
            }
            """)
        accessors.append(
            """
            set {
                \(raw: observation).withMutation(of: self, keyPath: \\.\(name)) {
                    \(raw: withBacking) { $0.setValue(newValue, at: Self.\(raw: ModelDeclaration.propertyOffsetName) &+ \(literal: index), of: self) }
                }
            }
            """)
        return accessors
    }

    /// The integer literal of the `index:` argument.
    private static func index(in attribute: AttributeSyntax) -> Int? {
        guard case .argumentList(let arguments) = attribute.arguments,
            let argument = arguments.first(where: { $0.label?.text == "index" }),
            let literal = argument.expression.as(IntegerLiteralExprSyntax.self)
        else { return nil }
        return Int(literal.literal.text)
    }
}
